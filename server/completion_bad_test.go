package server

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad requests get a 4xx JSON error naming the problem; the server keeps
// serving afterwards.
func TestCompletionBadRequests(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	long := strings.Repeat("hello world ", 400)
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	cases := []struct {
		name, path string
		body       any
		status     int
		errType    string
		contains   string
	}{
		{"malformed JSON", "/completion", `{"prompt": "x",`, 400, "invalid_request_error", "JSON"},
		{"not an object", "/completion", `[1, 2]`, 400, "invalid_request_error", ""},
		{"no prompt", "/completion", map[string]any{"n_predict": 1}, 400, "invalid_request_error", "prompt"},
		{"prompt wrong type", "/completion", map[string]any{"prompt": true}, 400, "invalid_request_error", "prompt"},
		{"temperature wrong type", "/completion", map[string]any{"prompt": "x", "temperature": "hot"}, 400, "invalid_request_error", "temperature"},
		{"n_predict wrong type", "/completion", map[string]any{"prompt": "x", "n_predict": "ten"}, 400, "invalid_request_error", "n_predict"},
		{"n_predict numeric string", "/completion", map[string]any{"prompt": "x", "n_predict": "8"}, 400, "invalid_request_error", "n_predict"},
		{"n_predict fraction", "/completion", map[string]any{"prompt": "x", "n_predict": 1.5}, 400, "invalid_request_error", "n_predict"},
		{"negative n_predict", "/completion", map[string]any{"prompt": "x", "n_predict": -5}, 400, "invalid_request_error", "n_predict"},
		{"huge n_predict", "/completion", map[string]any{"prompt": "x", "n_predict": 1e12}, 400, "invalid_request_error", "n_predict"},
		{"huger n_predict", "/completion", `{"prompt": "x", "n_predict": 123456789012345678901234567890}`, 400, "invalid_request_error", "n_predict"},
		{"stop wrong type", "/completion", map[string]any{"prompt": "x", "stop": 5}, 400, "invalid_request_error", "stop"},
		{"seed out of range", "/completion", map[string]any{"prompt": "x", "seed": -7}, 400, "invalid_request_error", "seed"},
		{"mirostat out of range", "/completion", map[string]any{"prompt": "x", "mirostat": 3}, 400, "invalid_request_error", "mirostat"},
		{"a chain of a million samplers", "/completion", map[string]any{"prompt": "x", "samplers": strings.Repeat("k", 1_000_000)}, 400, "invalid_request_error", "samplers"},
		{"sampler names past the limit", "/completion", map[string]any{"prompt": "x", "samplers": slices.Repeat([]string{"top_k"}, 65)}, 400, "invalid_request_error", "samplers"},
		{"a million unknown sampler names", "/completion", map[string]any{"prompt": "x", "samplers": slices.Repeat([]string{"q"}, 1_000_000)}, 400, "invalid_request_error", `"samplers" has more than 4096 names`},
		{"a million unknown sampler letters", "/completion", map[string]any{"prompt": "x", "samplers": strings.Repeat("q", 1_000_000)}, 400, "invalid_request_error", `"samplers" has 1000000 letters`},
		{"a million token ids", "/completion", `{"prompt": [` + strings.Repeat("1,", 999_999) + `1]}`, 400, "exceed_context_size_error", ""},
		{"a million prompts", "/completion", `{"prompt": [` + strings.Repeat(`"a",`, 999_999) + `"a"]}`, 413, "invalid_request_error", "prompts"},
		{"a body nested 5000 deep", "/completion", `{"prompt": "x", "a": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, 400, "invalid_request_error", "nests deeper than"},
		{"a million fields", "/completion", `{"prompt": "x",` + manyFields(1_000_000) + `}`, 400, "invalid_request_error", "1000001 fields; at most 4096"},
		{"a million stop strings", "/completion", map[string]any{"prompt": "x", "stop": slices.Repeat([]string{"q"}, 1_000_000)}, 400, "invalid_request_error", `"stop" has more than 4096 strings`},
		{"a million response fields", "/completion", map[string]any{"prompt": "x", "response_fields": slices.Repeat([]string{"q"}, 1_000_000)}, 400, "invalid_request_error", "response_fields"},
		{"logit_bias bad bias", "/completion", map[string]any{"prompt": "x", "logit_bias": map[string]any{"12": "x"}}, 400, "invalid_request_error", "logit_bias"},
		{"lora id out of range", "/completion", map[string]any{"prompt": "x", "lora": []any{map[string]any{"id": 3, "scale": 1}}}, 400, "invalid_request_error", "lora"},
		{"token id out of range", "/completion", map[string]any{"prompt": []any{1, 999999}}, 400, "invalid_request_error", "999999"},
		{"negative token id", "/completion", map[string]any{"prompt": []any{"Once", -5}}, 400, "invalid_request_error", "-5"},
		{"token id in prompt list", "/completion", map[string]any{"prompt": []any{"ok", []any{1, 1 << 40}}}, 400, "invalid_request_error", "prompt[1]"},
		{"empty prompt list", "/completion", map[string]any{"prompt": []any{}}, 400, "invalid_request_error", "prompt"},
		{"prompt longer than context", "/completion", map[string]any{"prompt": long}, 400, "exceed_context_size_error", "context size"},
		{"invalid grammar", "/completion", map[string]any{"prompt": "x", "grammar": "root ::= foo"}, 400, "invalid_request_error", "grammar"},
		{"grammar wrong type", "/completion", map[string]any{"prompt": "x", "grammar": 12}, 400, "invalid_request_error", "grammar"},
		{"lazy grammar without triggers", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true}, 400, "invalid_request_error", "no triggers"},
		{"trigger pattern too large", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": []any{map[string]any{"type": 2, "value": strings.Repeat("a{1000}", 580)}}}, 400, "invalid_request_error", "too large"},
		{"trigger patterns too large together", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": slices.Repeat([]any{map[string]any{"type": 2, "value": strings.Repeat("b{1000}", 30)}}, 5)}, 400, "invalid_request_error", "too large together"},
		{"trigger pattern empty", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": []any{map[string]any{"type": 3, "value": ""}}}, 400, "invalid_request_error", "empty pattern"},
		{"trigger pattern malformed", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": []any{map[string]any{"type": 2, "value": "(((("}}}, 400, "invalid_request_error", "grammar_triggers"},
		{"trigger token out of range", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": []any{map[string]any{"type": 0, "value": "x", "token": 99999999}}}, 400, "invalid_request_error", "99999999"},
		{"trigger of unknown type", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": []any{map[string]any{"type": 9, "value": "x"}}}, 400, "invalid_request_error", "unknown type"},
		{"trigger word of one token not preserved", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": []any{map[string]any{"type": 1, "value": "little"}}}, 400, "invalid_request_error", "preserved token"},
		{"a thousand triggers", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": slices.Repeat([]any{map[string]any{"type": 2, "value": "x"}}, 1000)}, 400, "invalid_request_error", "grammar_triggers"},
		{"triggers not an array", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "grammar_lazy": true, "grammar_triggers": "no"}, 400, "invalid_request_error", "grammar_triggers"},
		{"invalid json_schema", "/completion", map[string]any{"prompt": "x", "json_schema": map[string]any{"$ref": "#/definitions/missing"}}, 400, "invalid_request_error", "json_schema"},
		{"json_schema wrong type", "/completion", map[string]any{"prompt": "x", "json_schema": "object"}, 400, "invalid_request_error", "json_schema"},
		{"grammar and json_schema", "/completion", map[string]any{"prompt": "x", "grammar": `root ::= "a"`, "json_schema": map[string]any{}}, 400, "invalid_request_error", "json_schema"},
		{"oai echo with a suffix", "/v1/completions", map[string]any{"prompt": "x", "echo": true, "suffix": "y"}, 400, "invalid_request_error", "echo"},
		{"oai best_of", "/v1/completions", map[string]any{"prompt": "x", "best_of": 2}, 400, "invalid_request_error", "best_of"},
		{"oai long prompt", "/v1/completions", map[string]any{"prompt": long}, 400, "exceed_context_size_error", ""},
		{"no messages", "/v1/chat/completions", map[string]any{"max_tokens": 1}, 400, "invalid_request_error", "messages"},
		{"empty messages", "/v1/chat/completions", map[string]any{"messages": []any{}}, 400, "invalid_request_error", "messages"},
		{"messages wrong type", "/v1/chat/completions", map[string]any{"messages": "hi"}, 400, "invalid_request_error", "messages"},
		{"unknown role", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "wizard", "content": "hi"}}}, 400, "invalid_request_error", "wizard"},
		{"missing role", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"content": "hi"}}}, 400, "invalid_request_error", "role"},
		{"user without content", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user"}}}, 400, "invalid_request_error", "content"},
		{"content wrong type", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": 5}}}, 400, "invalid_request_error", "content"},
		{"image part", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw0KGgo="}}}}}}, 400, "invalid_request_error", "image input is not supported"},
		{"n is 0", "/v1/chat/completions", map[string]any{"messages": msgs, "n": 0}, 400, "invalid_request_error", "n"},
		{"n above the slots", "/v1/chat/completions", map[string]any{"messages": msgs, "n": 1000}, 400, "invalid_request_error", "n"},
		{"bad tool_choice", "/v1/chat/completions", map[string]any{"messages": msgs, "tool_choice": "sometimes"}, 400, "invalid_request_error", "tool_choice"},
		{"required without tools", "/v1/chat/completions", map[string]any{"messages": msgs, "tool_choice": "required"}, 400, "invalid_request_error", "tools"},
		{"bad tool", "/v1/chat/completions", map[string]any{"messages": msgs, "tools": []any{map[string]any{"type": "function"}}}, 400, "invalid_request_error", "tools[0]"},
		{"tool choice unknown function", "/v1/chat/completions", map[string]any{"messages": msgs,
			"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "g"}}}, 400, "invalid_request_error", "g"},
		{"grammar with tools", "/v1/chat/completions", map[string]any{"messages": msgs, "grammar": `root ::= "a"`,
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}}, 400, "invalid_request_error", "grammar"},
		{"two assistant messages at the end", "/v1/chat/completions", map[string]any{"messages": []any{msgs[0],
			map[string]any{"role": "assistant", "content": "a"}, map[string]any{"role": "assistant", "content": "b"}}}, 400, "invalid_request_error", "assistant"},
		{"bad response_format", "/v1/chat/completions", map[string]any{"messages": msgs, "response_format": map[string]any{"type": "xml"}}, 400, "invalid_request_error", "response_format"},
		{"invalid response schema", "/v1/chat/completions", map[string]any{"messages": msgs, "response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"schema": map[string]any{"$ref": "#/nope"}}}}, 400, "invalid_request_error", "json_schema"},
		{"top_logprobs without logprobs", "/v1/chat/completions", map[string]any{"messages": msgs, "top_logprobs": 2}, 400, "invalid_request_error", "logprobs"},
		{"bad reasoning_format", "/v1/chat/completions", map[string]any{"messages": msgs, "reasoning_format": "loud"}, 400, "invalid_request_error", "loud"},
		{"chat long prompt", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": long}}}, 400, "exceed_context_size_error", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := postJSON(t, ts.URL+c.path, c.body)
			assert.Equal(t, c.status, code, "%v", out)
			e, ok := out["error"].(map[string]any)
			require.True(t, ok, "error object in %v", out)
			assert.Equal(t, c.errType, e["type"])
			assert.Equal(t, float64(c.status), e["code"])
			msg, _ := e["message"].(string)
			assert.Contains(t, msg, c.contains)
			if c.errType == "exceed_context_size_error" {
				assert.Equal(t, float64(512), e["n_ctx"])
				assert.Greater(t, e["n_prompt_tokens"], float64(512))
			}
		})
	}
	// The server still works.
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "temperature": 0, "n_predict": 8})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, float64(8), out["tokens_predicted"])
	code, out = postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 4})
	require.Equal(t, http.StatusOK, code, "%v", out)
}

// TestCompletionSkipsUnknown checks what llama-server skips rather than
// refuses, because front ends send it: sampler names and letters no
// sampler has (SillyTavern's default list names "tfs_z" and
// "typical_p"), and logit_bias token ids outside the vocabulary
// (SillyTavern and OpenAI clients bias ids of their own tokenizers). The
// answer is the one without them.
func TestCompletionSkipsUnknown(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	base := map[string]any{"prompt": "Once upon a time", "n_predict": 8, "temperature": 0}
	with := func(kv ...any) map[string]any {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name         string
		body, same   map[string]any
		wantSamplers []any
	}{
		{"sampler names", with("samplers", []string{"penalties", "tfs_z", "top_k", "magic", "temperature"}),
			with("samplers", []string{"penalties", "top_k", "temperature"}), []any{"penalties", "top_k", "temperature"}},
		{"sampler letters", with("samplers", "ekqt"), with("samplers", "ekt"), []any{"penalties", "top_k", "temperature"}},
		{"no sampler known", with("samplers", []string{"tfs_z"}), with("samplers", []string{}), []any{}},
		{"logit_bias ids outside the vocabulary", with("logit_bias", []any{[]any{11203, 5}, []any{999999, false}, []any{-1, 3}}), base, nil},
		{"logit_bias object", with("logit_bias", map[string]any{"11203": -100}), base, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := postJSON(t, ts.URL+"/completion", tc.body)
			require.Equal(t, http.StatusOK, code, "%v", out)
			code, same := postJSON(t, ts.URL+"/completion", tc.same)
			require.Equal(t, http.StatusOK, code, "%v", same)
			assert.Equal(t, same["content"], out["content"])
			if tc.wantSamplers != nil {
				assert.Equal(t, tc.wantSamplers, out["generation_settings"].(map[string]any)["samplers"])
			}
		})
	}
	code, out := postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}},
		"max_tokens": 4, "logit_bias": map[string]any{"11203": -100, "29871": -100}})
	assert.Equal(t, http.StatusOK, code, "OpenAI's form, ids of a larger tokenizer: %v", out)
}

// TestLongStringArrays checks that every dialect refuses an array of more
// than wire.MaxStrings strings as it reads it: decoded whole, a million
// one-letter strings take about 25 times the body's bytes.
func TestLongStringArrays(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	many := slices.Repeat([]string{"q"}, 1_000_000)
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	for _, c := range []struct {
		name, path string
		body       map[string]any
		contains   string
	}{
		{"stop", "/completion", map[string]any{"prompt": "x", "stop": many}, `"stop" has more than 4096 strings`},
		{"OpenAI stop", "/v1/chat/completions", map[string]any{"messages": msgs, "stop": many}, `"stop" has more than 4096 strings`},
		{"dry_sequence_breakers", "/completion", map[string]any{"prompt": "x", "dry_sequence_breakers": many}, `"dry_sequence_breakers" has more than 4096 strings`},
		{"samplers", "/completion", map[string]any{"prompt": "x", "samplers": many}, `"samplers" has more than 4096 names`},
		{"response_fields", "/completion", map[string]any{"prompt": "x", "response_fields": many}, `"response_fields" must be an array of at most 4096 strings`},
		{"Anthropic stop_sequences", "/v1/messages", map[string]any{"max_tokens": 1, "messages": msgs, "stop_sequences": many}, "more than 4096 strings"},
		{"Ollama options.stop", "/api/generate", map[string]any{"model": "m", "prompt": "x", "options": map[string]any{"stop": many}}, `"options.stop" has more than 4096 strings`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := postJSON(t, ts.URL+c.path, c.body)
			assert.Equal(t, http.StatusBadRequest, code, "%v", out)
			assert.Contains(t, fmt.Sprint(out), c.contains)
		})
	}
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "x", "n_predict": 2, "stop": many[:64], "samplers": many[:4096]})
	assert.Equal(t, http.StatusOK, code, "the longest arrays are read: %v", out)
}

// manyFields is n fields "f0": 0, "f1": 0, ... of a JSON object.
func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"f%d":0`, i)
	}
	return b.String()
}
