package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompletionControl(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	defer s.controls.track("chatcmpl-armed", true)()
	defer s.controls.track("chatcmpl-plain", false)()

	// A finished completion is no longer controllable.
	code, data := call(t, "POST", ts.URL+"/v1/chat/completions", map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "max_tokens": 2, "reasoning_control": true}, nil)
	require.Equal(t, 200, code, "%s", data)
	var done struct{ ID string }
	require.NoError(t, json.Unmarshal(data, &done))

	for _, tc := range []struct {
		name string
		body any
		code int
		want map[string]any
		err  string
	}{
		{"armed", map[string]any{"id": "chatcmpl-armed", "action": "reasoning_end"}, 200,
			map[string]any{"success": false, "message": "reasoning_end is not supported by this server yet"}, ""},
		{"not armed", map[string]any{"id": "chatcmpl-plain", "action": "reasoning_end"}, 200,
			map[string]any{"success": false, "message": "reasoning control not enabled for this completion"}, ""},
		{"unknown", map[string]any{"id": "chatcmpl-nope", "action": "reasoning_end"}, 200,
			map[string]any{"success": false, "message": "no active completion for this id"}, ""},
		{"finished", map[string]any{"id": done.ID, "action": "reasoning_end"}, 200,
			map[string]any{"success": false, "message": "no active completion for this id"}, ""},
		{"no id", map[string]any{"action": "reasoning_end"}, 400, nil, "missing completion id"},
		{"bad action", map[string]any{"id": "chatcmpl-armed", "action": "explode"}, 400, nil, "unknown control action"},
		{"not JSON", "{", 400, nil, "invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "POST", ts.URL+"/v1/chat/completions/control", tc.body, nil)
			assert.Equal(t, tc.code, code, "%s", data)
			if tc.err != "" {
				assert.Contains(t, errOf(t, data)["message"], tc.err)
				return
			}
			var out map[string]any
			require.NoError(t, json.Unmarshal(data, &out))
			assert.Equal(t, tc.want, out)
		})
	}
}
