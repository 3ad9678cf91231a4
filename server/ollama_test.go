package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// Ollama's answers as its API documents them, decoded here apart from
// the server's own types.
type (
	olMessage struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			Function struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	olAnswer struct {
		Model           string    `json:"model"`
		CreatedAt       string    `json:"created_at"`
		Message         olMessage `json:"message"`
		Response        string    `json:"response"`
		Done            bool      `json:"done"`
		DoneReason      string    `json:"done_reason"`
		Context         []int     `json:"context"`
		TotalDuration   int64     `json:"total_duration"`
		PromptEvalCount int       `json:"prompt_eval_count"`
		EvalCount       int       `json:"eval_count"`
		Error           string    `json:"error"`
		Logprobs        []olProb  `json:"logprobs"`
	}
	olProb struct {
		Token       string   `json:"token"`
		Logprob     float64  `json:"logprob"`
		Bytes       []int    `json:"bytes"`
		TopLogprobs []olProb `json:"top_logprobs"`
	}
	olModel struct {
		Name, Model string
		Size        int64
		Details     struct {
			Format        string `json:"format"`
			Family        string `json:"family"`
			ParameterSize string `json:"parameter_size"`
		} `json:"details"`
		ContextLength int `json:"context_length"`
	}
)

// olPost posts body to an Ollama endpoint and reads its answer: one
// object, or the lines of a stream.
func olPost(t *testing.T, url string, body any) (int, []olAnswer) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out []olAnswer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var a olAnswer
		require.NoError(t, json.Unmarshal(sc.Bytes(), &a), "%s", sc.Bytes())
		out = append(out, a)
	}
	require.NoError(t, sc.Err())
	if resp.StatusCode == http.StatusOK && len(out) > 1 {
		assert.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, out
}

// olGet reads a GET endpoint's answer into out.
func olGet(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
}

// oaiChatText asks /v1/chat/completions for the same greedy chat.
func oaiChatText(t *testing.T, base string, body map[string]any) (string, string) {
	t.Helper()
	code, out := postJSON(t, base+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, code, "%v", out)
	ch := out["choices"].([]any)[0].(map[string]any)
	return ch["message"].(map[string]any)["content"].(string), ch["finish_reason"].(string)
}

// TestOllamaAPI runs Ollama's endpoints as its clients call them: every
// answer is the one the server's other endpoints give for the same greedy
// request.
func TestOllamaAPI(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	msgs := []map[string]any{{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Once upon a time"}}
	greedy := map[string]any{"temperature": 0, "num_predict": 16}
	wantText, wantFinish := oaiChatText(t, hs.URL, map[string]any{"messages": msgs, "temperature": 0, "max_tokens": 16})
	require.Equal(t, "length", wantFinish)
	chat := func(t *testing.T, body map[string]any) olAnswer {
		t.Helper()
		body["stream"] = false
		code, out := olPost(t, hs.URL+"/api/chat", body)
		require.Equal(t, http.StatusOK, code, "%v", out)
		require.Len(t, out, 1)
		return out[0]
	}

	t.Run("version", func(t *testing.T) {
		var v struct{ Version string }
		olGet(t, hs.URL+"/api/version", &v)
		assert.Equal(t, "0.17.4", v.Version)
	})
	t.Run("tags and ps", func(t *testing.T) {
		for _, path := range []string{"/api/tags", "/api/ps"} {
			var l struct{ Models []olModel }
			olGet(t, hs.URL+path, &l)
			require.Len(t, l.Models, 1, path)
			m := l.Models[0]
			assert.Contains(t, m.Name, "stories260K")
			assert.Equal(t, m.Name, m.Model)
			assert.Equal(t, "gguf", m.Details.Format)
			assert.Equal(t, "llama", m.Details.Family)
			assert.Positive(t, m.Size)
			assert.True(t, strings.HasSuffix(m.Details.ParameterSize, "K"), m.Details.ParameterSize)
			if path == "/api/ps" {
				assert.Equal(t, 512, m.ContextLength, "a slot's context")
			}
		}
	})
	t.Run("show", func(t *testing.T) {
		code, raw := postRaw(t, hs.URL+"/api/show", map[string]any{"model": "stories"})
		require.Equal(t, http.StatusOK, code)
		var s struct {
			ModelInfo    map[string]any `json:"model_info"`
			Capabilities []string
			Template     string
		}
		require.NoError(t, json.Unmarshal(raw, &s))
		assert.EqualValues(t, 2048, s.ModelInfo["llama.context_length"])
		assert.Equal(t, "llama", s.ModelInfo["general.architecture"])
		assert.Equal(t, []string{"completion"}, s.Capabilities)
	})
	t.Run("chat", func(t *testing.T) {
		got := chat(t, map[string]any{"model": "stories", "messages": msgs, "options": greedy})
		assert.Equal(t, wantText, got.Message.Content)
		assert.Equal(t, "assistant", got.Message.Role)
		assert.True(t, got.Done)
		assert.Equal(t, "length", got.DoneReason)
		assert.Equal(t, 16, got.EvalCount)
		assert.Greater(t, got.PromptEvalCount, 5)
		assert.Positive(t, got.TotalDuration)
		assert.Equal(t, "stories", got.Model, "the name asked for")
		assert.NotEmpty(t, got.CreatedAt)
	})
	t.Run("chat stream", func(t *testing.T) {
		// Streaming is the default.
		code, lines := olPost(t, hs.URL+"/api/chat", map[string]any{"model": "stories", "messages": msgs, "options": greedy})
		require.Equal(t, http.StatusOK, code)
		require.Greater(t, len(lines), 2, "the answer comes in pieces")
		var text strings.Builder
		for _, l := range lines[:len(lines)-1] {
			assert.False(t, l.Done)
			assert.Equal(t, "assistant", l.Message.Role)
			text.WriteString(l.Message.Content)
		}
		last := lines[len(lines)-1]
		text.WriteString(last.Message.Content)
		assert.Equal(t, wantText, text.String())
		assert.True(t, last.Done)
		assert.Equal(t, "length", last.DoneReason)
		assert.Equal(t, 16, last.EvalCount)
	})
	t.Run("generate", func(t *testing.T) {
		// A prompt with a system prompt is that chat, rendered by the
		// template.
		code, out := olPost(t, hs.URL+"/api/generate", map[string]any{"model": "stories", "system": "You tell stories.",
			"prompt": "Once upon a time", "options": greedy, "stream": false})
		require.Equal(t, http.StatusOK, code)
		require.Len(t, out, 1)
		assert.Equal(t, wantText, out[0].Response)
		assert.Equal(t, "length", out[0].DoneReason)
		assert.NotEmpty(t, out[0].Context)

		// raw: the prompt as it is, as /completion reads it; "context"
		// holds its tokens and the answer's.
		code, want := postJSON(t, hs.URL+"/completion", map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 16, "cache_prompt": false})
		require.Equal(t, http.StatusOK, code)
		_, tok := postJSON(t, hs.URL+"/tokenize", map[string]any{"content": "Once upon a time", "add_special": true})
		code, lines := olPost(t, hs.URL+"/api/generate", map[string]any{"model": "stories", "prompt": "Once upon a time", "raw": true, "options": greedy})
		require.Equal(t, http.StatusOK, code)
		var text strings.Builder
		for _, l := range lines {
			text.WriteString(l.Response)
		}
		assert.Equal(t, want["content"], text.String())
		last := lines[len(lines)-1]
		require.True(t, last.Done)
		assert.Len(t, last.Context, len(tok["tokens"].([]any))+16)

		// The context continues: the same as the whole text as a raw
		// prompt.
		code, more := olPost(t, hs.URL+"/api/generate", map[string]any{"model": "stories", "prompt": "", "context": last.Context, "raw": true,
			"options": greedy, "stream": false})
		require.Equal(t, http.StatusOK, code, "%v", more)
		code, whole := postJSON(t, hs.URL+"/completion", map[string]any{"prompt": last.Context, "temperature": 0, "n_predict": 16})
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, whole["content"], more[0].Response)

		// An empty prompt (a chat without messages) loads the model, and
		// with keep_alive 0 asks to unload it: the server's one model
		// stays, and the next request runs on it.
		for _, tc := range []struct {
			route  string
			body   map[string]any
			reason string
		}{
			{"/api/generate", map[string]any{"model": "stories"}, "load"},
			{"/api/generate", map[string]any{"model": "stories", "keep_alive": 0}, "unload"},
			{"/api/chat", map[string]any{"model": "stories", "messages": []any{}}, "load"},
			{"/api/chat", map[string]any{"model": "stories", "keep_alive": "0s", "stream": false}, "unload"},
		} {
			code, out = olPost(t, hs.URL+tc.route, tc.body)
			require.Equal(t, http.StatusOK, code, "%v", out)
			require.Len(t, out, 1)
			assert.Equal(t, tc.reason, out[0].DoneReason, "%s %v", tc.route, tc.body)
			assert.True(t, out[0].Done)
			assert.Equal(t, "stories", out[0].Model)
			if tc.route == "/api/chat" {
				assert.Equal(t, "assistant", out[0].Message.Role)
			}
		}
		code, out = olPost(t, hs.URL+"/api/generate", map[string]any{"model": "stories", "prompt": "Once", "options": greedy, "stream": false})
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.NotEmpty(t, out[0].Response)
	})
	t.Run("format", func(t *testing.T) {
		for _, format := range []any{"json", map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}} {
			got := chat(t, map[string]any{"model": "stories", "messages": msgs, "format": format, "options": map[string]any{"temperature": 0, "num_predict": 200}})
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(got.Message.Content), &v), got.Message.Content)
			if _, isSchema := format.(map[string]any); isSchema {
				assert.IsType(t, "", v["name"])
			}
		}
	})
	t.Run("options", func(t *testing.T) {
		// stop and seed reach the sampler; the options of a model's load
		// are ignored.
		got := chat(t, map[string]any{"model": "stories", "messages": msgs,
			"options": map[string]any{"temperature": 0, "num_predict": 16, "stop": []string{" "}, "num_ctx": 99999, "num_gpu": 3, "seed": 4}})
		want, _, _ := strings.Cut(wantText, " ")
		assert.Equal(t, want, got.Message.Content)
		assert.Equal(t, "stop", got.DoneReason)
	})
	t.Run("logprobs", func(t *testing.T) {
		// The same values as the OpenAI route's, whole and streamed, with
		// the alternatives only when asked for.
		code, oai := postJSON(t, hs.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "temperature": 0, "max_tokens": 16,
			"logprobs": true, "top_logprobs": 2})
		require.Equal(t, http.StatusOK, code)
		raw, err := json.Marshal(oai["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)["content"])
		require.NoError(t, err)
		var want []olProb
		require.NoError(t, json.Unmarshal(raw, &want))
		require.Len(t, want, 16)
		got := chat(t, map[string]any{"model": "stories", "messages": msgs, "options": greedy, "logprobs": true, "top_logprobs": 2})
		assert.Equal(t, want, got.Logprobs)
		code, lines := olPost(t, hs.URL+"/api/chat", map[string]any{"model": "stories", "messages": msgs, "options": greedy, "logprobs": true, "top_logprobs": 2})
		require.Equal(t, http.StatusOK, code)
		var streamed []olProb
		for _, l := range lines {
			streamed = append(streamed, l.Logprobs...)
		}
		assert.Equal(t, want, streamed)
		got = chat(t, map[string]any{"model": "stories", "messages": msgs, "options": greedy, "logprobs": true})
		require.Len(t, got.Logprobs, 16)
		for i, p := range got.Logprobs {
			assert.Equal(t, want[i].Token, p.Token)
			assert.InDelta(t, want[i].Logprob, p.Logprob, 1e-6)
			assert.Empty(t, p.TopLogprobs)
		}
		code, out := olPost(t, hs.URL+"/api/generate", map[string]any{"model": "stories", "prompt": "Once upon a time", "raw": true,
			"options": greedy, "logprobs": true, "stream": false})
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Len(t, out[0].Logprobs, 16)
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			path string
			body any
			want string
		}{
			{"/api/chat", map[string]any{"messages": []map[string]any{{"role": "wizard", "content": "x"}}}, `unknown role "wizard"`},
			{"/api/chat", map[string]any{"messages": msgs, "format": "yaml"}, `"format" must be "json" or a JSON Schema`},
			{"/api/chat", map[string]any{"messages": msgs, "think": "maybe"}, `"think" must be`},
			{"/api/chat", map[string]any{"messages": msgs, "options": map[string]any{"temperature": "hot"}}, `"options.temperature" must be a number`},
			{"/api/chat", map[string]any{"messages": msgs, "options": map[string]any{"stop": "x"}}, `"options.stop" must be an array`},
			{"/api/chat", map[string]any{"messages": msgs, "options": map[string]any{"num_predict": 1e30}}, `"options.num_predict" must be`},
			{"/api/generate", map[string]any{"prompt": "x", "options": map[string]any{"num_keep": 1.5}}, `"options.num_keep" must be`},
			{"/api/generate", map[string]any{"prompt": "x", "raw": true, "options": map[string]any{"top_k": 1e40}}, `"options.top_k" must be`},
			{"/api/chat", map[string]any{"messages": []map[string]any{{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"function": map[string]any{"name": "f", "arguments": "[]"}}}}}}, "arguments must be an object"},
			{"/api/chat", map[string]any{"messages": []map[string]any{{"role": "user", "content": "x", "images": []string{"aGVsbG8="}}}}, "mmproj"},
			{"/api/generate", map[string]any{"prompt": "x", "template": "{{ .Prompt }}"}, `"template" is not supported`},
			{"/api/generate", map[string]any{"prompt": "x", "raw": true, "context": []int{1, 1 << 30}}, "not in the vocabulary"},
			{"/api/generate", map[string]any{"prompt": "x", "suffix": "y"}, "Infill is not supported"},
			{"/api/embed", map[string]any{"input": "x"}, "--embeddings"},
			{"/api/embed", map[string]any{"input": 3}, `"input" must be a string or an array of strings`},
			{"/api/chat", map[string]any{"messages": msgs, "logprobs": true, "top_logprobs": 21}, `"top_logprobs" must be between 0 and 20`},
			{"/api/generate", map[string]any{"prompt": "x", "raw": true, "logprobs": true, "top_logprobs": -1}, `"top_logprobs" must be between 0 and 20`},
		} {
			code, out := olPost(t, hs.URL+tc.path, tc.body)
			require.Len(t, out, 1, "%s %v", tc.path, tc.body)
			assert.GreaterOrEqual(t, code, 400, "%s %v", tc.path, tc.body)
			assert.Contains(t, out[0].Error, tc.want, "%s %v", tc.path, tc.body)
		}
		for _, path := range []string{"/api/pull", "/api/create", "/api/blobs/sha256:00"} {
			code, out := olPost(t, hs.URL+path, map[string]any{"model": "x"})
			assert.Equal(t, http.StatusNotImplemented, code, path)
			require.Len(t, out, 1)
			assert.Contains(t, out[0].Error, "is not supported: this server serves the models it was started with")
		}
		// A model the server lists is here: pulling it succeeds (Open
		// WebUI pulls before it uses one), with or without ":latest".
		var tags struct{ Models []olModel }
		olGet(t, hs.URL+"/api/tags", &tags)
		require.NotEmpty(t, tags.Models)
		for _, name := range []string{tags.Models[0].Name, tags.Models[0].Name + ":latest"} {
			code, raw := postRaw(t, hs.URL+"/api/pull", map[string]any{"model": name, "stream": false})
			assert.Equal(t, http.StatusOK, code, name)
			assert.JSONEq(t, `{"status":"success"}`, string(raw), name)
		}
		var health struct{ Status string }
		olGet(t, hs.URL+"/health", &health)
		assert.Equal(t, "ok", health.Status)
	})
}

// TestOllamaEmbed checks /api/embed (normalized) and /api/embeddings (not)
// against the model's own vectors.
func TestOllamaEmbed(t *testing.T) {
	path := writeTinyBert(t, 0, gguf.PoolingCLS)
	base := embeddingServer(t, path, llama.PoolingDefault)
	texts := []string{"I believe the meaning of life is", "hello"}
	var e struct {
		Model           string
		Embeddings      [][]float32
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	code, raw := postRaw(t, base+"/api/embed", map[string]any{"model": "bert", "input": texts})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &e))
	require.Len(t, e.Embeddings, 2)
	for i, text := range texts {
		assert.InDeltaSlice(t, directEmbedding(t, path, llama.PoolingCLS, text, 2)[0], e.Embeddings[i], 1e-4)
	}
	assert.Positive(t, e.PromptEvalCount)
	assert.Equal(t, "bert", e.Model)

	// A long input is cut to a batch unless truncate is false.
	long := strings.Repeat("hello ", 600)
	code, raw = postRaw(t, base+"/api/embed", map[string]any{"input": long})
	assert.Equal(t, http.StatusOK, code, "%s", raw)
	code, raw = postRaw(t, base+"/api/embed", map[string]any{"input": long, "truncate": false})
	assert.Equal(t, http.StatusBadRequest, code, "%s", raw)

	var one struct{ Embedding []float32 }
	code, raw = postRaw(t, base+"/api/embeddings", map[string]any{"model": "bert", "prompt": texts[0]})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &one))
	assert.InDeltaSlice(t, directEmbedding(t, path, llama.PoolingCLS, texts[0], -1)[0], one.Embedding, 1e-4)

	code, raw = postRaw(t, base+"/api/show", map[string]any{"model": "bert"})
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(raw), `"capabilities":["embedding"]`)
}

// promptEngine is a scriptEngine that keeps the prompt of the last task.
type promptEngine struct {
	scriptEngine
	prompt *[]llama.Token
}

func (e promptEngine) Submit(ctx context.Context, tasks ...*engine.Request) (eventStream, error) {
	*e.prompt = tasks[0].Prompt
	return e.scriptEngine.Submit(ctx, tasks...)
}

// TestOllamaToolCalls runs a conversation with a tool through /api/chat on
// Qwen3's template, the model's output scripted: the call comes back
// parsed (whole, and streamed in one line), with the thinking apart, and
// the call and its result go back into the template's prompt.
func TestOllamaToolCalls(t *testing.T) {
	ts, inst, real := newScriptServer(t)
	var prompt []llama.Token
	inst.Engine = promptEngine{scriptEngine{engineAPI: real, stop: engine.StopTypeEOS, pieces: []string{
		"<think>\nRome, so", " the tool.\n</think>\n\n", "<tool_call>\n{\"name\": \"get_weather\", ",
		"\"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"}}, &prompt}
	shown := func() string {
		text, err := inst.Model.Detokenize(prompt, llama.DetokenizeOptions{UnparseSpecial: true})
		require.NoError(t, err)
		return text
	}
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "description": "The weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}
	ask := []map[string]any{{"role": "user", "content": "Weather in Rome?"}}

	code, out := olPost(t, ts.URL+"/api/chat", map[string]any{"model": "qwen", "messages": ask, "tools": tools, "stream": false})
	require.Equal(t, http.StatusOK, code, "%v", out)
	msg := out[0].Message
	assert.Equal(t, "Rome, so the tool.", msg.Thinking)
	assert.Empty(t, msg.Content)
	require.Len(t, msg.ToolCalls, 1)
	assert.Equal(t, "get_weather", msg.ToolCalls[0].Function.Name)
	assert.Equal(t, map[string]any{"city": "Rome"}, msg.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "stop", out[0].DoneReason)
	assert.Contains(t, shown(), "The weather of a city", "the tools reach the template")

	code, lines := olPost(t, ts.URL+"/api/chat", map[string]any{"model": "qwen", "messages": ask, "tools": tools})
	require.Equal(t, http.StatusOK, code)
	var thinking strings.Builder
	var calls int
	for _, l := range lines {
		thinking.WriteString(l.Message.Thinking)
		if len(l.Message.ToolCalls) > 0 {
			calls++
			assert.Equal(t, msg.ToolCalls, l.Message.ToolCalls, "the call, whole")
			assert.False(t, l.Done)
		}
	}
	assert.Equal(t, msg.Thinking, thinking.String())
	assert.Equal(t, 1, calls)
	assert.True(t, lines[len(lines)-1].Done)

	// The call and its result go back; thinking is turned off.
	inst.Engine = promptEngine{scriptEngine{engineAPI: real, stop: engine.StopTypeEOS, pieces: []string{"Sunny."}}, &prompt}
	back := append(ask,
		map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"function": map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Rome"}}}}},
		map[string]any{"role": "tool", "tool_name": "get_weather", "content": "18 degrees, sunny"})
	code, out = olPost(t, ts.URL+"/api/chat", map[string]any{"model": "qwen", "messages": back, "tools": tools, "think": false, "stream": false})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, "Sunny.", out[0].Message.Content)
	p := shown()
	assert.Contains(t, p, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>")
	assert.Contains(t, p, "<tool_response>\n18 degrees, sunny\n</tool_response>")
	assert.True(t, strings.HasSuffix(p, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), "think false: %q", p)

	code, raw := postRaw(t, ts.URL+"/api/show", map[string]any{"model": "qwen"})
	require.Equal(t, http.StatusOK, code)
	var s struct{ Capabilities []string }
	require.NoError(t, json.Unmarshal(raw, &s))
	assert.Subset(t, s.Capabilities, []string{"completion", "tools", "thinking"})
}

// TestOllamaRouter serves two models by name: Ollama's ":latest" tag finds
// them, /api/ps lists the loaded ones, keep_alive 0 unloads a model once
// its request is answered, other values keep it, and Ollama's load and
// unload requests do what they say.
func TestOllamaRouter(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink(testenv.Model(t, "stories260K.gguf"), filepath.Join(dir, "a.gguf")))
	require.NoError(t, os.Symlink(testenv.Model(t, "stories260K.gguf"), filepath.Join(dir, "b.gguf")))
	_, hs := newTestServer(t, Options{ModelsDir: dir, ChatTemplate: "chatml",
		Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 256}, Parallel: 1}})
	var tags struct{ Models []olModel }
	olGet(t, hs.URL+"/api/tags", &tags)
	assert.Len(t, tags.Models, 2)

	for _, tc := range []struct {
		keepAlive any
		loaded    bool
	}{{nil, true}, {"5m", true}, {-1, true}, {0, false}, {"0", false}, {"0s", false}} {
		code, out := olPost(t, hs.URL+"/api/generate", map[string]any{"model": "a:latest", "prompt": "Once", "options": map[string]any{"num_predict": 2},
			"keep_alive": tc.keepAlive, "stream": false})
		require.Equal(t, http.StatusOK, code, "%v", out)
		assert.Equal(t, map[string]string{"a": map[bool]string{true: "loaded", false: "unloaded"}[tc.loaded], "b": "unloaded"},
			modelStatuses(t, hs.URL), "keep_alive %v", tc.keepAlive)
		var ps struct{ Models []olModel }
		olGet(t, hs.URL+"/api/ps", &ps)
		assert.Len(t, ps.Models, map[bool]int{true: 1, false: 0}[tc.loaded])
	}
	// Ollama's load and unload requests (ollama run's and ollama stop's):
	// a generate without a prompt or a chat without messages, keep_alive 0
	// to unload; unloading a model that is not loaded leaves it so.
	for _, route := range []string{"/api/generate", "/api/chat"} {
		for _, tc := range []struct {
			keepAlive any
			reason    string
			status    string
		}{{0, "unload", "unloaded"}, {nil, "load", "loaded"}, {"0s", "unload", "unloaded"}} {
			code, out := olPost(t, hs.URL+route, map[string]any{"model": "b", "keep_alive": tc.keepAlive, "stream": false})
			require.Equal(t, http.StatusOK, code, "%v", out)
			require.Len(t, out, 1)
			assert.Equal(t, tc.reason, out[0].DoneReason, "%s keep_alive %v", route, tc.keepAlive)
			assert.True(t, out[0].Done)
			assert.Equal(t, "b", out[0].Model)
			assert.Equal(t, tc.status, modelStatuses(t, hs.URL)["b"], "%s keep_alive %v", route, tc.keepAlive)
		}
	}
	code, out := olPost(t, hs.URL+"/api/chat", map[string]any{"model": "c", "keep_alive": 0})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, out[0].Error, "model 'c' not found")

	code, out = olPost(t, hs.URL+"/api/chat", map[string]any{"model": "a", "messages": []map[string]any{{"role": "user", "content": "x"}}, "keep_alive": "soon"})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, out[0].Error, `"keep_alive" must be`)
	code, out = olPost(t, hs.URL+"/api/chat", map[string]any{"model": "c", "messages": []map[string]any{{"role": "user", "content": "x"}}})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, out[0].Error, "model 'c' not found")
}

// TestOllamaKey: the API key guards Ollama's routes as every keyed route,
// and a refusal is in Ollama's shape, which its clients read.
func TestOllamaKey(t *testing.T) {
	_, hs := newTestServer(t, Options{APIKeys: []string{"sekret"}})
	for _, key := range []string{"", "wrong"} {
		req, err := http.NewRequest(http.MethodGet, hs.URL+"/api/tags", nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e struct{ Error string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Equal(t, "Invalid API Key", e.Error)
	}
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/api/tags", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sekret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
