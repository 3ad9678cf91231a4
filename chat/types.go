// Package chat turns conversations into prompts and model output back into
// messages: Jinja chat templates (as carried by GGUF files), tool-call and
// reasoning parsers for the model families people run, and the grammars that
// constrain generation to a format.
//
// [Templates.Prepare] does what llama-server does with a chat request, with
// no HTTP: it renders the conversation and its tools, gives the grammar and
// lazy triggers that constrain generation to the template's tool-call format
// (or a response format), and returns a [Plan] that reads the output, whole
// or streamed, into content, reasoning and tool calls. [ForModel] gives a
// llama.Model's templates as llama-server picks them; package engine runs a
// plan (engine.Request.SetChat); package session runs whole conversations,
// with Go functions as tools.
//
// The types here are the Go form of a conversation. Wire formats (OpenAI,
// Anthropic) live in package server and convert to and from these.
package chat

import "encoding/json"

// Role names used in [Message.Role].
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	// Role is system, developer, user, assistant or tool.
	Role string `json:"role"`
	// Content is the text of the message. When Parts is non-empty it is
	// ignored by templates that understand parts; templates that do not see
	// the parts' text joined.
	Content string `json:"content,omitempty"`
	// Parts is content given as a list of typed parts (OpenAI's array form).
	Parts []ContentPart `json:"parts,omitempty"`
	// ReasoningContent is the model's thinking for an assistant message.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the calls an assistant message makes.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, for a tool message, the id of the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is an optional participant or tool name.
	Name string `json:"name,omitempty"`
}

// ContentPart is one part of a message's content.
type ContentPart struct {
	// Type is "text" (others are passed through to templates as they are).
	Type string `json:"type"`
	// Text is the part's text when Type is "text".
	Text string `json:"text,omitempty"`
}

// ToolCall is a call of a function by the model.
type ToolCall struct {
	// ID identifies the call; a tool message answers it with ToolCallID.
	ID string `json:"id,omitempty"`
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the call's arguments as a JSON text (usually an object).
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call.
type Tool struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Description says what it does.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of its arguments object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}
