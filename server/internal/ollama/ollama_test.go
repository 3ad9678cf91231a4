package ollama

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
)

func TestToChat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		check func(t *testing.T, c *chat.Message, all []chat.Message)
		extra map[string]any
	}{
		{name: "tool messages take the ids of the calls, by name first",
			body: `{"messages":[{"role":"user","content":"hi"},
  {"role":"assistant","tool_calls":[{"function":{"name":"a","arguments":{"x":1}}},{"function":{"name":"b","arguments":{}}}]},
  {"role":"tool","content":"B","tool_name":"b"},{"role":"TOOL","content":"A"}]}`,
			check: func(t *testing.T, _ *chat.Message, all []chat.Message) {
				calls := all[1].ToolCalls
				require.Len(t, calls, 2)
				assert.Equal(t, `{"x":1}`, calls[0].Arguments)
				assert.Equal(t, calls[1].ID, all[2].ToolCallID)
				assert.Equal(t, "b", all[2].Name)
				assert.Equal(t, calls[0].ID, all[3].ToolCallID)
				assert.Equal(t, "a", all[3].Name)
				assert.NotEqual(t, calls[0].ID, calls[1].ID)
			}},
		{name: "given ids are kept",
			body: `{"messages":[{"role":"assistant","tool_calls":[{"id":"c9","function":{"name":"a"}}]},{"role":"tool","content":"A","tool_call_id":"c9"}]}`,
			check: func(t *testing.T, _ *chat.Message, all []chat.Message) {
				assert.Equal(t, "c9", all[0].ToolCalls[0].ID)
				assert.Equal(t, "{}", all[0].ToolCalls[0].Arguments)
				assert.Equal(t, "c9", all[1].ToolCallID)
			}},
		{name: "thinking of an earlier answer", body: `{"messages":[{"role":"assistant","content":"4","thinking":"2+2"}]}`,
			check: func(t *testing.T, m *chat.Message, _ []chat.Message) { assert.Equal(t, "2+2", m.ReasoningContent) }},
		{name: "think level", body: `{"messages":[],"think":"low"}`, extra: map[string]any{"enable_thinking": true, "reasoning_effort": "low"}},
		{name: "think off", body: `{"messages":[],"think":false}`, extra: map[string]any{"enable_thinking": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req ChatRequest
			require.NoError(t, json.Unmarshal([]byte(tc.body), &req))
			c, err := ToChat(&req, "<m>")
			require.NoError(t, err)
			if tc.check != nil {
				tc.check(t, &c.Messages[0], c.Messages)
			}
			if tc.extra != nil {
				assert.Equal(t, tc.extra, c.Extra)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	var req ChatRequest
	require.NoError(t, json.Unmarshal([]byte(`{"messages":[],"options":{"num_predict":-2,"num_keep":4,"top_k":3,"stop":["x"],"seed":7,"num_ctx":9,"use_mmap":true}}`), &req))
	c, err := ToChat(&req, "")
	require.NoError(t, err)
	p := c.Gen.Params
	np := p["n_predict"]
	n, err := np.Integer()
	require.NoError(t, err)
	assert.EqualValues(t, -1, n, "-2 (fill the context) runs until the context ends")
	assert.True(t, p.Has("n_keep"))
	assert.True(t, p.Has("top_k"))
	assert.False(t, p.Has("num_ctx"))
	assert.False(t, p.Has("use_mmap"))
	assert.Equal(t, []string{"x"}, c.Gen.Stop.V)
	seed, err := c.Gen.Seed.Integer()
	require.NoError(t, err)
	assert.EqualValues(t, 7, seed)
}

// TestStream: text and thinking go out as they come, tool calls whole
// once their arguments are complete, then the done line.
func TestStream(t *testing.T) {
	var lines []ChatResponse
	st := NewStream("m", time.Now(), func(v any) bool { lines = append(lines, v.(ChatResponse)); return true })
	require.True(t, st.Delta(chat.Delta{ReasoningContent: "hmm"}))
	require.True(t, st.Delta(chat.Delta{Content: "ok", ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "c1", Name: "f", ArgumentsDelta: `{"a":`}}}))
	require.True(t, st.Delta(chat.Delta{ToolCalls: []chat.ToolCallDelta{{Index: 0, ArgumentsDelta: `1}`}, {Index: 1, Name: "g"}}}))
	require.True(t, st.Finish(engine.Event{Stop: engine.StopTypeEOS, PromptTokens: 3, Generated: 5}, chat.Delta{}))
	require.Len(t, lines, 4)
	assert.Equal(t, "hmm", lines[0].Message.Thinking)
	assert.Equal(t, "ok", lines[1].Message.Content)
	calls := lines[2].Message.ToolCalls
	require.Len(t, calls, 2)
	assert.Equal(t, "c1", calls[0].ID)
	assert.JSONEq(t, `{"a":1}`, string(calls[0].Function.Arguments))
	assert.Equal(t, "g", calls[1].Function.Name)
	assert.JSONEq(t, `{}`, string(calls[1].Function.Arguments))
	assert.Equal(t, 1, calls[1].Function.Index)
	last := lines[3]
	assert.True(t, last.Done)
	assert.Equal(t, "stop", last.DoneReason)
	assert.Equal(t, 5, last.EvalCount)
	for _, l := range lines {
		assert.Equal(t, "assistant", l.Message.Role)
		assert.Equal(t, "m", l.Model)
	}
}
