package responses

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"
)

// TestToChat pins the translation of a Responses body's own fields into
// the internal chat request, what it takes over from the chat fields, and
// the texts of its refusals.
func TestToChat(t *testing.T) {
	for _, c := range []struct {
		name, body string
		check      func(t *testing.T, c *wire.Chat, cf ChatFields)
		err        string
	}{
		{"string input with instructions", `{"input":"hi","instructions":"be brief","max_output_tokens":5}`,
			func(t *testing.T, c *wire.Chat, cf ChatFields) {
				assert.Equal(t, []chat.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, c.Messages)
				v := cf.Gen.Params["max_tokens"]
				n, err := v.Integer()
				require.NoError(t, err)
				assert.EqualValues(t, 5, n)
			}, ""},
		{"items merge into the assistant turn", `{"input":[{"role":"user","content":[{"type":"input_text","text":"q"}]},
			{"role":"assistant","content":[{"type":"output_text","text":"a"}]},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
			{"type":"function_call_output","call_id":"c1","output":"42"}],
			"tools":[{"type":"function","name":"f"},{"type":"web_search"}],
			"tool_choice":{"type":"function","name":"f"},"reasoning":{"effort":"low"}}`,
			func(t *testing.T, c *wire.Chat, cf ChatFields) {
				require.Len(t, c.Messages, 3)
				assert.Equal(t, "a", c.Messages[1].Content)
				assert.Equal(t, []chat.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}, c.Messages[1].ToolCalls)
				assert.Equal(t, chat.Message{Role: "tool", ToolCallID: "c1", Content: "42"}, c.Messages[2])
				assert.Len(t, c.Tools, 1)
				assert.Equal(t, chat.ToolChoice{Mode: "function", Function: "f"}, c.ToolChoice)
				assert.Nil(t, *cf.ToolChoice, "the flat function choice is taken over")
				assert.Equal(t, "low", c.ReasoningEffort)
				assert.False(t, cf.ReasoningEffort.Set, "reasoning.effort wins over reasoning_effort")
			}, ""},
		{"text.format json_schema is the answer's schema", `{"input":"x","text":{"format":{"type":"json_schema","name":"p","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}},"verbosity":"low"}}`,
			func(t *testing.T, c *wire.Chat, _ ChatFields) {
				assert.JSONEq(t, `{"type":"object","properties":{"a":{"type":"integer"}}}`, string(c.Schema))
			}, ""},
		{"text.format json_object is any object", `{"input":"x","text":{"format":{"type":"json_object"}}}`,
			func(t *testing.T, c *wire.Chat, _ ChatFields) {
				assert.JSONEq(t, `{"type":"object"}`, string(c.Schema))
			}, ""},
		{"text.format text and a verbosity alone constrain nothing", `{"input":"x","text":{"format":{"type":"text"}}}`,
			func(t *testing.T, c *wire.Chat, _ ChatFields) { assert.Nil(t, c.Schema) }, ""},
		{"text without format", `{"input":"x","text":{"verbosity":"high"}}`,
			func(t *testing.T, c *wire.Chat, _ ChatFields) { assert.Nil(t, c.Schema) }, ""},
		{"bad text", `{"input":"x","text":"json"}`, nil, `"text" must be an object like {"format": {"type": "json_schema", "name": ..., "schema": {...}}}`},
		{"text.format json_schema without a schema", `{"input":"x","text":{"format":{"type":"json_schema","name":"p"}}}`, nil, `"text.format.schema" must be a JSON Schema object`},
		{"unknown text.format", `{"input":"x","text":{"format":{"type":"xml"}}}`, nil, `"text.format.type" must be "text", "json_object" or "json_schema", got "xml"`},
		{"no input", `{}`, nil, `"input" is required`},
		{"bad input", `{"input":5}`, nil, `"input" must be a string or an array of input items`},
		{"previous response", `{"input":"x","previous_response_id":"r"}`, nil, `"previous_response_id" is not supported: send the previous output items as input`},
		{"bad max_output_tokens", `{"input":"x","max_output_tokens":"y"}`, nil, `"max_tokens" must be an integer`},
		{"bad tool choice", `{"input":"x","tool_choice":{"type":"function"}}`, nil, `"tool_choice" must be "auto", "none", "required", {"type": "function", "name": ...} or {"type": "allowed_tools", "mode": ..., "tools": [...]}`},
		{"allowed tools, flat", `{"input":"x","tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}],
			"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"g"},{"type":"mcp","server_label":"s"}]}}`,
			func(t *testing.T, c *wire.Chat, cf ChatFields) {
				assert.Len(t, c.Tools, 2)
				assert.Equal(t, chat.ToolChoice{Mode: "auto", Allowed: []string{"g"}}, c.ToolChoice)
				assert.Nil(t, *cf.ToolChoice, "taken over")
			}, ""},
		{"allowed tools, required, none a function", `{"input":"x","tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}}`, nil,
			`"tool_choice" allowed_tools with mode "required" must list a function`},
		{"an allowed function without a name", `{"input":"x","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function"}]}}`, nil,
			`"tool_choice.tools[0]" must name a function`},
		{"unknown item", `{"input":[{"type":"x"}]}`, nil, `input[0]: cannot determine the type of the item (type "x", role "")`},
		{"image without url", `{"input":[{"role":"user","content":[{"type":"input_image"}]}]}`, nil, `input[0].content[0]: input_image needs an image_url (a data: URL)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, cf, err := toChat(c.body)
			if c.err != "" {
				var we *wire.Error
				require.ErrorAs(t, err, &we)
				assert.Equal(t, c.err, we.Msg)
				return
			}
			require.NoError(t, err)
			c.check(t, req, cf)
		})
	}
}

// toChat decodes body as the server does (a chat completion body's
// tool_choice, reasoning_effort and generation fields beside the
// Responses ones) and translates it.
func toChat(body string) (*wire.Chat, ChatFields, error) {
	var b struct {
		Request
		ToolChoice      json.RawMessage  `json:"tool_choice"`
		ReasoningEffort wire.Opt[string] `json:"reasoning_effort"`
		wire.Gen
	}
	if err := wire.Decode([]byte(body), &b); err != nil {
		return nil, ChatFields{}, err
	}
	cf := ChatFields{ToolChoice: &b.ToolChoice, ReasoningEffort: &b.ReasoningEffort, Gen: &b.Gen}
	req, err := b.ToChat("<m>", cf)
	return req, cf, err
}

// FuzzToChat: no body makes the translation panic, and every refusal is a
// *wire.Error.
func FuzzToChat(f *testing.F) {
	f.Add(`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AAAA"},{"type":"input_text","text":"x"}]}]}`)
	f.Add(`{"input":[{"type":"reasoning","content":[{"text":"r"}]},{"role":"assistant","content":"a"}],"reasoning":{"effort":"high"}}`)
	f.Add(`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"o"}]}],"tool_choice":{"type":"function","name":"f"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		if _, _, err := toChat(body); err != nil {
			var we *wire.Error
			assert.ErrorAs(t, err, &we)
		}
	})
}

// TestStreamItemShapes pins the JSON of the items a stream announces and
// closes, in the shapes OpenAI's clients build on: the Python client's
// stream accumulator appends a message's parts to the content list of its
// output_item.added, and a reasoning item always has a summary list.
func TestStreamItemShapes(t *testing.T) {
	var added, done []string
	s := NewStream(Object{ID: "resp_1", Object: "response", Status: "completed", Model: "m"}, func(typ string, ev Event) bool {
		b, err := json.Marshal(ev.Item)
		require.NoError(t, err)
		switch typ {
		case "response.output_item.added":
			added = append(added, string(b))
		case "response.output_item.done":
			done = append(done, string(b))
		}
		return true
	})
	require.True(t, s.Begin())
	require.True(t, s.Delta(chat.Delta{ReasoningContent: "hm"}))
	require.True(t, s.Delta(chat.Delta{Content: "ok"}))
	require.True(t, s.Finish(chat.Delta{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "call_1", Name: "f", ArgumentsDelta: "{}"}}}, engine.Event{}, nil))
	require.Len(t, added, 3)
	require.Len(t, done, 3)
	shape := func(item string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(item), &m))
		delete(m, "id")
		return m
	}
	assert.Equal(t, map[string]any{"type": "reasoning", "status": "in_progress", "summary": []any{}}, shape(added[0]))
	assert.Equal(t, map[string]any{"type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}, shape(added[1]))
	assert.Equal(t, map[string]any{"type": "function_call", "status": "in_progress", "call_id": "call_1", "name": "f", "arguments": ""}, shape(added[2]))
	assert.Equal(t, map[string]any{"type": "reasoning", "status": "completed", "summary": []any{},
		"content": []any{map[string]any{"type": "reasoning_text", "text": "hm"}}}, shape(done[0]))
	assert.Equal(t, map[string]any{"type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": "ok", "annotations": []any{}, "logprobs": []any{}}}}, shape(done[1]))
	assert.Equal(t, map[string]any{"type": "function_call", "status": "completed", "call_id": "call_1", "name": "f", "arguments": "{}"}, shape(done[2]))
}
