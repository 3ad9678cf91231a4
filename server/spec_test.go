package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// specRepeatPrompt is a prompt that makes stories260K repeat text: its own
// greedy continuation of "Once upon a time", then "Once upon a time" again,
// which it continues by retelling the same story.
func specRepeatPrompt(t testing.TB) string {
	t.Helper()
	_, e := newEngTestEngine(t, EngineOptions{CtxSize: 512})
	m := e.Model()
	r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once upon a time", true), 120))
	return "Once upon a time" + r.text + " Once upon a time"
}

// specCases are the drafters tested: stories260K as its own draft model
// (every draft should be accepted) and the n-gram self-speculation types.
func specCases(t testing.TB) []struct {
	name string
	opts SpeculativeOptions
} {
	return []struct {
		name string
		opts SpeculativeOptions
	}{
		{"draft-simple", SpeculativeOptions{Types: []string{SpecDraftSimple}, DraftModel: engModelPath(t),
			DraftModelOptions: llama.ModelOptions{CPUOnly: true}, DraftThreads: 1, NMax: 8}},
		{"ngram-simple", SpeculativeOptions{Types: []string{SpecNgramSimple}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16}},
		{"ngram-map-k", SpeculativeOptions{Types: []string{SpecNgramMapK}, NgramMapKSizeN: 4, NgramMapKSizeM: 16}},
		{"ngram-cache", SpeculativeOptions{Types: []string{"ngram-cache"}}},
		{"several", SpeculativeOptions{Types: []string{"ngram-simple,draft-simple"}, DraftModel: engModelPath(t),
			DraftModelOptions: llama.ModelOptions{CPUOnly: true}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16}},
	}
}

// TestEngineSpeculativeSameTokens: with each drafter, 4 greedy tasks run at
// once on 4 slots (their drafts checked in shared decodes) give the tokens
// of plain generation, with and without a grammar, and count their drafts.
func TestEngineSpeculativeSameTokens(t *testing.T) {
	rep := specRepeatPrompt(t)
	m, plain := newEngTestEngine(t, EngineOptions{CtxSize: 2048, Parallel: 4})
	type job struct {
		prompt  string
		grammar string
		n       int
	}
	jobs := []job{
		{rep, "", 100},
		{rep + " there was", "", 90},
		{"Once upon a time", "", 80},
		{rep, `root ::= [a-z .,]+`, 60},
	}
	task := func(j job) *Task {
		tk := engGreedyTask(engTokenize(t, m, j.prompt, true), j.n)
		tk.Params.Grammar = j.grammar
		return tk
	}
	want := make([]engResult, len(jobs))
	for i, j := range jobs {
		want[i] = engRun(t, plain, task(j))
	}
	for _, tc := range specCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, EngineOptions{CtxSize: 2048, Parallel: 4, Speculative: tc.opts})
			got := make([]engResult, len(jobs))
			var wg sync.WaitGroup
			for i, j := range jobs {
				ch, err := e.Submit(t.Context(), task(j))
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = engCollect(t, ch)
				}()
			}
			wg.Wait()
			drafted := 0
			for i := range jobs {
				require.NoError(t, got[i].done.Err)
				require.Equal(t, want[i].tokens, got[i].tokens, "job %d", i)
				require.Equal(t, want[i].text, got[i].text, "job %d", i)
				assert.Equal(t, want[i].done.Stop, got[i].done.Stop)
				assert.Equal(t, want[i].done.Generated, got[i].done.Generated)
				tm := got[i].done.Timings
				assert.LessOrEqual(t, tm.DraftNAccepted, tm.DraftN)
				assert.LessOrEqual(t, tm.DraftNAccepted, tm.PredictedN)
				drafted += tm.DraftN
			}
			// The repetition job drafts, and many of its drafts are right.
			tm := got[0].done.Timings
			require.Positive(t, tm.DraftN)
			assert.Greater(t, tm.DraftNAccepted, 20, "%+v", tm)
			if tc.opts.Types[0] == SpecDraftSimple {
				// The model drafting for itself is always right (a draft
				// may still end past the last token kept).
				assert.Greater(t, float64(tm.DraftNAccepted)/float64(tm.DraftN), 0.9, "%+v", tm)
			}
			mt := e.Metrics()
			assert.EqualValues(t, drafted, mt.DraftTokensTotal)
			assert.Positive(t, mt.DraftsTotal)
			assert.Positive(t, mt.DraftAcceptedTotal)
			sum := int64(0)
			for _, n := range mt.DraftAcceptedPerPos {
				sum += n
			}
			assert.Equal(t, mt.DraftAcceptedTotal, sum)
			for _, sl := range e.SlotsInfo() {
				assert.True(t, sl.Speculative)
			}
		})
	}
}

// TestEngineSpeculativeLimits: drafts respect n_predict, stop strings, a
// small context and the request's speculative.n_max; top probabilities
// (n_probs) are those of plain generation.
func TestEngineSpeculativeLimits(t *testing.T) {
	rep := specRepeatPrompt(t)
	spec := SpeculativeOptions{Types: []string{SpecNgramSimple}, NgramSimpleSizeN: 3, NgramSimpleSizeM: 16}
	m, plain := newEngTestEngine(t, EngineOptions{CtxSize: 2048})
	_, e := newEngTestEngine(t, EngineOptions{CtxSize: 2048, Speculative: spec})
	toks := engTokenize(t, m, rep, true)
	_, small := newEngTestEngine(t, EngineOptions{CtxSize: len(toks) + 40, Speculative: spec})
	_, smallPlain := newEngTestEngine(t, EngineOptions{CtxSize: len(toks) + 40})
	_, shift := newEngTestEngine(t, EngineOptions{CtxSize: len(toks) + 40, ContextShift: true, Speculative: spec})
	_, shiftPlain := newEngTestEngine(t, EngineOptions{CtxSize: len(toks) + 40, ContextShift: true})
	tests := []struct {
		name        string
		plain, spec Engine
		edit        func(*Task)
	}{
		{"n_predict", plain, e, func(tk *Task) { tk.NPredict = 37 }},
		{"stop string", plain, e, func(tk *Task) { tk.Stop = []string{"park"} }},
		{"n_probs", plain, e, func(tk *Task) { tk.Params.NProbs = 3 }},
		{"n_max 2", plain, e, func(tk *Task) { tk.SpecNMax = 2 }},
		{"n_min 100", plain, e, func(tk *Task) { tk.SpecNMin = 100 }},
		{"context full", smallPlain, small, func(tk *Task) { tk.NPredict = -1 }},
		{"context shift", shiftPlain, shift, func(tk *Task) { tk.NPredict = 120; tk.NKeep = 8 }},
		{"ignore eos", plain, e, func(tk *Task) { tk.Params.IgnoreEOS = true }},
		{"seeded", plain, e, func(tk *Task) { tk.Params.Temperature, tk.Params.Seed = 0.8, 42 }},
		{"seeded penalties", plain, e, func(tk *Task) {
			tk.Params.Temperature, tk.Params.Seed, tk.Params.RepeatPenalty, tk.Params.DRYMultiplier = 0.5, 7, 1.1, 0.8
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() *Task {
				tk := engGreedyTask(toks, 100)
				tc.edit(tk)
				return tk
			}
			want := engRun(t, tc.plain, mk())
			got := engRun(t, tc.spec, mk())
			require.Equal(t, want.tokens, got.tokens)
			require.Equal(t, want.text, got.text)
			assert.Equal(t, want.done.Stop, got.done.Stop)
			assert.Equal(t, want.done.StoppingWord, got.done.StoppingWord)
			assert.Equal(t, want.done.Truncated, got.done.Truncated)
			// The same candidates; their probabilities come from logits of
			// a larger batch, equal to float rounding.
			for i := range want.events {
				wp, gp := want.events[i].Probs, got.events[i].Probs
				require.Len(t, gp, len(wp), "token %d", i)
				for k := range wp {
					assert.Equal(t, wp[k].Token, gp[k].Token, "token %d", i)
					assert.InDelta(t, wp[k].Prob, gp[k].Prob, 0.01, "token %d", i)
				}
			}
			tm := got.done.Timings
			switch tc.name {
			case "n_max 2":
				require.Positive(t, tm.DraftN)
				assert.LessOrEqual(t, tm.DraftN, 2*(len(got.tokens)-tm.DraftNAccepted))
			case "n_min 100":
				assert.Zero(t, tm.DraftN)
			default:
				assert.Positive(t, tm.DraftN)
			}
		})
	}
}

func TestSpeculativeOptionsErrors(t *testing.T) {
	m := engStoriesModel(t)
	tests := []struct {
		opts SpeculativeOptions
		is   error
		msg  string
	}{
		{SpeculativeOptions{Types: []string{"draft-eagle3"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"ngram-simple,draft-mtp"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"draft-dflash"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"draft-dspark"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"ngram-map-k4v"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"ngram-mod"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"bogus"}}, llama.ErrInvalid, "unknown speculative type"},
		{SpeculativeOptions{Types: []string{"draft-simple"}}, llama.ErrInvalid, "needs a draft model"},
		{SpeculativeOptions{Types: []string{"draft-simple"}, DraftModel: testenv.Model(t, "llama-2-tiny-random.gguf")}, llama.ErrInvalid, "vocabulary"},
		{SpeculativeOptions{Types: []string{"ngram-cache"}, LookupCacheStatic: "/nonexistent/lookup.bin"}, nil, "nonexistent"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.opts.Types, tc.opts.DraftModel != ""), func(t *testing.T) {
			e, err := NewEngine(m, EngineOptions{CtxSize: 256, Threads: 1, Speculative: tc.opts})
			if e != nil {
				e.Close()
			}
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	// "none" wins over the other names, as llama.cpp; a draft model
	// without a type is loaded, checked and not used, as llama-server.
	for _, o := range []SpeculativeOptions{
		{Types: []string{"ngram-simple", "none"}},
		{DraftModel: engModelPath(t), DraftModelOptions: llama.ModelOptions{CPUOnly: true}},
	} {
		assert.Equal(t, "none", o.TypesString())
		e, err := NewEngine(m, EngineOptions{CtxSize: 256, Threads: 1, Speculative: o})
		require.NoError(t, err)
		assert.False(t, e.SlotsInfo()[0].Speculative)
		require.NoError(t, e.Close())
	}
	o := SpeculativeOptions{Types: []string{"draft-simple", "ngram-map-k,ngram-simple"}}
	assert.Equal(t, "ngram-simple,ngram-map-k,draft-simple", o.TypesString())
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
	base := Options{Engine: EngineOptions{Parallel: 4, CtxSize: 4096}}
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
			for _, bad := range []map[string]any{{"speculative.n_max": -1}, {"speculative.n_min": "x"}} {
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

// TestEngineSpeculativeLookupFiles: ngram-cache drafts from llama.cpp
// lookup files (-lcs, -lcd) made of a text the model then writes, and the
// output stays that of plain generation.
func TestEngineSpeculativeLookupFiles(t *testing.T) {
	m, plain := newEngTestEngine(t, EngineOptions{CtxSize: 1024})
	prompt := engTokenize(t, m, "Once upon a time", true)
	want := engRun(t, plain, engGreedyTask(prompt, 120))
	// Statistics of the text to come: drafts from the first token on.
	stats := llama.NewNgramStats()
	all := append(append([]llama.Token(nil), prompt...), want.tokens...)
	stats.Update(all, 1, 4, len(all))
	dir := t.TempDir()
	static, dynamic := dir+"/static.bin", dir+"/dynamic.bin"
	require.NoError(t, stats.Save(static))
	require.NoError(t, stats.Save(dynamic))
	tests := []struct {
		name string
		opts SpeculativeOptions
	}{
		{"static", SpeculativeOptions{Types: []string{SpecNgramCache}, LookupCacheStatic: static}},
		{"static and dynamic", SpeculativeOptions{Types: []string{SpecNgramCache}, LookupCacheStatic: static, LookupCacheDynamic: dynamic}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, EngineOptions{CtxSize: 1024, Speculative: tc.opts})
			got := engRun(t, e, engGreedyTask(prompt, 120))
			require.Equal(t, want.tokens, got.tokens)
			tm := got.done.Timings
			assert.Positive(t, tm.DraftNAccepted, "%+v", tm)
		})
	}
}
