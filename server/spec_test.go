package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// specRepeatPrompt is a prompt that makes stories260K repeat text: its own
// greedy continuation of "Once upon a time", then "Once upon a time" again,
// which it continues by retelling the same story.
func specRepeatPrompt(t testing.TB) string {
	t.Helper()
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{CPUOnly: true})
	require.NoError(t, err)
	defer m.Close()
	c, err := m.NewContext(llama.ContextOptions{ContextSize: 512, Threads: 1})
	require.NoError(t, err)
	defer c.Close()
	text := ""
	for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 120}).Seq() {
		require.NoError(t, err)
		text += p.Text
	}
	return "Once upon a time" + text + " Once upon a time"
}

// specCases are the drafters tested: stories260K as its own draft model
// (every draft should be accepted) and the n-gram self-speculation types.
func specCases(t testing.TB) []struct {
	name string
	opts engine.SpeculativeOptions
} {
	return []struct {
		name string
		opts engine.SpeculativeOptions
	}{
		{"draft-simple", engine.SpeculativeOptions{Types: []string{engine.SpecDraftSimple}, DraftModel: testenv.Model(t, "stories260K.gguf"),
			DraftModelOptions: llama.ModelOptions{CPUOnly: true}, DraftThreads: 1, NMax: 8}},
		{"ngram-simple", engine.SpeculativeOptions{Types: []string{engine.SpecNgramSimple}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16}},
		{"ngram-map-k", engine.SpeculativeOptions{Types: []string{engine.SpecNgramMapK}, NgramMapKSizeN: 4, NgramMapKSizeM: 16}},
		{"ngram-cache", engine.SpeculativeOptions{Types: []string{"ngram-cache"}}},
		{"several", engine.SpeculativeOptions{Types: []string{"ngram-simple,draft-simple"}, DraftModel: testenv.Model(t, "stories260K.gguf"),
			DraftModelOptions: llama.ModelOptions{CPUOnly: true}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16}},
	}
}

func specPost(t *testing.T, url string, body any) map[string]any {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

func specGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	return string(raw)
}

// TestServerSpeculative: through HTTP, with 4 slots and 4 requests at
// once, native /completion (streaming and not, with a grammar) and OpenAI
// chat completions give the tokens of a plain server, with timings.draft_n
// and draft_n_accepted; /metrics, /slots and /props show speculation.
func TestServerSpeculative(t *testing.T) {
	rep := specRepeatPrompt(t)
	base := Options{Engine: engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 4096}}}
	_, plain := newTestServer(t, base)
	for _, tc := range specCases(t)[:2] {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			o.Engine.Speculative = tc.opts
			_, ts := newTestServer(t, o)
			reqs := []map[string]any{
				{"prompt": rep, "n_predict": 80, "temperature": 0, "return_tokens": true},
				{"prompt": rep, "n_predict": 60, "temperature": 0, "return_tokens": true, "stream": true},
				{"prompt": rep, "n_predict": 50, "temperature": 0, "return_tokens": true, "grammar": `root ::= [a-z ]+`},
				{"prompt": rep + " The", "n_predict": 70, "temperature": 0, "return_tokens": true, "stream": true},
			}
			type answer struct {
				tokens  []any
				content string
				timings map[string]any
				types   string
			}
			run := func(url string, req map[string]any) answer {
				var a answer
				if req["stream"] == true {
					sseLines(t, url+"/completion", req, func(line string) {
						data, ok := strings.CutPrefix(line, "data: ")
						if !ok {
							return
						}
						var ch map[string]any
						require.NoError(t, json.Unmarshal([]byte(data), &ch))
						if toks, ok := ch["tokens"].([]any); ok {
							a.tokens = append(a.tokens, toks...)
						}
						a.content += ch["content"].(string)
						if tm, ok := ch["timings"].(map[string]any); ok {
							a.timings = tm
						}
					})
					return a
				}
				out := specPost(t, url+"/completion", req)
				a.tokens, _ = out["tokens"].([]any)
				a.content = out["content"].(string)
				a.timings = out["timings"].(map[string]any)
				a.types, _ = out["generation_settings"].(map[string]any)["speculative.types"].(string)
				return a
			}
			want := make([]answer, len(reqs))
			for i, r := range reqs {
				want[i] = run(plain.URL, r)
				assert.NotContains(t, want[i].timings, "draft_n")
				if reqs[i]["stream"] != true {
					assert.Equal(t, "none", want[i].types)
				}
			}
			got := make([]answer, len(reqs))
			var wg sync.WaitGroup
			for i, r := range reqs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = run(ts.URL, r)
				}()
			}
			wg.Wait()
			for i := range reqs {
				require.NotEmpty(t, got[i].tokens)
				require.Equal(t, want[i].tokens, got[i].tokens, "request %d", i)
				require.Equal(t, want[i].content, got[i].content, "request %d", i)
				require.Contains(t, got[i].timings, "draft_n", "request %d", i)
				require.Contains(t, got[i].timings, "draft_n_accepted", "request %d", i)
				n, acc := got[i].timings["draft_n"].(float64), got[i].timings["draft_n_accepted"].(float64)
				assert.Positive(t, n)
				assert.LessOrEqual(t, acc, n)
				if reqs[i]["stream"] != true {
					assert.Equal(t, o.Engine.Speculative.TypesString(), got[i].types)
				}
			}
			// OpenAI chat completions report the same timings fields.
			chat := specPost(t, ts.URL+"/v1/chat/completions", map[string]any{
				"messages":    []map[string]any{{"role": "user", "content": rep}},
				"temperature": 0, "max_tokens": 60,
			})
			tm := chat["timings"].(map[string]any)
			require.Contains(t, tm, "draft_n")
			require.Contains(t, tm, "draft_n_accepted")
			assert.LessOrEqual(t, tm["draft_n_accepted"].(float64), tm["draft_n"].(float64))
			// The request's limits are checked.
			for _, bad := range []map[string]any{{"speculative.n_max": -1}, {"speculative.n_min": "x"}, {"speculative.p_min": 1.5}, {"speculative.p_min": -0.1}, {"speculative.p_min": "x"}} {
				bad["prompt"] = "Once"
				data, _ := json.Marshal(bad)
				resp, err := http.Post(ts.URL+"/completion", "application/json", bytes.NewReader(data))
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v", bad)
			}
			metrics := specGet(t, ts.URL+"/metrics")
			for _, name := range []string{"spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total"} {
				assert.Contains(t, metrics, "llamacpp:"+name+" ")
				assert.NotContains(t, metrics, "llamacpp:"+name+" 0\n")
			}
			assert.Contains(t, metrics, `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} `)
			var slots []map[string]any
			require.NoError(t, json.Unmarshal([]byte(specGet(t, ts.URL+"/slots")), &slots))
			require.Len(t, slots, 4)
			for _, sl := range slots {
				assert.Equal(t, true, sl["speculative"])
				assert.Equal(t, o.Engine.Speculative.TypesString(), sl["params"].(map[string]any)["speculative.types"])
			}
		})
	}
	var slots []map[string]any
	require.NoError(t, json.Unmarshal([]byte(specGet(t, plain.URL+"/slots")), &slots))
	assert.Equal(t, false, slots[0]["speculative"])
	assert.NotContains(t, specGet(t, plain.URL+"/metrics"), "spec_decode_num_accepted_tokens_per_pos_total")
}
