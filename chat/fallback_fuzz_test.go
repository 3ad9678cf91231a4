package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzGenericHistory checks that any history, written for a template
// that renders neither calls nor results, keeps every message but tool
// results, leaves no call and no tool message, and writes arguments and
// results as JSON.
func FuzzGenericHistory(f *testing.F) {
	f.Add("get_weather", `{"city":"Paris"}`, `{"sky":"sunny"}`, "Sure.", uint8(2))
	f.Add("", "not json", "plain", "", uint8(5))
	f.Add("f\"\n", "{", "\xff", "\x00", uint8(0))
	f.Fuzz(func(t *testing.T, name, args, result, content string, n uint8) {
		var msgs []Message
		for i := range int(n % 8) {
			switch i % 3 {
			case 0:
				msgs = append(msgs, Message{Role: RoleUser, Content: content})
			case 1:
				msgs = append(msgs, Message{Role: RoleAssistant, Content: content,
					ToolCalls: []ToolCall{{Name: name, Arguments: args}, {Name: name, Arguments: result}}[:1+i%2]})
			default:
				msgs = append(msgs, Message{Role: RoleTool, Name: name, Content: result}, Message{Role: RoleTool, Content: args})
			}
		}
		out := genericHistory(msgs, TemplateCaps{})
		for _, m := range out {
			if m.Role == RoleTool || len(m.ToolCalls) > 0 {
				t.Fatalf("left a tool message or call: %+v", m)
			}
			if m.Role == RoleAssistant && strings.HasPrefix(m.Content, "{") && !json.Valid([]byte(m.Content)) {
				t.Fatalf("calls not written as JSON: %q", m.Content)
			}
			if m.Role == RoleUser && strings.HasPrefix(m.Content, `{"tool_response"`) {
				for _, line := range strings.Split(m.Content, "\n") {
					if !json.Valid([]byte(line)) {
						t.Fatalf("result not JSON: %q", line)
					}
				}
			}
		}
		if len(out) > len(msgs) {
			t.Fatalf("%d messages became %d", len(msgs), len(out))
		}
	})
}
