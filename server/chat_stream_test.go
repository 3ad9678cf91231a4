package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptEngine answers every task with fixed output pieces.
type scriptEngine struct {
	engineAPI
	pieces []string
	stop   engine.StopType
}

func (e scriptEngine) Submit(_ context.Context, tasks ...*engine.Request) (eventStream, error) {
	st := &sliceStream{at: -1}
	for i, t := range tasks {
		for _, p := range e.pieces {
			st.events = append(st.events, engine.Event{Token: 1, Text: p})
			st.index = append(st.index, i)
		}
		st.events = append(st.events, engine.Event{Done: true, Stop: e.stop, PromptTokens: len(t.Prompt), Generated: len(e.pieces)})
		st.index = append(st.index, i)
	}
	return st, nil
}

// sliceStream is an eventStream of fixed events: events[k] of task index[k].
type sliceStream struct {
	events []engine.Event
	index  []int
	at     int
}

func (s *sliceStream) Next() bool          { s.at++; return s.at < len(s.events) }
func (s *sliceStream) Event() engine.Event { return s.events[s.at] }
func (s *sliceStream) Index() int          { return s.index[s.at] }
func (s *sliceStream) Err() error          { return nil }
func (s *sliceStream) Close() error        { return nil }

// streamedCalls joins the streamed tool call names and arguments.
func streamedCalls(chunks []map[string]any) (names, args string) {
	for _, c := range chunks {
		for _, ch := range c["choices"].([]any) {
			d := ch.(map[string]any)["delta"].(map[string]any)
			for _, call := range asSlice(d["tool_calls"]) {
				fn := call.(map[string]any)["function"].(map[string]any)
				n, _ := fn["name"].(string)
				a, _ := fn["arguments"].(string)
				names += n
				args += a
			}
		}
	}
	return names, args
}

// Chat streaming with malformed model output sends the rest as content; a
// call cut off by max_tokens ends with finish_reason "length", and the
// answer not streamed holds the same call.
func TestChatStreamMalformedOutput(t *testing.T) {
	ts, inst, real := newScriptServer(t)
	body := func() map[string]any {
		return map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "Weather?"}},
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}},
			"chat_template_kwargs": map[string]any{"enable_thinking": false},
			"max_tokens":           50,
		}
	}
	for _, tc := range []struct {
		name        string
		pieces      []string
		stop        engine.StopType
		content     string
		names, args string
		finish      string
	}{
		{"malformed call", []string{"Let me check.", " <tool_call>", "\n{\"name\": get_weather", "}\n</tool_call>"}, engine.StopTypeEOS,
			"Let me check. <tool_call>\n{\"name\": get_weather}\n</tool_call>", "", "", "stop"},
		{"malformed second call", []string{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>", "\n<tool_call>\n{{{", " oops"}, engine.StopTypeEOS,
			"<tool_call>\n{{{ oops", "get_weather", `{"city": "Rome"}`, "tool_calls"},
		{"call cut off by max_tokens", []string{"<tool_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Ro"}, engine.StopTypeLimit,
			"", "get_weather", `{"city": "Ro`, "length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst.Engine = scriptEngine{engineAPI: real, pieces: tc.pieces, stop: tc.stop}
			content, _, finish, chunks := streamedChat(t, ts.URL+"/v1/chat/completions", body())
			assert.Equal(t, tc.content, content)
			names, args := streamedCalls(chunks)
			assert.Equal(t, tc.names, names)
			assert.Equal(t, tc.args, args)
			assert.Equal(t, tc.finish, finish)
		})
	}

	// The real model, made to call a tool by the grammar, cut off by
	// max_tokens: the partial call is streamed, the finish reason is length.
	inst.Engine = real
	b := body()
	b["tool_choice"], b["temperature"], b["max_tokens"] = "required", 0, 40
	_, _, finish, chunks := streamedChat(t, ts.URL+"/v1/chat/completions", b)
	names, args := streamedCalls(chunks)
	assert.Equal(t, "get_weather", names)
	assert.False(t, json.Valid([]byte(args)), "arguments cut off: %s", args)
	assert.Equal(t, "length", finish)
	// Not streamed, the same answer reads the same.
	b["stream"] = false
	code, out := postJSON(t, ts.URL+"/v1/chat/completions", b)
	require.Equal(t, http.StatusOK, code, "%v", out)
	choice := out["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, "length", choice["finish_reason"])
	calls := asSlice(choice["message"].(map[string]any)["tool_calls"])
	require.Len(t, calls, 1, "%v", choice)
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	assert.Equal(t, names, fn["name"])
	assert.Equal(t, args, fn["arguments"])
}
