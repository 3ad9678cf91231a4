package responses

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/chat"
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
		{"no input", `{}`, nil, `"input" is required`},
		{"bad input", `{"input":5}`, nil, `"input" must be a string or an array of input items`},
		{"previous response", `{"input":"x","previous_response_id":"r"}`, nil, `"previous_response_id" is not supported: send the previous output items as input`},
		{"bad max_output_tokens", `{"input":"x","max_output_tokens":"y"}`, nil, `"max_tokens" must be an integer`},
		{"bad tool choice", `{"input":"x","tool_choice":{"type":"function"}}`, nil, `"tool_choice" must be "auto", "none", "required" or {"type": "function", "name": ...}`},
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
