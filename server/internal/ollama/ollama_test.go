package ollama

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"
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

// TestTopLevelOptions: temperature, top_p and max_output_tokens sent
// beside "options" (as the AI SDK's Ollama provider sends them) count
// where "options" leaves them out, on both routes.
func TestTopLevelOptions(t *testing.T) {
	num := func(t *testing.T, c *wire.Chat, name string) float64 {
		n, ok := c.Gen.Params[name]
		require.True(t, ok, "%s is set", name)
		v, err := n.Float64()
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		name, body  string
		temp, topP  float64
		predict     float64
		noneOfThese bool
	}{
		{name: "top level alone", body: `"temperature":0,"top_p":0.5,"max_output_tokens":8`, temp: 0, topP: 0.5, predict: 8},
		{name: "options win", body: `"temperature":0,"max_output_tokens":8,"options":{"temperature":0.7,"num_predict":3,"top_p":0.2}`, temp: 0.7, topP: 0.2, predict: 3},
		{name: "mixed", body: `"temperature":0.1,"options":{"num_predict":5,"top_p":0.9}`, temp: 0.1, topP: 0.9, predict: 5},
		{name: "nulls", body: `"temperature":null,"top_p":null,"max_output_tokens":null`, noneOfThese: true},
	} {
		for _, route := range []string{"chat", "generate"} {
			t.Run(tc.name+"/"+route, func(t *testing.T) {
				var c *wire.Chat
				var err error
				if route == "chat" {
					var req ChatRequest
					require.NoError(t, json.Unmarshal([]byte(`{"messages":[],`+tc.body+`}`), &req))
					c, err = ToChat(&req, "")
				} else {
					var req GenerateRequest
					require.NoError(t, json.Unmarshal([]byte(`{"prompt":"x",`+tc.body+`}`), &req))
					c, err = GenerateChat(&req, "")
				}
				require.NoError(t, err)
				if tc.noneOfThese {
					assert.False(t, c.Gen.Params.Has("temperature") || c.Gen.Params.Has("top_p") || c.Gen.Params.Has("n_predict"), c.Gen.Params)
					return
				}
				assert.Equal(t, tc.temp, num(t, c, "temperature"))
				assert.Equal(t, tc.topP, num(t, c, "top_p"))
				assert.Equal(t, tc.predict, num(t, c, "n_predict"))
			})
		}
	}
	var raw GenerateRequest
	require.NoError(t, json.Unmarshal([]byte(`{"prompt":"x","raw":true,"max_output_tokens":4}`), &raw))
	g, err := GenerateGen(&raw)
	require.NoError(t, err)
	np := g.Params["n_predict"]
	n, err := np.Integer()
	require.NoError(t, err)
	assert.EqualValues(t, 4, n, "a raw prompt too")

	var bad ChatRequest
	require.NoError(t, json.Unmarshal([]byte(`{"messages":[],"temperature":"hot"}`), &bad))
	_, err = ToChat(&bad, "")
	assert.ErrorContains(t, err, `"options.temperature" must be a number`)
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
