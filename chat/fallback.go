package chat

// The generic fallback: a template with no tool-call format of its own is
// given the tools, earlier calls and tool results in llama.cpp's generic
// JSON envelope, as text it renders, when Request.FallbackFormat asks for
// it.

import (
	"encoding/json"
	"strings"
)

// genericToolList is the system text that lists tools for a template that
// does not render them.
func genericToolList(tools []Tool) (string, error) {
	b, err := json.MarshalIndent(tools, "", "  ")
	if err != nil {
		return "", err
	}
	return "You can call any of the following tools to satisfy the user's requests:\n" + string(b), nil
}

// genericHistory rewrites what a template with caps cannot render: an
// assistant message's calls become its content, the generic envelope the
// model writes them in; tool results become one user message per run of
// them, {"tool_response": ...} each. Other messages are kept as they are.
func genericHistory(msgs []Message, caps TemplateCaps) []Message {
	if caps.SupportsToolCalls && caps.SupportsToolResponses {
		return msgs
	}
	out := make([]Message, 0, len(msgs))
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch {
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0 && !caps.SupportsToolCalls:
			m.Content, m.Parts, m.ToolCalls = genericCalls(m), nil, nil
			out = append(out, m)
		case m.Role == RoleTool && !caps.SupportsToolResponses:
			var lines []string
			for ; i < len(msgs) && msgs[i].Role == RoleTool; i++ {
				lines = append(lines, genericResponse(msgs[i]))
			}
			i--
			out = append(out, Message{Role: RoleUser, Content: strings.Join(lines, "\n")})
		default:
			out = append(out, m)
		}
	}
	return out
}

// jsonOrString is s itself when it is a JSON text, else s as a JSON
// string.
func jsonOrString(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

type genericCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	ID        string          `json:"id,omitempty"`
}

// genericCalls writes an assistant message's calls as the generic format
// has the model write them: one as {"tool_call": ...}, several as
// {"tool_calls": [...]}, with the message's text as "content" if any.
func genericCalls(m Message) string {
	calls := make([]genericCall, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		calls[i] = genericCall{Name: c.Name, Arguments: jsonOrString(c.Arguments), ID: c.ID}
	}
	env := map[string]any{}
	if len(calls) == 1 {
		calls[0].ID = ""
		env["tool_call"] = calls[0]
	} else {
		env["tool_calls"] = calls
	}
	if text := continuationText(m); text != "" {
		env["content"] = text
	}
	b, _ := json.Marshal(env)
	return string(b)
}

// genericResponse writes a tool message as {"tool_response": {"tool":
// name, "content": ...}}.
func genericResponse(m Message) string {
	r := struct {
		Tool       string          `json:"tool,omitempty"`
		ToolCallID string          `json:"tool_call_id,omitempty"`
		Content    json.RawMessage `json:"content"`
	}{Tool: m.Name, ToolCallID: m.ToolCallID, Content: jsonOrString(continuationText(m))}
	b, _ := json.Marshal(map[string]any{"tool_response": r})
	return string(b)
}
