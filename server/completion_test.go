package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// postJSON posts body and returns the status and decoded JSON answer.
func postJSON(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	code, raw := postRaw(t, url, body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body: %s", raw)
	return code, out
}

func postRaw(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	resp, err := http.Post(url, "application/json", rd)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// sseEvents posts body and returns the "data:" payloads of the stream.
func sseEvents(t *testing.T, url string, body any) []string {
	t.Helper()
	var out []string
	sseLines(t, url, body, func(line string) {
		if p, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, p)
		} else if strings.HasPrefix(line, "error: ") {
			t.Fatalf("stream error: %s", line)
		}
	})
	return out
}

func TestCompletionGreedyStory(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{
		"prompt": "Once upon a time", "temperature": 0, "n_predict": 32,
	})
	require.Equal(t, http.StatusOK, code, "%v", out)
	content, _ := out["content"].(string)
	assert.True(t, strings.HasPrefix(content, ", there was a little girl named Lily"), "content %q", content)
	assert.Equal(t, float64(32), out["tokens_predicted"])
	assert.Equal(t, "limit", out["stop_type"])
	assert.Equal(t, false, out["truncated"])
	assert.Contains(t, out, "timings")
	assert.Contains(t, out, "generation_settings")
}

func TestCompletionStreamMatchesWhole(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	req := map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 24}
	code, whole := postJSON(t, ts.URL+"/completion", req)
	require.Equal(t, http.StatusOK, code)

	req["stream"] = true
	events := sseEvents(t, ts.URL+"/completion", req)
	require.Greater(t, len(events), 2)
	var text strings.Builder
	var tokens int
	var last map[string]any
	for i, e := range events {
		var chunk map[string]any
		require.NoError(t, json.Unmarshal([]byte(e), &chunk), e)
		text.WriteString(chunk["content"].(string))
		tokens += len(chunk["tokens"].([]any))
		if i < len(events)-1 {
			assert.Equal(t, false, chunk["stop"])
		}
		last = chunk
	}
	assert.Equal(t, whole["content"], text.String())
	assert.Equal(t, 24, tokens)
	assert.Equal(t, true, last["stop"])
	assert.Equal(t, "limit", last["stop_type"])
	assert.Equal(t, float64(24), last["tokens_predicted"])
	assert.Contains(t, last, "timings")
	assert.Contains(t, last, "generation_settings")
}

func TestCompletionPromptForms(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	// The token form of "Once upon a time" gives the same story.
	code, tok := postJSON(t, ts.URL+"/tokenize", map[string]any{"content": "Once upon a time", "add_special": true})
	require.Equal(t, http.StatusOK, code, "%v", tok)
	ids := tok["tokens"].([]any)
	code, byText := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 12, "return_tokens": true})
	require.Equal(t, http.StatusOK, code)
	code, byTokens := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": ids, "temperature": 0, "n_predict": 12})
	require.Equal(t, http.StatusOK, code, "%v", byTokens)
	assert.Equal(t, byText["content"], byTokens["content"])
	assert.Equal(t, byText["tokens_evaluated"], byTokens["tokens_evaluated"])
	assert.Len(t, byText["tokens"], 12)
	assert.Empty(t, byTokens["tokens"], "tokens only with return_tokens")

	// Mixed: the leading text gets BOS, the ids follow.
	code, mixed := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": []any{"Once upon", ids[len(ids)-2], ids[len(ids)-1]}, "temperature": 0, "n_predict": 12})
	require.Equal(t, http.StatusOK, code, "%v", mixed)
	assert.Equal(t, byText["tokens_evaluated"], mixed["tokens_evaluated"])
	assert.Equal(t, byText["content"], mixed["content"])

	// Several prompts: an array of results in order.
	code, raw := postRaw(t, ts.URL+"/completion", map[string]any{"prompt": []any{"Once upon a time", "The dog"}, "temperature": 0, "n_predict": 12})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var many []map[string]any
	require.NoError(t, json.Unmarshal(raw, &many))
	require.Len(t, many, 2)
	assert.Equal(t, byText["content"], many[0]["content"])
	assert.Equal(t, float64(0), many[0]["index"])
	assert.Equal(t, float64(1), many[1]["index"])
	assert.NotEqual(t, many[0]["content"], many[1]["content"])

	// Several prompts streamed: chunks carry their prompt's index.
	events := sseEvents(t, ts.URL+"/completion", map[string]any{"prompt": []any{"Once upon a time", "The dog"}, "temperature": 0, "n_predict": 12, "stream": true})
	texts := map[float64]string{}
	stops := 0
	for _, e := range events {
		var chunk map[string]any
		require.NoError(t, json.Unmarshal([]byte(e), &chunk), e)
		texts[chunk["index"].(float64)] += chunk["content"].(string)
		if chunk["stop"] == true {
			stops++
		}
	}
	assert.Equal(t, 2, stops)
	assert.Equal(t, many[0]["content"], texts[0])
	assert.Equal(t, many[1]["content"], texts[1])
}

func TestCompletionOptions(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 16}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	t.Run("stop word", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"stop": []string{"Lily"}}))
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, ", there was a little girl named ", out["content"])
		assert.Equal(t, "word", out["stop_type"])
		assert.Equal(t, "Lily", out["stopping_word"])
	})
	t.Run("n_probs", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"n_probs": 3, "n_predict": 4}))
		require.Equal(t, http.StatusOK, code)
		probs := out["completion_probabilities"].([]any)
		require.Len(t, probs, 4)
		first := probs[0].(map[string]any)
		top := first["top_logprobs"].([]any)
		require.Len(t, top, 3)
		// Greedy: the sampled token is the most likely one.
		assert.Equal(t, top[0].(map[string]any)["id"], first["id"])
		assert.LessOrEqual(t, first["logprob"].(float64), 0.0)
		assert.NotEmpty(t, first["bytes"])
		// After sampling: greedy makes its token certain; top-k 3 at
		// temperature 1 leaves three, whose probabilities sum to 1.
		code, out = postJSON(t, ts.URL+"/completion", base(map[string]any{"n_probs": 2, "n_predict": 2, "post_sampling_probs": true}))
		require.Equal(t, http.StatusOK, code)
		first = out["completion_probabilities"].([]any)[0].(map[string]any)
		assert.Equal(t, 1.0, first["prob"])
		assert.Equal(t, []any{map[string]any{"id": first["id"], "token": first["token"], "bytes": first["bytes"], "prob": 1.0}}, first["top_probs"])
		code, out = postJSON(t, ts.URL+"/completion", base(map[string]any{"n_probs": 5, "n_predict": 2, "post_sampling_probs": true,
			"temperature": 1, "top_k": 3, "top_p": 1, "min_p": 0, "seed": 1}))
		require.Equal(t, http.StatusOK, code)
		first = out["completion_probabilities"].([]any)[0].(map[string]any)
		top = first["top_probs"].([]any)
		require.Len(t, top, 3)
		sum := 0.0
		for _, p := range top {
			sum += p.(map[string]any)["prob"].(float64)
		}
		assert.InDelta(t, 1, sum, 1e-4)
		assert.Greater(t, first["prob"].(float64), 0.0)
	})
	t.Run("backend_sampling", func(t *testing.T) {
		// Greedy on the backend writes what greedy on the CPU does; a
		// seeded request repeats itself; the setting is echoed.
		_, cpu := postJSON(t, ts.URL+"/completion", base(nil))
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"backend_sampling": true}))
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, cpu["content"], out["content"])
		assert.Equal(t, true, out["generation_settings"].(map[string]any)["backend_sampling"])
		seeded := base(map[string]any{"backend_sampling": true, "temperature": 0.8, "seed": 7, "n_predict": 24})
		_, a := postJSON(t, ts.URL+"/completion", seeded)
		_, b := postJSON(t, ts.URL+"/completion", seeded)
		assert.Equal(t, a["content"], b["content"])
		code, _ = postJSON(t, ts.URL+"/completion", base(map[string]any{"backend_sampling": "yes"}))
		assert.Equal(t, http.StatusBadRequest, code)
	})
	t.Run("response_fields", func(t *testing.T) {
		fields := []string{"content", "generation_settings/n_predict", "nope", "timings/predicted_n", "stop_type", "content/x", "completion_probabilities"}
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"response_fields": fields}))
		require.Equal(t, http.StatusOK, code)
		assert.Len(t, out, 4, "%v", out)
		assert.Equal(t, float64(16), out["generation_settings/n_predict"])
		assert.Equal(t, float64(16), out["timings/predicted_n"])
		assert.Equal(t, "limit", out["stop_type"])
	})
	t.Run("logit_bias bans a word", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"logit_bias": [][]any{{" Lily", false}}, "n_predict": 10}))
		require.Equal(t, http.StatusOK, code)
		assert.NotContains(t, out["content"], "Lily")
		assert.True(t, strings.HasPrefix(out["content"].(string), ", there was a little girl named"), out["content"])
	})
	t.Run("grammar", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"grammar": `root ::= ("yes" | "no") "."`}))
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Contains(t, []any{"yes.", "no."}, out["content"])
		assert.Equal(t, "eos", out["stop_type"])
	})
	t.Run("grammar whose readings multiply with the text", func(t *testing.T) {
		// It passes the parser's check; each of its repetitions can start
		// at any character, so the engine's work grows with every token
		// until the request ends with the grammar's error, before a token
		// costs the engine seconds.
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"n_predict": 200,
			"grammar": "root ::=" + strings.Repeat(` [^"]{0,100}`, 128)}))
		assert.Equal(t, http.StatusBadRequest, code, "%v", out)
		assert.Contains(t, fmt.Sprint(out), "too ambiguous for the text so far")
	})
	t.Run("json_schema", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"n_predict": 64,
			"json_schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 0, "maximum": 9}}, "required": []string{"n"}, "additionalProperties": false}}))
		require.Equal(t, http.StatusOK, code, "%v", out)
		var v struct{ N *int }
		require.NoError(t, json.Unmarshal([]byte(out["content"].(string)), &v), out["content"])
		require.NotNil(t, v.N)
	})
	t.Run("n_predict 0 only evaluates the prompt", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", base(map[string]any{"n_predict": 0}))
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Equal(t, "", out["content"])
		assert.Equal(t, float64(0), out["tokens_predicted"])
		assert.Equal(t, float64(5), out["tokens_evaluated"])
	})
	t.Run("timings_per_token", func(t *testing.T) {
		events := sseEvents(t, ts.URL+"/completion", base(map[string]any{"n_predict": 3, "stream": true, "timings_per_token": true}))
		for _, e := range events {
			var chunk map[string]any
			require.NoError(t, json.Unmarshal([]byte(e), &chunk))
			assert.Contains(t, chunk, "timings")
		}
	})
	t.Run("seeded sampling repeats", func(t *testing.T) {
		req := base(map[string]any{"temperature": 1.0, "seed": 42, "top_k": 0, "top_p": 1, "min_p": 0})
		_, a := postJSON(t, ts.URL+"/completion", req)
		_, b := postJSON(t, ts.URL+"/completion", req)
		assert.Equal(t, a["content"], b["content"])
		assert.Equal(t, float64(42), a["generation_settings"].(map[string]any)["seed"])
	})
}

// Every generation route answers, whole and streamed.
func TestCompletionRoutes(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	msgs := []any{map[string]any{"role": "user", "content": "Hi"}}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/completion", map[string]any{"prompt": "Once upon a time"}},
		{"/completions", map[string]any{"prompt": "Once upon a time"}},
		{"/v1/completions", map[string]any{"prompt": []any{"Once upon a time", "The dog"}}},
		{"/v1/chat/completions", map[string]any{"messages": msgs}},
		{"/chat/completions", map[string]any{"messages": msgs}},
	} {
		t.Run(c.path, func(t *testing.T) {
			c.body["n_predict"] = 4
			c.body["temperature"] = 0
			code, raw := postRaw(t, ts.URL+c.path, c.body)
			require.Equal(t, http.StatusOK, code, "%s", raw)
			require.True(t, json.Valid(raw))
			c.body["stream"] = true
			events := sseEvents(t, ts.URL+c.path, c.body)
			require.NotEmpty(t, events)
			if strings.Contains(c.path, "v1/") || strings.HasPrefix(c.path, "/chat") {
				assert.Equal(t, "[DONE]", events[len(events)-1])
			} else {
				assert.NotEqual(t, "[DONE]", events[len(events)-1])
			}
		})
	}
}

// A request's n_cache_reuse replaces the server's --cache-reuse: after the
// common prefix, a cached chunk the new prompt continues with is shifted
// into place (counted in timings.cache_n) when the chunk is long enough.
func TestCompletionNCacheReuse(t *testing.T) {
	servers := map[int]string{}
	var m *llama.Model
	for _, reuse := range []int{0, 4} {
		// Without the RAM prompt cache, which would restore earlier prompts.
		s, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, CacheReuse: reuse, NoPromptCache: true}})
		servers[reuse] = ts.URL
		m = defaultInstance(t, s).Model
	}
	tok := func(s string, special bool) []llama.Token {
		toks, err := m.Tokenize(s, llama.TokenizeOptions{AddSpecial: special})
		require.NoError(t, err)
		return toks
	}
	P := tok("Once upon a time, there was a little girl named Lily.", true)
	A := tok("She had a big red ball that she liked to throw very high.", false)
	S := tok("One day, Lily went to the park with her mom. The sun was warm and the birds sang.", false)
	T := tok("Then Lily said,", false)
	first := slices.Concat(P, A, S)
	second := slices.Concat(P, S, T)
	p, sl := len(P), len(S)
	require.GreaterOrEqual(t, sl, 8)
	for _, tc := range []struct {
		name        string
		serverReuse int
		nCacheReuse any // nil: not sent
		wantCached  int
	}{
		{"server off, not asked: the common prefix only", 0, nil, p},
		{"server off, asked: the chunk is shifted", 0, 4, p + sl},
		{"server off, asked for longer chunks than there are", 0, sl + 1, p},
		{"server on, not asked: the server's", 4, nil, p + sl},
		{"server on, 0 turns it off", 4, 0, p},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := servers[tc.serverReuse] + "/completion"
			code, out := postJSON(t, url, map[string]any{"prompt": first, "temperature": 0, "n_predict": 2})
			require.Equal(t, http.StatusOK, code, "%v", out)
			body := map[string]any{"prompt": second, "temperature": 0, "n_predict": 2}
			if tc.nCacheReuse != nil {
				body["n_cache_reuse"] = tc.nCacheReuse
			}
			code, out = postJSON(t, url, body)
			require.Equal(t, http.StatusOK, code, "%v", out)
			assert.Equal(t, float64(tc.wantCached), out["timings"].(map[string]any)["cache_n"])
			assert.Equal(t, float64(len(second)-tc.wantCached), out["timings"].(map[string]any)["prompt_n"])
		})
	}
}

// TestCompletionN checks n completions of each prompt (llama-server's
// n_cmpl, and n as its fallback), which SillyTavern's "multiple swipes"
// send to /completion: the completions of a prompt come together, each
// with the request's seed plus its place (as llama-server's child tasks,
// whose answers these equal); n_cmpl wins over n; at most the slots. On
// /v1/completions the prompt counts once in the usage, as OpenAI's.
func TestCompletionN(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	one := func(prompt string, seed int) string {
		code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": prompt, "n_predict": 6, "temperature": 1, "seed": seed})
		require.Equal(t, http.StatusOK, code, out)
		return out["content"].(string)
	}
	contents := func(body map[string]any) []string {
		code, raw := postRaw(t, ts.URL+"/completion", body)
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var res []map[string]any
		require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
		var out []string
		for i, r := range res {
			assert.EqualValues(t, i, r["index"])
			out = append(out, r["content"].(string))
		}
		return out
	}
	base := map[string]any{"prompt": "Once upon a time", "n_predict": 6, "temperature": 1, "seed": 5}
	with := func(kv ...any) map[string]any {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	assert.Equal(t, []string{one("Once upon a time", 5), one("Once upon a time", 6)}, contents(with("n", 2)))
	assert.Equal(t, []string{one("Once upon a time", 5), one("Once upon a time", 6)}, contents(with("n", 1, "n_cmpl", 2)))
	assert.Equal(t, []string{one("Once upon a time", 5), one("Once upon a time", 6), one("The cat", 5), one("The cat", 6)},
		contents(with("prompt", []string{"Once upon a time", "The cat"}, "n", 2)))

	streamed := map[float64]string{}
	sseLines(t, ts.URL+"/completion", with("n", 2, "stream", true), func(l string) {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(d), &ev))
			streamed[ev["index"].(float64)] += ev["content"].(string)
		}
	})
	assert.Equal(t, map[float64]string{0: one("Once upon a time", 5), 1: one("Once upon a time", 6)}, streamed)

	code, out := postJSON(t, ts.URL+"/completion", with("n", 3))
	assert.Equal(t, http.StatusBadRequest, code, "more than the 2 slots: %v", out)

	code, single := postJSON(t, ts.URL+"/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 6, "temperature": 1, "seed": 5})
	require.Equal(t, http.StatusOK, code, single)
	code, two := postJSON(t, ts.URL+"/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 6, "temperature": 1, "seed": 5, "n": 2})
	require.Equal(t, http.StatusOK, code, two)
	choices := asSlice(two["choices"])
	require.Len(t, choices, 2)
	assert.Equal(t, asSlice(single["choices"])[0].(map[string]any)["text"], choices[0].(map[string]any)["text"])
	assert.Equal(t, one("Once upon a time", 6), choices[1].(map[string]any)["text"])
	su, tu := single["usage"].(map[string]any), two["usage"].(map[string]any)
	assert.Equal(t, su["prompt_tokens"], tu["prompt_tokens"], "the prompt counts once")
	assert.EqualValues(t, 12, tu["completion_tokens"])
}

// TestCompletionProbsByCharacter checks completion_probabilities as
// llama-server makes them, which clients that build the text from the
// entries read (Mikupad, token streaming off): a character split over
// byte tokens has one entry, the completing token's, with the whole
// character; the end-of-text token's entry has no text (it sends none).
// Whole, streamed (no event for a token that leaves a character
// incomplete) and in chat logprobs.
func TestCompletionProbsByCharacter(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	body := map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 30, "n_probs": 3, "grammar": `root ::= " 日本"`}
	type entry struct {
		Token string `json:"token"`
		Bytes []int  `json:"bytes"`
	}
	want := []entry{{" ", []int{32}}, {"日", []int{230, 151, 165}}, {"本", []int{230, 156, 172}}, {"", []int{}}}

	code, raw := postRaw(t, ts.URL+"/completion", body)
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var whole struct {
		Content string  `json:"content"`
		Probs   []entry `json:"completion_probabilities"`
	}
	require.NoError(t, json.Unmarshal(raw, &whole))
	assert.Equal(t, " 日本", whole.Content)
	assert.Equal(t, want, whole.Probs)

	// stream reads the body's stream: its text and its entries, one in
	// each event but the last.
	stream := func() (string, []entry) {
		body["stream"] = true
		defer delete(body, "stream")
		var content strings.Builder
		var streamed []entry
		sseLines(t, ts.URL+"/completion", body, func(l string) {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				var ev struct {
					Content string  `json:"content"`
					Stop    bool    `json:"stop"`
					Probs   []entry `json:"completion_probabilities"`
				}
				require.NoError(t, json.Unmarshal([]byte(d), &ev))
				if !ev.Stop {
					require.Len(t, ev.Probs, 1, "an event per character: %s", d)
				}
				content.WriteString(ev.Content)
				streamed = append(streamed, ev.Probs...)
			}
		})
		return content.String(), streamed
	}
	content, streamed := stream()
	assert.Equal(t, " 日本", content)
	assert.Equal(t, want, streamed)

	// Cut by n_predict after the character's first byte: the last token
	// sends the byte as U+FFFD, with its entry, whole and streamed alike.
	cut := []entry{{" ", []int{32}}, {"\uFFFD", []int{239, 191, 189}}}
	body["n_predict"] = 2
	code, raw = postRaw(t, ts.URL+"/completion", body)
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &whole))
	assert.Equal(t, " \uFFFD", whole.Content)
	assert.Equal(t, cut, whole.Probs)
	content, streamed = stream()
	assert.Equal(t, " \uFFFD", content)
	assert.Equal(t, cut, streamed)

	code, raw = postRaw(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}},
		"temperature": 0, "max_tokens": 30, "logprobs": true, "top_logprobs": 2, "grammar": `root ::= " 日本"`})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var chatAnswer struct {
		Choices []struct {
			Logprobs struct{ Content []entry } `json:"logprobs"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(raw, &chatAnswer))
	require.Len(t, chatAnswer.Choices, 1)
	assert.Equal(t, want, chatAnswer.Choices[0].Logprobs.Content)
}

// TestCompletionLazyGrammar: /completion takes llama-server's lazy grammar
// fields: the text is free until a trigger (a pattern, or a word of one
// token marked preserved), and the grammar holds from there.
func TestCompletionLazyGrammar(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, c := range []struct {
		name     string
		triggers []any
		extra    map[string]any
		from     string // the constrained text starts after it
	}{
		{"pattern", []any{map[string]any{"type": 2, "value": "girl( |$)"}}, nil, "girl "},
		{"word of one token", []any{map[string]any{"type": 1, "value": "little"}}, map[string]any{"preserved_tokens": []string{"little"}}, "little"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := map[string]any{"prompt": "Once upon a time", "n_predict": 40, "temperature": 0,
				"grammar": "root ::= [a-z ]+", "grammar_lazy": true, "grammar_triggers": c.triggers}
			for k, v := range c.extra {
				body[k] = v
			}
			code, out := postJSON(t, ts.URL+"/completion", body)
			require.Equal(t, 200, code, out)
			text := out["content"].(string)
			i := strings.Index(text, c.from)
			require.GreaterOrEqual(t, i, 0, "the trigger fired: %q", text)
			assert.Regexp(t, `^[a-z ]*$`, text[i+len(c.from):], "constrained after the trigger: %q", text)
			assert.NotRegexp(t, `^[a-z ]*$`, text[:i], "free before it: %q", text)
		})
	}
}
