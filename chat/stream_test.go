package chat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestChatStream(t *testing.T) {
	hermes := ParseOptions{Format: FormatHermes2Pro, ParseToolCalls: true}
	for _, tc := range []struct {
		name    string
		pieces  []string
		limited bool
		content string
		calls   []ToolCall
	}{
		{"well formed", []string{"Sure.", " <tool_", "call>\n{\"name\": \"f\", ", "\"arguments\": {\"a\": 1}}\n</tool_call>"}, false,
			"Sure. ", []ToolCall{{Name: "f", Arguments: `{"a": 1}`}}},
		{"malformed call: the rest as content", []string{"Sure.", " <tool_", "call>\n{\"na", "me\": oops}", " more text"}, false,
			"Sure. <tool_call>\n{\"name\": oops} more text", nil},
		{"malformed after a call", []string{"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "<tool_call>\n[[[", " tail"}, false,
			"<tool_call>\n[[[ tail", []ToolCall{{Name: "f", Arguments: `{}`}}},
		{"cut off by the limit", []string{"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", "1"}, true,
			"", []ToolCall{{Name: "f", Arguments: `{"a": 1`}}},
		{"incomplete at end of generation", []string{"Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", "1"}, false,
			"Hi ", []ToolCall{{Name: "f", Arguments: `{"a": 1`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(hermes)
			var got Message
			for _, p := range tc.pieces {
				got.addDelta(s.Push(p))
			}
			got.addDelta(s.Finish(tc.limited))
			assert.Equal(t, tc.content, got.Content)
			assert.Equal(t, tc.calls, got.ToolCalls)
			if tc.calls == nil {
				assert.Equal(t, strings.Join(tc.pieces, ""), got.Content)
			}
		})
	}
}

// TestParseLimited: an output cut at the token limit reads the same whole
// as streamed, piece by piece; a well-formed one as ParseOutput reads it.
func TestParseLimited(t *testing.T) {
	p := &Plan{Parse: ParseOptions{Format: FormatHermes2Pro, ParseToolCalls: true}}
	call := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	for _, tc := range []struct {
		name, output string
		want         Message
	}{
		{"a call cut off after one whole", "Sure. " + call + "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"b\": ",
			Message{Role: RoleAssistant, Content: "Sure. ", ToolCalls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`}, {Name: "g", Arguments: `{"b":`}}}},
		{"cut at the marker: it reads as text, as at the end of any output", call + "<tool_call>\n",
			Message{Role: RoleAssistant, Content: "<tool_call>\n", ToolCalls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`}}}},
		{"well formed", "Sure. " + call, p.ParseOutput("Sure. " + call)},
		{"text alone", "Once upon a", Message{Role: RoleAssistant, Content: "Once upon a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.ParseLimited(tc.output)
			assert.Equal(t, tc.want, got)
			// The same output streamed a character at a time adds up to it.
			s := p.NewStream()
			streamed := Message{Role: RoleAssistant}
			for _, r := range tc.output {
				streamed.addDelta(s.Push(string(r)))
			}
			streamed.addDelta(s.Finish(true))
			assert.Equal(t, got, streamed)
		})
	}
}
