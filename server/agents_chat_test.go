package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChatAgentFields covers what opencode and qwen-code send on
// /v1/chat/completions besides messages: each is accepted, as llama-server
// accepts it, and the prompt is the one of the plain request.
func TestChatAgentFields(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	count := func(t *testing.T, body string) int {
		t.Helper()
		var out struct {
			InputTokens int `json:"input_tokens"`
		}
		require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/chat/completions/input_tokens", json.RawMessage(body), &out), body)
		return out.InputTokens
	}
	const msgs = `"messages":[{"role":"developer","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}]`
	plain := count(t, `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`)
	tests := []struct{ name, body string }{
		{"developer role, text parts", `{` + msgs + `}`},
		{"stream_options, parallel_tool_calls, store, metadata, reasoning_effort, prompt_cache_key, user",
			`{` + msgs + `,"stream":true,"stream_options":{"include_usage":true},"parallel_tool_calls":true,"store":false,` +
				`"metadata":{"a":"b"},"reasoning_effort":"medium","prompt_cache_key":"k","user":"u","service_tier":"auto"}`},
		{"tools with tool_choice auto", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}],"tool_choice":"auto"}`},
		{"an assistant tool call with null content and a tool result of parts",
			`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"ok"}]}],"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := count(t, tc.body)
			assert.GreaterOrEqual(t, n, plain)
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.body), &body))
			body["max_tokens"] = 3
			body["stream"] = false
			var out struct {
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/chat/completions", body, &out))
			assert.Equal(t, n, out.Usage.PromptTokens)
		})
	}
	assert.Equal(t, plain, count(t, `{`+msgs+`}`), "developer is system on a template without <|channel|>")
}
