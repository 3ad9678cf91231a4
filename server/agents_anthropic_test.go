package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/server/internal/anthropic"
)

// TestAnthropicAgentFields covers what current agent clients send on
// /v1/messages beyond the first Messages API, each accepted as llama-server
// accepts it: the rendered prompt (its length, from count_tokens and from
// the answer's usage) is the one of the plain request, or differs as the
// field means.
func TestAnthropicAgentFields(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	const user = `{"role":"user","content":"hi"}`
	count := func(t *testing.T, body string) int {
		t.Helper()
		var out struct {
			InputTokens int `json:"input_tokens"`
		}
		require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/messages/count_tokens", json.RawMessage(body), &out), body)
		return out.InputTokens
	}
	plain := count(t, `{"messages":[`+user+`]}`)
	withSystem := count(t, `{"system":"s","messages":[`+user+`]}`)
	require.Greater(t, withSystem, plain)
	tests := []struct {
		name, body string
		tokens     int // the prompt's length; 0: longer than plain
	}{
		{"metadata, context_management, output_config effort, service_tier",
			`{"metadata":{"user_id":"{\"device_id\":\"x\"}"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"output_config":{"effort":"medium"},"service_tier":"auto","messages":[` + user + `]}`, plain},
		{"thinking adaptive with display", `{"thinking":{"type":"adaptive","display":"omitted"},"messages":[` + user + `]}`, plain},
		{"thinking enabled with a budget", `{"thinking":{"type":"enabled","budget_tokens":31999,"display":"omitted"},"messages":[` + user + `]}`, plain},
		{"thinking enabled without a budget", `{"thinking":{"type":"enabled"},"messages":[` + user + `]}`, plain},
		{"thinking of a newer kind", `{"thinking":{"type":"interleaved"},"messages":[` + user + `]}`, plain},
		{"cache_control on blocks, system array", `{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`, withSystem},
		{"tools with defer_loading and cache_control", `{"tools":[{"name":"a","input_schema":{"type":"object"},"defer_loading":true,"cache_control":{"type":"ephemeral"}},{"type":"web_search_20250305","name":"web_search","max_uses":2}],"messages":[` + user + `]}`, plain},
		{"tool_choice of a newer kind", `{"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"magic"},"messages":[` + user + `]}`, plain},
		{"tool_choice without parallel calls", `{"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"messages":[` + user + `]}`, plain},
		{"blocks without a meaning here are left out", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"server_tool_use","id":"s","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"s","content":[]}]}]}`, plain},
		{"a system message mid-way", `{"messages":[` + user + `,{"role":"system","content":[{"type":"text","text":"s"}]}]}`, 0},
		{"a developer message", `{"messages":[{"role":"developer","content":"s"},` + user + `]}`, withSystem},
		{"billing header cch stamp", `{"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=cli; cch=a5145;"}],"messages":[` + user + `]}`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := count(t, tc.body)
			if tc.tokens == 0 {
				assert.Greater(t, n, plain)
			} else {
				assert.Equal(t, tc.tokens, n)
			}
			// Answered, with the same prompt, and without max_tokens
			// (llama-server's default of 4096, bounded by the context).
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.body), &body))
			body["max_tokens"] = 3
			var msg anthropic.Response
			require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/messages", body, &msg))
			assert.Equal(t, n, msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens)
		})
	}
	t.Run("no max_tokens", func(t *testing.T) {
		var msg anthropic.Response
		require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/messages", json.RawMessage(`{"messages":[`+user+`]}`), &msg))
		assert.Positive(t, msg.Usage.OutputTokens)
	})
}

// TestAnthropicStructuredOutput: output_config.format constrains the answer
// to its JSON Schema.
func TestAnthropicStructuredOutput(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	var msg anthropic.Response
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/messages", json.RawMessage(`{"max_tokens":40,"messages":[{"role":"user","content":"hi"}],
		"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}}`), &msg))
	require.NotEmpty(t, msg.Content)
	require.NotNil(t, msg.Content[0].Text)
	assert.True(t, strings.HasPrefix(*msg.Content[0].Text, `{`), *msg.Content[0].Text)
	for _, bad := range []string{`{"type":"json_schema","schema":3}`, `{"type":"regex"}`} {
		assert.Equal(t, http.StatusBadRequest, xPost(t, hs.URL+"/v1/messages", json.RawMessage(`{"max_tokens":4,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":`+bad+`}}`), nil), bad)
	}
}
