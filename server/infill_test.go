package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/x/llama/engine"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// writeTinyCoder writes a random llama model with deepseek-coder's
// vocabulary, which has the FIM prefix, suffix and middle tokens.
func writeTinyCoder(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coder.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{
		VocabFrom: testenv.Model(t, "vocab/ggml-vocab-deepseek-coder.gguf"),
		NEmbd:     32, NLayer: 1, NHead: 2, NFF: 64, NCtx: 1024, Seed: 3,
	}))
	return path
}

func TestInfillPrompt(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), writeTinyCoder(t), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	sp := m.SpecialTokens()
	require.NotEqual(t, llama.NoToken, sp.FIMPre)
	require.Equal(t, llama.NoToken, sp.FIMSep, "deepseek-coder has no FIM_SEP: snippets are separated by text")
	tok := func(s string) []llama.Token {
		out, err := m.Tokenize(s, llama.TokenizeOptions{})
		require.NoError(t, err)
		return out
	}
	cat := func(parts ...[]llama.Token) []llama.Token {
		var out []llama.Token
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	one := func(t llama.Token) []llama.Token { return []llama.Token{t} }
	in := &infillInput{
		Prefix: embdPrompt{{Text: "def add(a, b):\n    "}},
		Suffix: embdPrompt{{Text: "\n\nprint(add(1, 2))\n"}},
		Extra:  []infillChunk{{Filename: "util.py", Text: "import os\n"}},
		Prompt: "return",
	}
	snippet := cat(tok("\n\n--- snippet ---\n\n"), tok("import os\n"))
	pre, suf := tok("def add(a, b):\n    "), tok("\n\nprint(add(1, 2))\n")
	require.Greater(t, len(pre), 6)
	require.LessOrEqual(t, len(pre), 15)
	require.Greater(t, len(suf), 2)
	tests := []struct {
		name string
		lim  infillLimits
		want []llama.Token
	}{
		{"room for all", infillLimits{NBatch: 256, NPredict: 16, NCtx: 1024},
			cat(snippet, one(sp.BOS), one(sp.FIMPre), pre, tok("return"), one(sp.FIMSuf), suf, one(sp.FIMMid))},
		{"no room for extra", infillLimits{NBatch: 2048, NPredict: -1, NCtx: 512},
			cat(one(sp.BOS), one(sp.FIMPre), pre, tok("return"), one(sp.FIMSuf), suf, one(sp.FIMMid))},
		{"extra cut from the front", infillLimits{NBatch: 256, NPredict: 0, NCtx: 256 + 3},
			cat(snippet[len(snippet)-3:], one(sp.BOS), one(sp.FIMPre), pre, tok("return"), one(sp.FIMSuf), suf, one(sp.FIMMid))},
		{"small batch keeps the prefix end", infillLimits{NBatch: 8, NPredict: 32, NCtx: 64},
			cat(one(sp.BOS), one(sp.FIMPre), pre[len(pre)-6:], tok("return"), one(sp.FIMSuf), one(sp.FIMMid))},
		{"and the suffix start", infillLimits{NBatch: 20, NPredict: 32, NCtx: 64},
			cat(one(sp.BOS), one(sp.FIMPre), pre, tok("return"), one(sp.FIMSuf), suf[:2], one(sp.FIMMid))},
		{"suffix first (--spm-infill)", infillLimits{NBatch: 256, NPredict: 16, NCtx: 1024, SPM: true},
			cat(snippet, one(sp.BOS), one(sp.FIMSuf), suf, one(sp.FIMPre), pre, tok("return"), one(sp.FIMMid))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := infillPrompt(m, in, tc.lim)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestInfill(t *testing.T) {
	_, hs := newTestServer(t, Options{Model: writeTinyCoder(t), Engine: engine.Options{
		Parallel: 1, Context: llama.ContextOptions{ContextSize: 1024, BatchSize: 256, Threads: 1},
	}})
	url := hs.URL
	body := map[string]any{
		"input_prefix": "def add(a, b):\n    ",
		"input_suffix": "\n\nprint(add(1, 2))\n",
		"input_extra":  []map[string]any{{"filename": "util.py", "text": "import os\n"}},
		"prompt":       "return",
		"n_predict":    6, "temperature": 0, "return_tokens": true,
	}
	var res struct {
		Content         string `json:"content"`
		Tokens          []int  `json:"tokens"`
		TokensEvaluated int    `json:"tokens_evaluated"`
		TokensPredicted int    `json:"tokens_predicted"`
		Prompt          string `json:"prompt"`
	}
	require.Equal(t, http.StatusOK, xPost(t, url+"/infill", body, &res))
	assert.Equal(t, 6, res.TokensPredicted)
	assert.Contains(t, res.Prompt, "<｜fim▁begin｜>def add(a, b):\n    return<｜fim▁hole｜>\n\nprint(add(1, 2))\n<｜fim▁end｜>")
	assert.Contains(t, res.Prompt, "--- snippet ---\n\nimport os\n")

	// The same tokens sent to /completion give the same answer.
	m, err := llama.LoadModel(context.Background(), writeTinyCoder(t), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	in := &infillInput{Prefix: embdPrompt{{Text: body["input_prefix"].(string)}}, Suffix: embdPrompt{{Text: body["input_suffix"].(string)}},
		Extra: []infillChunk{{Filename: "util.py", Text: "import os\n"}}, Prompt: "return"}
	toks, err := infillPrompt(m, in, infillLimits{NBatch: 256, NPredict: -1, NCtx: 1024})
	require.NoError(t, err)
	assert.Equal(t, len(toks), res.TokensEvaluated)
	var plain struct {
		Content string `json:"content"`
		Tokens  []int  `json:"tokens"`
	}
	require.Equal(t, http.StatusOK, xPost(t, url+"/completion", map[string]any{
		"prompt": toks, "n_predict": 6, "temperature": 0, "return_tokens": true,
	}, &plain))
	assert.Equal(t, plain.Tokens, res.Tokens)
	assert.Equal(t, plain.Content, res.Content)

	// Streaming ends with a final object like the plain answer.
	events := xStream(t, url+"/infill", merged(body, map[string]any{"stream": true}))
	require.NotEmpty(t, events)
	last := events[len(events)-1]
	assert.Equal(t, true, last["stop"])
	streamed := ""
	for _, e := range events[:len(events)-1] {
		streamed += e["content"].(string)
	}
	assert.Equal(t, res.Content, streamed)

	bad := []struct {
		name string
		body map[string]any
	}{
		{"no prefix", map[string]any{"input_suffix": "x"}},
		{"no suffix", map[string]any{"input_prefix": "x"}},
		{"prompt not a string", map[string]any{"input_prefix": "x", "input_suffix": "y", "prompt": 3}},
		{"extra not an array", map[string]any{"input_prefix": "x", "input_suffix": "y", "input_extra": "z"}},
		{"chunk without text", map[string]any{"input_prefix": "x", "input_suffix": "y", "input_extra": []any{map[string]any{"filename": "a"}}}},
		{"chunk text not a string", map[string]any{"input_prefix": "x", "input_suffix": "y", "input_extra": []any{map[string]any{"text": 1}}}},
		{"filename not a string", map[string]any{"input_prefix": "x", "input_suffix": "y", "input_extra": []any{map[string]any{"text": "t", "filename": 2}}}},
		{"chunk not an object", map[string]any{"input_prefix": "x", "input_suffix": "y", "input_extra": []any{"t"}}},
		{"prefix an object", map[string]any{"input_prefix": map[string]any{}, "input_suffix": "y"}},
		{"bad token in prefix", map[string]any{"input_prefix": []int{1 << 30}, "input_suffix": "y"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var e errorBody
			assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/infill", tc.body, &e))
			assert.Equal(t, errInvalidRequest, e.Error.Type)
		})
	}
}

func TestInfillUnsupported(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	var e errorBody
	require.Equal(t, http.StatusNotImplemented, xPost(t, hs.URL+"/infill", map[string]any{"input_prefix": "a", "input_suffix": "b"}, &e))
	assert.Equal(t, errNotSupported, e.Error.Type)
	assert.Contains(t, e.Error.Message, "Infill is not supported by this model: prefix token is missing. suffix token is missing. middle token is missing.")
}

func merged(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestOllamaGenerateSuffix: /api/generate with a suffix fills in the
// middle as /infill does, whole and streamed, and /api/show says the
// model can (Ollama's "insert").
func TestOllamaGenerateSuffix(t *testing.T) {
	hs := newCoderServer(t)
	prefix, suffix := "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n"
	want := greedyInfill(t, hs.URL, prefix, suffix, 8)

	body := map[string]any{"model": "coder", "prompt": prefix, "suffix": suffix, "stream": false,
		"options": map[string]any{"temperature": 0, "num_predict": 8}}
	code, out := olPost(t, hs.URL+"/api/generate", body)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, out, 1)
	assert.Equal(t, want.Content, out[0].Response)
	assert.Equal(t, want.TokensEvaluated, out[0].PromptEvalCount)
	assert.Equal(t, 8, out[0].EvalCount)
	assert.True(t, out[0].Done)
	assert.Equal(t, "length", out[0].DoneReason)

	code, lines := olPost(t, hs.URL+"/api/generate", merged(body, map[string]any{"stream": true}))
	require.Equal(t, http.StatusOK, code)
	require.Greater(t, len(lines), 1)
	streamed := ""
	for _, l := range lines {
		streamed += l.Response
	}
	assert.Equal(t, want.Content, streamed)
	assert.True(t, lines[len(lines)-1].Done)

	code, show := postJSON(t, hs.URL+"/api/show", map[string]any{"model": "coder"})
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, show["capabilities"], "insert")
}

// TestOpenAICompletionSuffix: /v1/completions with a suffix fills in the
// middle as /infill does, with the OpenAI client, whole and streamed; a
// model without FIM tokens refuses it, naming what is missing.
func TestOpenAICompletionSuffix(t *testing.T) {
	hs := newCoderServer(t)
	prefix, suffix := "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n"
	want := greedyInfill(t, hs.URL, prefix, suffix, 8)

	client := openai.NewClient(option.WithBaseURL(hs.URL+"/v1"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	params := openai.CompletionNewParams{Model: "coder", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prefix)},
		Suffix: openai.String(suffix), MaxTokens: openai.Int(8), Temperature: openai.Float(0)}
	c, err := client.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, c.Choices, 1)
	assert.Equal(t, want.Content, c.Choices[0].Text)
	assert.EqualValues(t, want.TokensEvaluated, c.Usage.PromptTokens)
	assert.EqualValues(t, 8, c.Usage.CompletionTokens)

	// logprobs 0 with a suffix: each token's own, as without one.
	code, raw := postJSON(t, hs.URL+"/v1/completions", map[string]any{"prompt": prefix, "suffix": suffix, "max_tokens": 3, "logprobs": 0})
	require.Equal(t, http.StatusOK, code, "%v", raw)
	lp, _ := raw["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	require.NotNil(t, lp, "%v", raw)
	assert.Len(t, lp["token_logprobs"], 3)

	stream := client.Completions.NewStreaming(context.Background(), params)
	streamed := ""
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			streamed += ch.Text
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, want.Content, streamed)

	for _, tc := range []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"prompt of tokens", map[string]any{"prompt": []int{1, 2}, "suffix": "x"}, `with "suffix", "prompt" must be one string (the text before the insertion point)`},
		{"two prompts", map[string]any{"prompt": []string{"a", "b"}, "suffix": "x"}, `with "suffix", "prompt" must be one string (the text before the insertion point)`},
		{"suffix not a string", map[string]any{"prompt": "a", "suffix": 1}, `"suffix" must be a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e errorBody
			assert.Equal(t, http.StatusBadRequest, xPost(t, hs.URL+"/v1/completions", tc.body, &e))
			assert.Equal(t, tc.msg, e.Error.Message)
		})
	}

	_, plain := newTestServer(t, Options{})
	var e errorBody
	require.Equal(t, http.StatusBadRequest, xPost(t, plain.URL+"/v1/completions", map[string]any{"prompt": "a", "suffix": "b"}, &e))
	assert.Equal(t, `"suffix" needs a model with fill-in-the-middle tokens: prefix token is missing. suffix token is missing. middle token is missing. `, e.Error.Message)
}

// newCoderServer serves the tiny coder model (FIM tokens) on one slot.
func newCoderServer(t *testing.T) *httptest.Server {
	_, hs := newTestServer(t, Options{Model: writeTinyCoder(t), Engine: engine.Options{
		Parallel: 1, Context: llama.ContextOptions{ContextSize: 1024, BatchSize: 256, Threads: 1},
	}})
	return hs
}

// infillAnswer is /infill's greedy answer and the prompt it took.
type infillAnswer struct {
	Content         string `json:"content"`
	TokensEvaluated int    `json:"tokens_evaluated"`
}

// greedyInfill asks url's /infill for n greedy tokens between prefix and
// suffix.
func greedyInfill(t *testing.T, url, prefix, suffix string, n int) infillAnswer {
	t.Helper()
	var want infillAnswer
	require.Equal(t, http.StatusOK, xPost(t, url+"/infill", map[string]any{
		"input_prefix": prefix, "input_suffix": suffix, "n_predict": n, "temperature": 0,
	}, &want))
	require.NotEmpty(t, want.Content)
	return want
}
