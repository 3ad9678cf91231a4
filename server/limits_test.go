package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// Size-like parameters are clamped to the slot context (512 tokens) and
// the vocabulary (512 tokens for stories260K) before samplers are built:
// a window of 2^31 tokens must not allocate 8 GB. The clamped values are
// what generation_settings reports.
func TestLimitsClampWindows(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name  string
		field string
		value any
		want  float64
	}{
		{"repeat_last_n huge", "repeat_last_n", 2147483647, 512},
		{"repeat_last_n whole context", "repeat_last_n", -1, 512},
		{"repeat_last_n small", "repeat_last_n", 8, 8},
		{"dry_penalty_last_n huge", "dry_penalty_last_n", 2147483647, 512},
		{"dry_allowed_length huge", "dry_allowed_length", 2147483647, 512},
		{"top_k huge", "top_k", 2147483647, 512},
		{"top_k off", "top_k", 0, 0},
		{"n_probs huge", "n_probs", 2147483647, sampling.MaxNProbs},
		{"n_keep huge", "n_keep", 2147483647, 512},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := map[string]any{"prompt": "Once", "n_predict": 2, "repeat_penalty": 1.1, "dry_multiplier": 0.8, c.field: c.value}
			code, out := postJSON(t, ts.URL+"/completion", body)
			require.Equal(t, http.StatusOK, code, "%v", out)
			gs, ok := out["generation_settings"].(map[string]any)
			require.True(t, ok, "%v", out)
			if c.field != "n_keep" {
				assert.Equal(t, c.want, gs[c.field])
			} else {
				assert.Equal(t, c.want, gs["n_keep"])
			}
		})
	}
}

// Lists, nesting and grammars beyond the limits, and grammars that can
// never match, are 400s (413 for more prompts than the server can ever
// queue), with llama.cpp's error shape; the server keeps serving.
func TestLimitsRefused(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	many := func(n int, s string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	deepGrammar := "root ::= " + strings.Repeat("(", 300) + `"a"` + strings.Repeat(")", 300)
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	cases := []struct {
		name, path string
		body       any
		status     int
		contains   string
	}{
		{"empty range", "/completion", map[string]any{"prompt": "x", "grammar": "root ::= [z-a]"}, 400, "grammar"},
		{"token past vocabulary", "/completion", map[string]any{"prompt": "x", "grammar": "root ::= <[999999]>"}, 400, "grammar"},
		{"code point past unicode", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "\U99999999"`}, 400, "grammar"},
		{"NUL characters", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "\u0000\u0000"`}, 400, "grammar"},
		{"deep grammar", "/completion", map[string]any{"prompt": "x", "grammar": deepGrammar}, 400, "grammar"},
		{"grammar stuck after a token", "/completion", map[string]any{"prompt": "x", "n_predict": 4, "grammar": `root ::= "a" [z-a]`}, 400, "grammar"},
		{"schema that cannot match", "/v1/chat/completions", map[string]any{"messages": msgs, "response_format": map[string]any{
			"type": "json_schema", "json_schema": map[string]any{"schema": map[string]any{"type": "string", "pattern": "^[z-a]$"}}}}, 400, ""},
		{"deep JSON", "/completion", `{"prompt":"x","logit_bias":` + deep + `}`, 400, "nests"},
		{"too many stop strings", "/completion", map[string]any{"prompt": "x", "stop": many(65, "a")}, 400, "stop"},
		{"too long stop string", "/completion", map[string]any{"prompt": "x", "stop": []string{strings.Repeat("a", 5000)}}, 400, "stop"},
		{"too many breakers", "/completion", map[string]any{"prompt": "x", "dry_sequence_breakers": many(65, "a")}, 400, "dry_sequence_breakers"},
		{"too many prompts", "/completion", map[string]any{"prompt": many(2000, "Once"), "n_predict": 1}, 413, "at most"},
		{"too many token ids", "/completion", map[string]any{"prompt": make([]int, 600)}, 400, "context"},
		{"prompt text that cannot fit", "/completion", map[string]any{"prompt": strings.Repeat("a", 2<<20)}, 400, "cannot fit"},
		{"tokenize text too long", "/tokenize", map[string]any{"content": strings.Repeat("a", 5<<20)}, 413, "at most"},
		{"tokenize too many pieces", "/tokenize", map[string]any{"content": strings.Repeat("a ", 300_000), "with_pieces": true}, 413, "pieces"},
		{"prompts' probabilities", "/v1/completions", `{"prompt":[` + strings.Repeat(`[`+strings.Repeat("1,", 500)+`1],`, 5) + `[1]],"max_tokens":1,"echo":true,"logprobs":5,"n_probs":256}`, 413, "token probabilities"},
		{"answer's probabilities", "/completion", `{"prompt":["a","b","c","d","e","f"],"n_probs":256,"n_predict":400,"ignore_eos":true}`, 413, "token probabilities"},
		{"detokenize text too long", "/detokenize", `{"tokens":[` + strings.Repeat("374,", 3<<20) + `374]}`, 413, "passes"}, // 7 bytes each
		{"detokenize too many tokens", "/detokenize", `{"tokens":[` + strings.Repeat("1,", maxDetokenizeTokens) + `1]}`, 413, "at most"},
		{"chat text that cannot fit", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a", 2<<20)}}}, 400, "cannot fit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := postJSON(t, ts.URL+c.path, c.body)
			require.Equal(t, c.status, code, "%v", out)
			e, ok := out["error"].(map[string]any)
			require.True(t, ok, "error object in %v", out)
			assert.Equal(t, float64(c.status), e["code"])
			assert.Contains(t, e["message"], c.contains)
		})
	}
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once", "n_predict": 4,
		"dry_multiplier": 0.8, "dry_sequence_breakers": []string{strings.Repeat("long breaker ", 20)}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Len(t, []rune(out["generation_settings"].(map[string]any)["dry_sequence_breakers"].([]any)[0].(string)), maxDRYBreakerRunes)
}

// An embedding or rerank request with more inputs than the engine can
// ever queue is a 413 naming the limit, not a retryable 503.
func TestLimitsEmbeddingInputs(t *testing.T) {
	_, ts := newTestServer(t, Options{Model: testenv.Model(t, "stories260K.gguf"), Engine: engine.Options{
		Embedding: true, Context: llama.ContextOptions{Pooling: llama.PoolingMean, ContextSize: 1024, Threads: 1}, Parallel: 2}})
	inputs := make([]string, 3000)
	for i := range inputs {
		inputs[i] = "hello"
	}
	cases := []struct {
		name, path string
		body       any
		status     int
	}{
		{"oai 3000 inputs", "/v1/embeddings", map[string]any{"input": inputs}, 413},
		{"native 3000 inputs", "/embedding", map[string]any{"content": inputs}, 413},
		{"input that cannot fit", "/v1/embeddings", map[string]any{"input": strings.Repeat("a", 2<<20)}, 400},
		{"a few inputs", "/v1/embeddings", map[string]any{"input": inputs[:8]}, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := postJSON(t, ts.URL+c.path, c.body)
			require.Equal(t, c.status, code, "%v", out)
			if c.status != 200 {
				e, ok := out["error"].(map[string]any)
				require.True(t, ok, "%v", out)
				assert.Equal(t, float64(c.status), e["code"])
			}
		})
	}
}

// Long runs without white space are cut before tokenizing with a BPE
// vocabulary: deepseek-coder's pre-tokenizer crashed the process on a run
// of ~25,000 letters. Ordinary text is tokenized as before.
func TestLimitsLongRuns(t *testing.T) {
	m, err := llama.LoadModel(t.Context(), testenv.Model(t, "vocab/ggml-vocab-deepseek-coder.gguf"), llama.ModelOptions{VocabOnly: true})
	require.NoError(t, err)
	defer m.Close()
	cases := []struct {
		name string
		text string
	}{
		{"letters", strings.Repeat("a", 100_000)},
		{"pairs", strings.Repeat("ab", 60_000)},
		{"punctuation", strings.Repeat(".,", 60_000)},
		{"letters then words", strings.Repeat("x", 40_000) + " and some words"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			toks, err := tokenizeText(m, c.text, llama.TokenizeOptions{AddSpecial: true})
			require.NoError(t, err)
			assert.NotEmpty(t, toks)
			text, err := m.Detokenize(toks, llama.DetokenizeOptions{RemoveSpecial: true})
			require.NoError(t, err)
			assert.Equal(t, c.text, text, "the pieces join back to the text")
		})
	}
	plain := strings.Repeat("Once upon a time, there was a dog. ", 200)
	want, err := m.Tokenize(plain, llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	got, err := tokenizeText(m, plain, llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	assert.Equal(t, want, got, "text without long runs is tokenized as one")

}

// A request whose client has gone before it is prepared never reaches
// the engine: no task is submitted for it.
func TestLimitsClientGoneBeforeSubmit(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	inst := defaultInstance(t, s)
	counter := &countingEngine{engineAPI: inst.Engine}
	inst.Engine = counter
	submitted := counter.submitted.Load
	msgs := `[{"role":"user","content":"hi"}]`
	cases := []struct{ name, path, body string }{
		{"completion", "/completion", `{"prompt":"Once upon a time","n_predict":4}`},
		{"oai completion", "/v1/completions", `{"prompt":"Once upon a time","max_tokens":4}`},
		{"chat", "/v1/chat/completions", `{"messages":` + msgs + `,"max_tokens":4}`},
		{"responses", "/v1/responses", `{"input":"hi","max_output_tokens":4}`},
		{"anthropic", "/v1/messages", `{"model":"m","max_tokens":4,"messages":` + msgs + `}`},
		{"schema", "/completion", `{"prompt":"x","json_schema":{"type":"object","properties":{"a":{"type":"string"}}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := submitted()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, c.path, strings.NewReader(c.body))
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			assert.Equal(t, before, submitted(), "a task was submitted for a client that left")
			assert.NotEqual(t, http.StatusOK, rec.Code)
		})
	}
}

// Grammar and schema errors of the SDK are the client's mistakes (400),
// mapped by type, whatever wraps them.
func TestLimitsErrorMapping(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
	}{
		{"invalid", fmt.Errorf("build: %w", llama.ErrInvalid), 400},
		{"grammar sentinel", fmt.Errorf("build: %w", llama.ErrGrammar), 400},
		{"grammar error", &llama.Error{Code: llama.CodeGrammar, Op: "parse grammar", Msg: "bad"}, 400},
		{"stuck grammar", &llama.Error{Code: llama.CodeGrammar, Op: "sample", Msg: "the grammar allows no next token"}, 400},
		{"wrapped stuck grammar", fmt.Errorf("task: %w", &llama.Error{Code: llama.CodeGrammar, Op: "sample", Msg: "the grammar allows no next token"}), 400},
		{"context size", &engine.ContextSizeError{PromptTokens: 9, CtxSize: 8}, 400},
		{"busy", engine.ErrQueueFull, 503},
		{"too many inputs", tooLarge("x"), 413},
		{"slot busy", &httpError{Status: 409, Type: errInvalidRequest, Msg: "busy", Err: engine.ErrSlotBusy}, 409},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := llamaErrors.render(c.err)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.status, body.(errorBody).Error.Code)
			rec := httptest.NewRecorder()
			llamaErrors.write(rec, c.err)
			assert.Equal(t, c.status, rec.Code)
		})
	}
}

// countingEngine counts the requests submitted to the engine it wraps.
type countingEngine struct {
	engineAPI
	submitted atomic.Int64
}

func (e *countingEngine) Submit(ctx context.Context, t ...*engine.Request) (eventStream, error) {
	e.submitted.Add(int64(len(t)))
	return e.engineAPI.Submit(ctx, t...)
}
