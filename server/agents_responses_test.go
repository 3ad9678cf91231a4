package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResponsesAgentShapes covers what Codex CLI sends on /v1/responses:
// the rendered prompt's length is that of the equivalent plain request, as
// llama-server renders it (text parts joined with newlines; tool kinds
// without a chat equivalent and the fields that change nothing here left
// out).
func TestResponsesAgentShapes(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	count := func(t *testing.T, body string) int {
		t.Helper()
		var out struct {
			InputTokens int `json:"input_tokens"`
		}
		require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses/input_tokens", json.RawMessage(body), &out), body)
		return out.InputTokens
	}
	const user = `{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}`
	plain := count(t, `{"input":[`+user+`]}`)
	tests := []struct{ name, body, same string }{
		{"developer parts are joined with newlines",
			`{"input":[{"type":"message","id":"msg_1","role":"developer","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},` + user + `]}`,
			`{"input":[{"role":"system","content":"a\nb"},` + user + `]}`},
		{"assistant output parts are joined with newlines",
			`{"input":[` + user + `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},` + user + `]}`,
			`{"input":[` + user + `,{"type":"message","role":"assistant","content":"a\nb"},` + user + `]}`},
		{"function_call_output parts are joined with newlines",
			`{"input":[` + user + `,{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`,
			`{"input":[` + user + `,{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"a\nb"}]}`},
		{"tool kinds without a chat equivalent, agent fields",
			`{"input":[` + user + `],"tools":[{"type":"function","name":"exec_command","strict":false,"parameters":{"type":"object"}},` +
				`{"type":"namespace","name":"multi_agent_v1","description":"d","tools":[{"type":"function","name":"close_agent","parameters":{"type":"object"}}]},` +
				`{"type":"web_search","external_web_access":false},{"type":"local_shell"},{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}],` +
				`"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":"auto"},"store":false,` +
				`"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","client_metadata":{"session_id":"s"},"text":{"verbosity":"low"},"stream_options":{"include_obfuscation":false}}`,
			`{"input":[` + user + `],"tools":[{"type":"function","name":"exec_command","parameters":{"type":"object"}}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := count(t, tc.body)
			assert.Equal(t, count(t, tc.same), n)
			assert.GreaterOrEqual(t, n, plain)
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.body), &body))
			body["max_output_tokens"] = 3
			var out struct {
				Status string `json:"status"`
				Usage  struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			}
			require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses", body, &out))
			assert.Equal(t, n, out.Usage.InputTokens)
		})
	}
}
