package server

// Behaviours of llama-server that llama.cpp's own server test suite
// checks (tools/server/tests of the pinned source), here against the real
// library and stories260K.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

func TestLlamaServerChatCompat(t *testing.T) {
	seeded := sampling.Defaults()
	seeded.Seed = 42
	_, ts := newTestServer(t, Options{Sampling: &seeded, Verbose: true,
		ChatTemplateFile: testenv.LlamaSrc(t) + "/models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja"})
	url := ts.URL + "/v1/chat/completions"
	book := []any{map[string]any{"role": "system", "content": "Book"}, map[string]any{"role": "user", "content": "What is the best book"}}

	t.Run("n choices", func(t *testing.T) {
		code, out := postJSON(t, url, map[string]any{"messages": book, "max_tokens": 4, "n": 2})
		require.Equal(t, http.StatusOK, code, out)
		choices := asSlice(out["choices"])
		require.Len(t, choices, 2)
		for i, c := range choices {
			c := c.(map[string]any)
			assert.EqualValues(t, i, c["index"])
			assert.Equal(t, "length", c["finish_reason"])
		}
		assert.EqualValues(t, 8, out["usage"].(map[string]any)["completion_tokens"])
	})
	t.Run("n choices streamed", func(t *testing.T) {
		content := map[float64]string{}
		finished, usage := 0, 0
		sseLines(t, url, map[string]any{"messages": book, "max_tokens": 4, "n": 2, "stream": true, "stream_options": map[string]any{"include_usage": true}}, func(l string) {
			d, ok := strings.CutPrefix(l, "data: ")
			if !ok || d == "[DONE]" {
				return
			}
			var c map[string]any
			require.NoError(t, json.Unmarshal([]byte(d), &c))
			if u, ok := c["usage"].(map[string]any); ok {
				usage++
				assert.EqualValues(t, 8, u["completion_tokens"])
			}
			for _, ch := range asSlice(c["choices"]) {
				ch := ch.(map[string]any)
				idx := ch["index"].(float64)
				if s, ok := ch["delta"].(map[string]any)["content"].(string); ok {
					content[idx] += s
				}
				if ch["finish_reason"] != nil {
					finished++
				}
			}
		})
		assert.Len(t, content, 2)
		assert.Equal(t, 2, finished)
		assert.Equal(t, 1, usage)
	})
	t.Run("verbose object and seed", func(t *testing.T) {
		code, out := postJSON(t, url, map[string]any{"messages": book, "max_tokens": 2})
		require.Equal(t, http.StatusOK, code, out)
		v, ok := out["__verbose"].(map[string]any)
		require.True(t, ok, out)
		assert.Contains(t, v["prompt"], "Book")
		assert.EqualValues(t, 42, v["generation_settings"].(map[string]any)["seed"])
		assert.True(t, strings.HasPrefix(out["system_fingerprint"].(string), "b"))
		code, out = postJSON(t, url, map[string]any{"messages": book, "max_tokens": 2, "verbose": false})
		require.Equal(t, http.StatusOK, code, out)
		assert.NotContains(t, out, "__verbose")
	})
	prefill := func(content any, extra map[string]any) map[string]any {
		body := map[string]any{"max_tokens": 4, "temperature": 0,
			"messages": append(append([]any{}, book...), map[string]any{"role": "assistant", "content": content})}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}
	for _, tc := range []struct {
		name    string
		body    map[string]any
		prefill string
	}{
		{"assistant prefill", prefill("Whill", nil), "Whill"},
		{"prefill parts joined by blank lines", prefill([]any{map[string]any{"type": "text", "text": "Wh"}, map[string]any{"type": "text", "text": "ill"}}, nil), "Wh\n\nill"},
		{"continue_final_message", prefill("Whill", map[string]any{"add_generation_prompt": false, "continue_final_message": true}), "Whill"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := postJSON(t, url, tc.body)
			require.Equal(t, http.StatusOK, code, out)
			prompt := out["__verbose"].(map[string]any)["prompt"].(string)
			assert.True(t, strings.HasSuffix(prompt, "What is the best book<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"+tc.prefill), prompt)
			msg := asSlice(out["choices"])[0].(map[string]any)["message"].(map[string]any)
			assert.True(t, strings.HasPrefix(msg["content"].(string), tc.prefill), "content %q starts with the prefill", msg["content"])
			assert.Greater(t, len(msg["content"].(string)), len(tc.prefill))
		})
	}
	t.Run("continue_final_message with add_generation_prompt", func(t *testing.T) {
		code, out := postJSON(t, url, prefill("Whill", map[string]any{"continue_final_message": true}))
		assert.Equal(t, http.StatusBadRequest, code, out)
	})
	t.Run("first streamed delta and progress", func(t *testing.T) {
		var chunks []map[string]any
		sseLines(t, url, map[string]any{"messages": book, "max_tokens": 3, "stream": true, "return_progress": true}, func(l string) {
			if d, ok := strings.CutPrefix(l, "data: "); ok && d != "[DONE]" {
				var c map[string]any
				require.NoError(t, json.Unmarshal([]byte(d), &c))
				chunks = append(chunks, c)
			}
		})
		require.NotEmpty(t, chunks)
		first := asSlice(chunks[0]["choices"])[0].(map[string]any)["delta"].(map[string]any)
		assert.Equal(t, "assistant", first["role"])
		content, present := first["content"]
		assert.True(t, present)
		assert.Nil(t, content)
		var progress []map[string]any
		for _, c := range chunks {
			if p, ok := c["prompt_progress"].(map[string]any); ok {
				progress = append(progress, p)
			}
		}
		require.GreaterOrEqual(t, len(progress), 2, "a report at the start and one per batch")
		last := progress[len(progress)-1]
		assert.Equal(t, progress[0]["cache"], progress[0]["processed"])
		assert.Equal(t, last["total"], last["processed"])
	})
}

func TestLlamaServerTemplateCompat(t *testing.T) {
	dir := testenv.LlamaSrc(t) + "/models/templates/"
	msgs := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "What is today?"}}}
	for _, tc := range []struct {
		template, reasoning, wantEnd string
	}{
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "", "<think>\n"},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "off", "<think>\n</think>"},
		{"Qwen-Qwen3-0.6B", "", "<|im_start|>assistant\n"},
		{"Qwen-Qwen3-0.6B", "off", "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
	} {
		t.Run(tc.template+" reasoning "+tc.reasoning, func(t *testing.T) {
			_, ts := newTestServer(t, Options{ChatTemplateFile: dir + tc.template + ".jinja", Reasoning: tc.reasoning, Engine: engine.Options{Parallel: 1}})
			code, out := postJSON(t, ts.URL+"/apply-template", msgs)
			require.Equal(t, http.StatusOK, code, out)
			assert.True(t, strings.HasSuffix(out["prompt"].(string), tc.wantEnd), "%q", out["prompt"])
		})
	}
	// llama-server's prompts (its /apply-template) for an assistant prefill.
	for _, tc := range []struct{ template, reasoning, want string }{
		{"Qwen-Qwen3-0.6B", "", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOnce upon"},
		{"Qwen-Qwen3-0.6B", "hmm", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nOnce upon"},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "", "<｜User｜>Hi<｜Assistant｜><think></think>Once upon"},
	} {
		t.Run("prefill "+tc.template+" "+tc.reasoning, func(t *testing.T) {
			_, ts := newTestServer(t, Options{ChatTemplateFile: dir + tc.template + ".jinja", Engine: engine.Options{Parallel: 1}})
			code, out := postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": "Hi"},
				map[string]any{"role": "assistant", "content": "Once upon", "reasoning_content": tc.reasoning}}})
			require.Equal(t, http.StatusOK, code, out)
			assert.Equal(t, tc.want, out["prompt"])
		})
	}
	t.Run("no prefill", func(t *testing.T) { // llama-server's --no-prefill-assistant
		_, ts := newTestServer(t, Options{ChatTemplateFile: dir + "Qwen-Qwen3-0.6B.jinja", NoPrefillAssistant: true, Engine: engine.Options{Parallel: 1}})
		code, out := postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": []any{
			map[string]any{"role": "user", "content": "Hi"}, map[string]any{"role": "assistant", "content": "Once upon"}}})
		require.Equal(t, http.StatusOK, code, out)
		assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOnce upon<|im_end|>\n<|im_start|>assistant\n", out["prompt"])
	})
	t.Run("today's date", func(t *testing.T) {
		_, ts := newTestServer(t, Options{ChatTemplateFile: dir + "meta-llama-Llama-3.3-70B-Instruct.jinja", Engine: engine.Options{Parallel: 1}})
		code, out := postJSON(t, ts.URL+"/apply-template", msgs)
		require.Equal(t, http.StatusOK, code, out)
		assert.Contains(t, out["prompt"], time.Now().Format("02 Jan 2006"))
	})
	t.Run("plain text template with jinja", func(t *testing.T) {
		_, ts := newTestServer(t, Options{ChatTemplate: "This is not a chat template, it is", Jinja: true, Engine: engine.Options{Parallel: 1}})
		code, out := postJSON(t, ts.URL+"/apply-template", msgs)
		require.Equal(t, http.StatusOK, code, out)
		assert.Equal(t, "This is not a chat template, it is", out["prompt"])
	})
}

func TestLlamaServerMiscCompat(t *testing.T) {
	_, ts := newTestServer(t, Options{NPredict: 4, GCP: GCPOptions{Enabled: true, PredictRoute: "/predict"}})
	t.Run("n_predict is a default, not a cap", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once", "n_predict": 6})
		require.Equal(t, http.StatusOK, code, out)
		assert.EqualValues(t, 6, out["tokens_predicted"])
		code, out = postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once"})
		require.Equal(t, http.StatusOK, code, out)
		assert.EqualValues(t, 4, out["tokens_predicted"])
	})
	t.Run("JSON as llama-server writes it: no HTML escapes, nosniff", func(t *testing.T) {
		msgs := `"messages":[{"role":"user","content":"a <b> & c"}]`
		markup := `"max_tokens":8,"temperature":0,"grammar":"root ::= \"<b>&\""`
		for _, c := range []struct{ name, path, body, want string }{
			{"template", "/apply-template", "{" + msgs + "}", "a <b> & c"},
			{"chat", "/v1/chat/completions", "{" + msgs + "," + markup + "}", `"content":"<b>&"`},
			{"chat stream", "/v1/chat/completions", "{" + msgs + "," + markup + `,"stream":true}`, `"content":"<b"`},
			{"completion stream", "/completion", `{"prompt":"x",` + markup + `,"stream":true}`, `"content":"<"`},
		} {
			resp, err := http.Post(ts.URL+c.path, "application/json", strings.NewReader(c.body))
			require.NoError(t, err)
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
			assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), c.name)
			assert.NotContains(t, string(raw), `\u003c`, c.name)
			assert.NotContains(t, string(raw), `\u0026`, c.name)
			assert.Contains(t, string(raw), c.want, c.name)
		}
	})
	t.Run("ignore_eos lists the EOG biases", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once", "n_predict": 2, "ignore_eos": true, "logit_bias": [][]any{{12, 1.5}}})
		require.Equal(t, http.StatusOK, code, out)
		bias := asSlice(out["generation_settings"].(map[string]any)["logit_bias"])
		require.GreaterOrEqual(t, len(bias), 2)
		nulls := 0
		for _, b := range bias {
			b := b.(map[string]any)
			if b["bias"] == nil {
				nulls++
			} else {
				assert.EqualValues(t, 12, b["token"])
				assert.EqualValues(t, 1.5, b["bias"])
			}
		}
		assert.Equal(t, len(bias)-1, nulls)
		code, out = postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once", "n_predict": 2})
		require.Equal(t, http.StatusOK, code, out)
		assert.Empty(t, out["generation_settings"].(map[string]any)["logit_bias"])
	})
	t.Run("prompt objects", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": map[string]any{"prompt_string": "Once upon"}})
		assert.Equal(t, http.StatusOK, code, out)
		code, out = postJSON(t, ts.URL+"/completion", map[string]any{"prompt": map[string]any{"prompt_string": "Once", "multimodal_data": []string{"AAAA"}}})
		assert.Equal(t, http.StatusBadRequest, code, out)
	})
	t.Run("json_object without a schema is an object", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"max_tokens": 6, "temperature": 0,
			"messages": []any{map[string]any{"role": "user", "content": "Write an example"}}, "response_format": map[string]any{"type": "json_object"}})
		require.Equal(t, http.StatusOK, code, out)
		content := asSlice(out["choices"])[0].(map[string]any)["message"].(map[string]any)["content"].(string)
		assert.True(t, strings.HasPrefix(content, "{"), content)
	})
	t.Run("anthropic empty conversation", func(t *testing.T) {
		code, out := postJSON(t, ts.URL+"/v1/messages", map[string]any{"model": "x", "max_tokens": 3, "messages": []any{}})
		require.Equal(t, http.StatusOK, code, out)
		assert.Equal(t, "message", out["type"])
	})
	t.Run("gcp predict", func(t *testing.T) {
		inst := func(format string) map[string]any {
			return map[string]any{"@requestFormat": format, "max_tokens": 2, "messages": []any{map[string]any{"role": "user", "content": "Hi"}}}
		}
		code, out := postJSON(t, ts.URL+"/predict", map[string]any{"instances": []any{inst("chatCompletions"), inst("/v1/chat/completions"), inst("noSuchRoute")}})
		require.Equal(t, http.StatusOK, code, out)
		preds := asSlice(out["predictions"])
		require.Len(t, preds, 3)
		for _, p := range preds[:2] {
			assert.Len(t, asSlice(p.(map[string]any)["choices"]), 1)
		}
		assert.Contains(t, preds[2], "error")
		code, _ = postJSON(t, ts.URL+"/predict", map[string]any{"no": "instances"})
		assert.Equal(t, http.StatusBadRequest, code)
	})
}

func TestLlamaServerModelAliases(t *testing.T) {
	_, ts := newTestServer(t, Options{Alias: "tinyllama-2, fim,code", Tags: []string{"chat", "fim"}})
	resp, err := http.Get(ts.URL + "/v1/models")
	var out map[string]any
	require.Equal(t, http.StatusOK, decodeAnswer(t, resp, err, &out))
	m := asSlice(out["data"])[0].(map[string]any)
	assert.Equal(t, "code", m["id"], "the first alias in alphabetical order")
	assert.ElementsMatch(t, []any{"code", "fim", "tinyllama-2"}, m["aliases"])
	assert.ElementsMatch(t, []any{"chat", "fim"}, m["tags"])
}

// TestSkipChatParsing: with --skip-chat-parsing a chat that requires a
// tool call gets no tool grammar and no parsing: the model's text comes
// back as content, where without it the grammar makes stories260K start
// a call (or the think block Qwen3's template allows before it).
func TestSkipChatParsing(t *testing.T) {
	tmpl := testenv.LlamaSrc(t) + "/models/templates/Qwen-Qwen3-0.6B.jinja"
	body := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "max_tokens": 64, "temperature": 0,
		"tool_choice": "required", "tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}}
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip %v", skip), func(t *testing.T) {
			_, ts := newTestServer(t, Options{ChatTemplateFile: tmpl, SkipChatParsing: skip, Engine: engine.Options{Parallel: 1}})
			code, out := postJSON(t, ts.URL+"/v1/chat/completions", body)
			require.Equal(t, http.StatusOK, code, out)
			msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			content, _ := msg["content"].(string)
			if skip {
				assert.Nil(t, msg["tool_calls"])
				assert.NotEmpty(t, content)
				assert.False(t, strings.HasPrefix(content, "<tool_call>"), "free text: %q", content)
			} else {
				// The grammar starts a call, which stories260K does not
				// finish in 64 tokens, or Qwen3's think block before it.
				reasoning, _ := msg["reasoning_content"].(string)
				assert.True(t, msg["tool_calls"] != nil || strings.HasPrefix(content, "<tool_call>") || reasoning != "", "%v", msg)
			}
		})
	}
}
