package openai

import (
	"bytes"
	"encoding/json"

	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama/chat"
)

// ChatBody is an OpenAI chat completion body (also read by the server's
// apply-template, input_tokens and, embedded, the Responses body).
type ChatBody struct {
	wire.ModelField
	wire.Gen
	wire.ChatFields
	Unsupported
	Messages             json.RawMessage          `json:"messages"`
	N                    wire.Num                 `json:"n"`
	Tools                wire.Opt[[]Tool]         `json:"tools"`
	ToolChoice           json.RawMessage          `json:"tool_choice"` // a mode or a function
	ParallelToolCalls    wire.Opt[bool]           `json:"parallel_tool_calls"`
	ResponseFormat       wire.Opt[ResponseFormat] `json:"response_format"`
	AddGenerationPrompt  wire.Opt[bool]           `json:"add_generation_prompt"`
	ContinueFinalMessage json.RawMessage          `json:"continue_final_message"`
	ReasoningFormat      wire.Opt[string]         `json:"reasoning_format"`
	ChatTemplateKwargs   wire.Opt[map[string]any] `json:"chat_template_kwargs"`
	ReasoningEffort      wire.Opt[string]         `json:"reasoning_effort"`
}

// ResponseFormat is OpenAI's response_format.
type ResponseFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"`
	JSONSchema *struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// ToChat is the OpenAI chat dialect: it translates b into req, the
// internal chat request. What req already holds (set by another dialect's
// converter, the Responses one) and b does not give stays. slots bounds
// "n" (the choices run at once, one slot each); marker stands for each
// image and audio part in the text.
func ToChat(b *ChatBody, req *wire.Chat, slots int, marker string) error {
	if len(b.Messages) == 0 && req.Messages == nil {
		return wire.Errorf(`"messages" is required`)
	}
	if err := b.Unsupported.Check(); err != nil {
		return err
	}
	req.Gen, req.Opts = b.Gen, b.ChatFields
	req.N, req.AddGenerationPrompt = 1, true
	if err := b.N.Int(&req.N, 1, int64(max(1, slots))); err != nil {
		return err
	}
	if len(b.Messages) > 0 {
		msgs, media, err := toChatMessages(b.Messages, req.AllowEmpty, marker)
		if err != nil {
			return err
		}
		req.Messages, req.Media = msgs, append(media, req.Media...)
	}
	if err := b.tools(req); err != nil {
		return err
	}
	if err := b.responseFormat(req); err != nil {
		return err
	}
	if err := b.AddGenerationPrompt.Read(&req.AddGenerationPrompt, "a boolean"); err != nil {
		return err
	}
	var cont any
	_ = json.Unmarshal(b.ContinueFinalMessage, &cont)
	switch cont {
	case true:
		req.Continue = "auto"
	case "content", "reasoning_content":
		req.Continue = cont.(string)
	}
	if err := b.ReasoningFormat.Read(&req.Reasoning, "a string"); err != nil {
		return err
	}
	if err := b.ChatTemplateKwargs.Read(&req.Extra, "an object"); err != nil {
		return err
	}
	if err := b.ReasoningEffort.Read(&req.ReasoningEffort, "a string"); err != nil {
		return err
	}
	if b.Model.Set && !b.Model.Bad {
		req.Model = b.Model.V
	}
	return nil
}

// tools reads tools, tool_choice and parallel_tool_calls into req.
func (b *ChatBody) tools(req *wire.Chat) error {
	var tools []Tool
	if err := b.Tools.Read(&tools, "an array of function tools"); err != nil {
		return err
	}
	for i, t := range tools {
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return wire.Errorf(`tools[%d] must be {"type": "function", "function": {"name": ...}}`, i)
		}
		params := t.Function.Parameters
		if len(params) > 0 && wire.Kind(params) != 'o' {
			return wire.Errorf("tools[%d].function.parameters must be a JSON Schema object", i)
		}
		req.Tools = append(req.Tools, chat.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
	}
	if req.ToolChoice.Mode == "" {
		req.ToolChoice = chat.ToolChoice{Mode: "auto"}
	}
	if err := toolChoice(b.ToolChoice, &req.ToolChoice); err != nil {
		return err
	}
	if req.ToolChoice.Mode != "auto" && req.ToolChoice.Mode != "none" && len(req.Tools) == 0 {
		return wire.Errorf(`"tool_choice" %q needs "tools"`, req.ToolChoice.Mode)
	}
	if b.ParallelToolCalls.Set {
		var p bool
		if err := b.ParallelToolCalls.Read(&p, "a boolean"); err != nil {
			return err
		}
		req.Parallel = &p
	}
	return nil
}

// toolChoice reads OpenAI's tool_choice: a mode, {"type": "function",
// "function": {"name": ...}}, or {"type": "allowed_tools",
// "allowed_tools": {"mode": "auto" or "required", "tools": [{"type":
// "function", "function": {"name": ...}}, ...]}}.
func toolChoice(raw json.RawMessage, tc *chat.ToolChoice) error {
	switch wire.Kind(raw) {
	case 0:
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto", "none", "required":
			tc.Mode = s
		default:
			return wire.Errorf(`"tool_choice" must be "auto", "none", "required" or a function`)
		}
	case 'o':
		type function struct {
			Name string `json:"name"`
		}
		var fn struct {
			Type         string   `json:"type"`
			Function     function `json:"function"`
			AllowedTools *struct {
				Mode  string `json:"mode"`
				Tools []struct {
					Type     string   `json:"type"`
					Function function `json:"function"`
				} `json:"tools"`
			} `json:"allowed_tools"`
		}
		if json.Unmarshal(raw, &fn) != nil {
			return wire.Errorf(`"tool_choice" must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}`)
		}
		if fn.Type == "allowed_tools" {
			at := fn.AllowedTools
			if at == nil {
				return wire.Errorf(`"tool_choice" of type allowed_tools needs "allowed_tools": {"mode": ..., "tools": [...]}`)
			}
			var names []string
			for i, t := range at.Tools {
				if t.Function.Name == "" {
					return wire.Errorf(`"tool_choice.allowed_tools.tools[%d]" must name a function`, i)
				}
				names = append(names, t.Function.Name)
			}
			c, err := wire.AllowedToolChoice(at.Mode, names)
			if err == nil {
				*tc = c
			}
			return err
		}
		if fn.Function.Name == "" {
			return wire.Errorf(`"tool_choice" must name a function`)
		}
		*tc = chat.ToolChoice{Mode: "function", Function: fn.Function.Name}
	default:
		return wire.Errorf(`"tool_choice" must be a string or an object`)
	}
	return nil
}

// responseFormat reads response_format into req's JSON Schema.
func (b *ChatBody) responseFormat(req *wire.Chat) error {
	var rf ResponseFormat
	if err := b.ResponseFormat.Read(&rf, `an object like {"type": "json_schema", "json_schema": {"schema": ...}}`); err != nil || !b.ResponseFormat.Set {
		return err
	}
	switch rf.Type {
	case "", "text":
	case "json_object":
		// A JSON object, as OpenAI's JSON mode promises (llama-server's
		// --jinja constrains nothing without a schema, and weak models
		// then answer in prose). A schema given with it is followed.
		req.Schema = rf.Schema
		if len(req.Schema) == 0 || wire.IsNull(req.Schema) || wire.IsEmptyObject(req.Schema) {
			req.Schema = json.RawMessage(`{"type": "object"}`)
		}
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || wire.IsNull(rf.JSONSchema.Schema) {
			req.Schema = json.RawMessage(`{}`)
		} else {
			req.Schema = rf.JSONSchema.Schema
		}
	default:
		return wire.Errorf(`response_format type must be "text", "json_object" or "json_schema", got %q`, rf.Type)
	}
	if len(req.Schema) > 0 && wire.Kind(req.Schema) != 'o' && wire.Kind(req.Schema) != 'b' {
		return wire.Errorf("response_format schema must be a JSON Schema object")
	}
	return nil
}

// message is an OpenAI chat message as received.
type message struct {
	Role             string            `json:"role"`
	Content          json.RawMessage   `json:"content"`
	Name             string            `json:"name"`
	ToolCallID       string            `json:"tool_call_id"`
	ReasoningContent string            `json:"reasoning_content"`
	ToolCalls        []messageToolCall `json:"tool_calls"`
	// FunctionCall is the deprecated functions API's call of an
	// assistant message, read as its one tool call.
	FunctionCall *struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function_call"`
}

type messageToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type Tool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// toChatMessages converts and checks OpenAI messages; none is an error
// unless allowEmpty. Image and audio parts become marker in the text and
// are returned in order.
func toChatMessages(raw json.RawMessage, allowEmpty bool, marker string) ([]chat.Message, []wire.Media, error) {
	var media []wire.Media
	msgs, err := toChatMessagesMedia(raw, allowEmpty, marker, &media)
	return msgs, media, err
}

func toChatMessagesMedia(raw json.RawMessage, allowEmpty bool, marker string, media *[]wire.Media) ([]chat.Message, error) {
	if wire.Kind(raw) != 'a' {
		return nil, wire.Errorf(`"messages" must be an array`)
	}
	// The messages are read one by one from raw, so that a request's
	// memory holds its text about once besides its body (a copy of every
	// message, then of every content, held at once, made a request of
	// many messages peak at 15 times its size); counting them first
	// sizes msgs once.
	var count []struct{}
	if err := json.Unmarshal(raw, &count); err != nil {
		return nil, wire.Errorf(`"messages": %v`, err)
	}
	if len(count) == 0 && !allowEmpty {
		return nil, wire.Errorf(`"messages" must not be empty`)
	}
	msgs := make([]chat.Message, 0, len(count))
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // [
		return nil, wire.Errorf(`"messages": %v`, err)
	}
	for i := 0; dec.More(); i++ {
		var it json.RawMessage
		if err := dec.Decode(&it); err != nil {
			return nil, wire.Errorf(`"messages": %v`, err)
		}
		var wm message
		if wire.Kind(it) != 'o' {
			return nil, wire.Errorf("messages[%d] must be an object", i)
		}
		if err := json.Unmarshal(it, &wm); err != nil {
			return nil, wire.Errorf("messages[%d]: %v", i, err)
		}
		switch wm.Role {
		case chat.RoleSystem, chat.RoleDeveloper, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		case "function":
			// The deprecated functions API's result of a call: a tool
			// message, named after the function.
			wm.Role = chat.RoleTool
		case "":
			return nil, wire.Errorf("messages[%d] has no role", i)
		default:
			return nil, wire.Errorf("messages[%d] has an unknown role %q (want system, developer, user, assistant, tool or function)", i, wm.Role)
		}
		m := chat.Message{Role: wm.Role, Name: wm.Name, ToolCallID: wm.ToolCallID, ReasoningContent: wm.ReasoningContent}
		hasContent := len(wm.Content) > 0
		switch wire.Kind(wm.Content) {
		case 0:
		case 's':
			_ = json.Unmarshal(wm.Content, &m.Content)
		case 'a':
			var parts []struct {
				Type       string          `json:"type"`
				Text       *string         `json:"text"`
				ImageURL   json.RawMessage `json:"image_url"`
				InputAudio json.RawMessage `json:"input_audio"`
			}
			if err := json.Unmarshal(wm.Content, &parts); err != nil {
				return nil, wire.Errorf("messages[%d].content: parts must be objects with type and text", i)
			}
			for j, p := range parts {
				if p.Type == "image_url" || p.Type == "input_audio" {
					in, err := wire.MediaPart(p.Type, p.ImageURL, p.InputAudio)
					if err != nil {
						return nil, wire.Errorf("messages[%d].content[%d]: %v", i, j, err)
					}
					*media = append(*media, in)
					m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: marker})
					continue
				}
				switch p.Type {
				case "text":
				case "input_video":
					return nil, wire.Errorf("messages[%d].content[%d]: video input is not supported", i, j)
				default:
					return nil, wire.Errorf("messages[%d].content[%d]: unsupported content type %q (only text)", i, j, p.Type)
				}
				if p.Text == nil {
					return nil, wire.Errorf("messages[%d].content[%d]: text part without text", i, j)
				}
				m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: *p.Text})
			}
			m.Content = wire.JoinParts(m.Parts, "")
		default:
			return nil, wire.Errorf("messages[%d].content must be a string or an array of parts", i)
		}
		for j, tc := range wm.ToolCalls {
			if tc.Function.Name == "" {
				return nil, wire.Errorf("messages[%d].tool_calls[%d] has no function name", i, j)
			}
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: callArgs(tc.Function.Arguments)})
		}
		if fc := wm.FunctionCall; fc != nil && wm.Role == chat.RoleAssistant && len(wm.ToolCalls) == 0 {
			if fc.Name == "" {
				return nil, wire.Errorf("messages[%d].function_call has no name", i)
			}
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{Name: fc.Name, Arguments: callArgs(fc.Arguments)})
		}
		if wm.Role == chat.RoleAssistant {
			if !hasContent && len(m.ToolCalls) == 0 {
				return nil, wire.Errorf("messages[%d]: an assistant message needs content or tool_calls", i)
			}
		} else if !hasContent {
			return nil, wire.Errorf("messages[%d]: a %s message needs content", i, wm.Role)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// callArgs is a call's arguments as the template gets them: the string
// given, or the JSON of an object given as one ({} for none).
func callArgs(raw json.RawMessage) string {
	args := string(raw)
	if wire.Kind(raw) == 's' {
		_ = json.Unmarshal(raw, &args)
	} else if args == "" || args == "null" {
		args = "{}"
	}
	return args
}
