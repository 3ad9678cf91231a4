// Package responses is the server's dialect of OpenAI's Responses API
// (POST /v1/responses, POST /v1/responses/input_tokens): its wire types,
// the translation of a request's own fields into the internal wire.Chat
// (Request.ToChat: input items to messages, flat function tools to chat
// tools, as llama.cpp converts a Responses request to a chat completion
// one; the body's other fields are chat completion fields, which the
// OpenAI chat dialect translates after it), and of the answer into output
// items (Items: reasoning, a message with output_text, function_call) or
// stream events (Stream). Errors of translation are *wire.Error (a 400).
package responses

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama/chat"
)

// InputItem is one input item of any kind; the fields used depend on
// Type (and Role for messages).
type InputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Summary   json.RawMessage `json:"summary"`
}

// Part is a content part of a message item.
type Part struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Refusal  *string `json:"refusal"`
	ImageURL *string `json:"image_url"` // input_image parts
}

// Tool is a tool of a Responses request. A function is described flat
// ({"type": "function", "name", "description", "parameters"}); the other
// kinds agent clients send (custom tools with a grammar, namespaces of
// functions, web_search, local_shell, file_search, mcp...) have no chat
// completion equivalent and are left out, as llama-server leaves them out.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// Reasoning is the reasoning option: effort becomes reasoning_effort;
// summary (auto, concise, detailed) asks for summaries of the reasoning,
// which is sent whole instead.
type Reasoning struct {
	Effort          string `json:"effort"`
	Summary         string `json:"summary"`
	GenerateSummary string `json:"generate_summary"`
}

// Text is the text option. Its format asks for plain text ("text", the
// default), a JSON object ("json_object") or JSON that follows a schema
// ({"type": "json_schema", "name", "schema", "strict"}: flat, where a chat
// completion's response_format nests it); verbosity changes nothing here.
type Text struct {
	Format *struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	} `json:"format"`
}

// Request holds the fields of a Responses body that are its own; the
// others are chat completion fields (parallel_tool_calls, stream_options,
// a tool_choice mode and the sampling fields among them), which the server
// reads alongside as the chat endpoint reads them. Of the fields agent
// clients send, these change nothing here and are ignored, as llama-server
// ignores them: store (nothing is stored: every request carries its whole
// conversation), include (reasoning.encrypted_content and the like: the
// reasoning is sent as text), prompt_cache_key (the prompt cache reuses
// any common prefix), client_metadata, service_tier and text.verbosity.
type Request struct {
	Input              json.RawMessage  `json:"input"` // a string or items
	Instructions       wire.Opt[string] `json:"instructions"`
	PreviousResponseID wire.Opt[string] `json:"previous_response_id"`
	Tools              wire.Opt[[]Tool] `json:"tools"`
	MaxOutputTokens    wire.Num         `json:"max_output_tokens"`
	Reasoning          json.RawMessage  `json:"reasoning"`
	Text               wire.Opt[Text]   `json:"text"`
	// Messages is not read: a chat completion's messages are no
	// Responses field.
	Messages json.RawMessage `json:"messages"`
}

// ChatFields are the chat completion fields of the body that ToChat takes
// over, before the chat dialect reads the rest: a flat function
// tool_choice ({"type": "function", "name": ...}) is read and cleared,
// reasoning.effort clears reasoning_effort, and max_output_tokens becomes
// llama.cpp's max_tokens in Gen.
type ChatFields struct {
	ToolChoice      *json.RawMessage
	ReasoningEffort *wire.Opt[string]
	Gen             *wire.Gen
}

// ToChat converts the Responses fields to the internal chat request, as
// llama.cpp's server_chat_convert_responses_to_chatcmpl converts them to a
// chat completion: input items become messages, flat function tools chat
// tools, max_output_tokens llama.cpp's max_tokens and reasoning.effort
// reasoning_effort. The body's chat completion fields c are left to the
// chat dialect, once the instance is known, but for those ToChat takes
// over (see ChatFields).
func (b *Request) ToChat(marker string, c ChatFields) (*wire.Chat, error) {
	if len(b.Input) == 0 {
		return nil, wire.Errorf(`"input" is required`)
	}
	var prev string
	if err := b.PreviousResponseID.Read(&prev, "a string"); err != nil {
		return nil, err
	}
	if prev != "" {
		return nil, wire.Errorf(`"previous_response_id" is not supported: send the previous output items as input`)
	}
	req := &wire.Chat{}
	if b.Instructions.Set {
		var ins string
		if err := b.Instructions.Read(&ins, "a string"); err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleSystem, Content: ins})
	}
	switch wire.Kind(b.Input) {
	case 's':
		var s string
		_ = json.Unmarshal(b.Input, &s)
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleUser, Content: s})
	case 'a':
		var items []InputItem
		if json.Unmarshal(b.Input, &items) != nil {
			return nil, wire.Errorf(`"input" must be a string or an array of input items`)
		}
		for i, it := range items {
			if err := itemToChat(req, i, it, marker); err != nil {
				return nil, err
			}
		}
	default:
		return nil, wire.Errorf(`"input" must be a string or an array of input items`)
	}
	var tools []Tool
	if err := b.Tools.Read(&tools, "an array of function tools"); err != nil {
		return nil, err
	}
	for _, t := range tools {
		if t.Type != "function" {
			continue // other tool kinds have no chat equivalent
		}
		i := len(req.Tools)
		if t.Name == "" {
			return nil, wire.Errorf(`tools[%d] must be {"type": "function", "function": {"name": ...}}`, i)
		}
		if len(t.Parameters) > 0 && wire.Kind(t.Parameters) != 'o' {
			return nil, wire.Errorf("tools[%d].function.parameters must be a JSON Schema object", i)
		}
		req.Tools = append(req.Tools, chat.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	if wire.Kind(*c.ToolChoice) == 'o' {
		// Responses names a forced function flat, {"type": "function",
		// "name": ...}, and allowed tools too: {"type": "allowed_tools",
		// "mode": ..., "tools": [{"type": "function", "name": ...}, ...]},
		// where tools of other types, which have no chat equivalent, are
		// left out as they are from "tools".
		const want = `"tool_choice" must be "auto", "none", "required", {"type": "function", "name": ...} or {"type": "allowed_tools", "mode": ..., "tools": [...]}`
		var tc struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Mode  string `json:"mode"`
			Tools []struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"tools"`
		}
		if json.Unmarshal(*c.ToolChoice, &tc) != nil {
			return nil, wire.Errorf(want)
		}
		switch {
		case tc.Type == "function" && tc.Name != "":
			req.ToolChoice = chat.ToolChoice{Mode: "function", Function: tc.Name}
		case tc.Type == "allowed_tools":
			var names []string
			for i, t := range tc.Tools {
				if t.Type != "function" {
					continue
				}
				if t.Name == "" {
					return nil, wire.Errorf(`"tool_choice.tools[%d]" must name a function`, i)
				}
				names = append(names, t.Name)
			}
			choice, err := wire.AllowedToolChoice(tc.Mode, names)
			if err != nil {
				return nil, err
			}
			req.ToolChoice = choice
		default:
			return nil, wire.Errorf(want)
		}
		*c.ToolChoice = nil
	}
	if err := b.textFormat(req); err != nil {
		return nil, err
	}
	if b.MaxOutputTokens.Set {
		b.MaxOutputTokens.SetName("max_tokens")
		n, err := b.MaxOutputTokens.Integer()
		if err != nil {
			return nil, err
		}
		c.Gen.Params.SetInt("max_tokens", n)
	}
	if wire.Kind(b.Reasoning) == 'o' {
		var r Reasoning
		if json.Unmarshal(b.Reasoning, &r) != nil {
			return nil, wire.Errorf(`"reasoning" must be an object like {"effort": "low"}`)
		}
		if r.Effort != "" {
			req.ReasoningEffort = r.Effort
			*c.ReasoningEffort = wire.Opt[string]{}
		}
	}
	return req, nil
}

// textFormat reads text.format into req's JSON Schema: json_object is
// any JSON object, json_schema its schema.
func (b *Request) textFormat(req *wire.Chat) error {
	var t Text
	if err := b.Text.Read(&t, `an object like {"format": {"type": "json_schema", "name": ..., "schema": {...}}}`); err != nil || t.Format == nil {
		return err
	}
	switch t.Format.Type {
	case "", "text":
	case "json_object":
		req.Schema = json.RawMessage(`{"type": "object"}`)
	case "json_schema":
		if wire.Kind(t.Format.Schema) != 'o' {
			return wire.Errorf(`"text.format.schema" must be a JSON Schema object`)
		}
		req.Schema = t.Format.Schema
	default:
		return wire.Errorf(`"text.format.type" must be "text", "json_object" or "json_schema", got %q`, t.Format.Type)
	}
	return nil
}

// itemToChat appends the chat form of one input item to req's
// messages. Assistant output (messages, function calls, reasoning)
// following an assistant message is merged into it.
func itemToChat(req *wire.Chat, i int, it InputItem, marker string) error {
	var last *chat.Message
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == chat.RoleAssistant {
		last = &req.Messages[n-1]
	}
	// text returns a content as a string, or as the text parts of an
	// array (which templates see joined with newlines, as llama-server
	// passes them).
	text := func(allowed ...string) (string, []chat.ContentPart, error) {
		if wire.Kind(it.Content) == 's' {
			var s string
			_ = json.Unmarshal(it.Content, &s)
			return s, nil, nil
		}
		if wire.Kind(it.Content) != 'a' {
			return "", nil, wire.Errorf("input[%d].content must be a string or an array of parts", i)
		}
		var parts []Part
		if err := json.Unmarshal(it.Content, &parts); err != nil {
			return "", nil, wire.Errorf("input[%d].content: %v", i, err)
		}
		var out []chat.ContentPart
		for j, p := range parts {
			ok := false
			for _, a := range allowed {
				ok = ok || p.Type == a
			}
			switch {
			case !ok:
				return "", nil, wire.Errorf("input[%d].content[%d]: unsupported part type %q", i, j, p.Type)
			case p.Type == "refusal" && p.Refusal != nil:
				out = append(out, chat.ContentPart{Type: "text", Text: *p.Refusal})
			case p.Text == nil:
				return "", nil, wire.Errorf("input[%d].content[%d] needs text", i, j)
			default:
				out = append(out, chat.ContentPart{Type: "text", Text: *p.Text})
			}
		}
		return wire.JoinParts(out, "\n"), out, nil
	}
	add := func(m chat.Message) error {
		req.Messages = append(req.Messages, m)
		return nil
	}
	switch {
	case it.Type == "function_call":
		if it.CallID == "" || it.Name == "" || it.Arguments == nil {
			return wire.Errorf("input[%d]: a function_call needs call_id, name and arguments", i)
		}
		call := chat.ToolCall{ID: it.CallID, Name: it.Name, Arguments: *it.Arguments}
		if last != nil {
			last.ToolCalls = append(last.ToolCalls, call)
			return nil
		}
		return add(chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call}})
	case it.Type == "function_call_output":
		if it.CallID == "" {
			return wire.Errorf("input[%d]: a function_call_output needs call_id", i)
		}
		m := chat.Message{Role: chat.RoleTool, ToolCallID: it.CallID}
		switch wire.Kind(it.Output) {
		case 's':
			_ = json.Unmarshal(it.Output, &m.Content)
		case 'a':
			var parts []Part
			if err := json.Unmarshal(it.Output, &parts); err != nil {
				return wire.Errorf("input[%d].output: %v", i, err)
			}
			for _, p := range parts {
				if p.Type != "input_text" || p.Text == nil {
					return wire.Errorf("input[%d].output: parts must be input_text", i)
				}
				m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: *p.Text})
			}
			m.Content = wire.JoinParts(m.Parts, "\n")
		default:
			return wire.Errorf("input[%d]: a function_call_output needs output", i)
		}
		return add(m)
	case it.Type == "reasoning":
		var parts []Part
		_ = json.Unmarshal(it.Content, &parts)
		var sb strings.Builder
		for _, p := range parts {
			if p.Text != nil {
				sb.WriteString(*p.Text)
			}
		}
		r := sb.String()
		if last != nil {
			last.ReasoningContent = r
			return nil
		}
		return add(chat.Message{Role: chat.RoleAssistant, ReasoningContent: r})
	case it.Role == "assistant" && (it.Type == "message" || it.Type == ""):
		s, parts, err := text("output_text", "input_text", "refusal")
		if err != nil {
			return err
		}
		if parts == nil && s != "" {
			parts = []chat.ContentPart{{Type: "text", Text: s}}
		}
		if last != nil {
			// Merged into the previous assistant message's parts.
			if len(last.Parts) == 0 && last.Content != "" {
				last.Parts = []chat.ContentPart{{Type: "text", Text: last.Content}}
			}
			last.Parts = append(last.Parts, parts...)
			last.Content = wire.JoinParts(last.Parts, "\n")
			return nil
		}
		return add(chat.Message{Role: chat.RoleAssistant, Content: s, Parts: parts})
	case (it.Role == "user" || it.Role == "system" || it.Role == "developer") && (it.Type == "message" || it.Type == ""):
		if parts, err := mediaParts(i, it.Content); err != nil || parts != nil {
			if err != nil {
				return err
			}
			m, err := wire.MediaMessage(it.Role, parts, len(req.Messages), &req.Media, marker)
			if err != nil {
				return err
			}
			return add(m)
		}
		s, parts, err := text("input_text")
		if err != nil {
			return err
		}
		return add(chat.Message{Role: it.Role, Content: s, Parts: parts})
	}
	return wire.Errorf("input[%d]: cannot determine the type of the item (type %q, role %q)", i, it.Type, it.Role)
}

// Wire types of a response.
type (
	Object struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		CreatedAt   int64  `json:"created_at"`
		CompletedAt *int64 `json:"completed_at,omitempty"`
		Status      string `json:"status"`
		// IncompleteDetails says why a response is "incomplete" (null
		// otherwise, as OpenAI sends it).
		IncompleteDetails *IncompleteDetails `json:"incomplete_details"`
		Model             string             `json:"model"`
		Output            []Item             `json:"output"`
		Usage             *Usage             `json:"usage,omitempty"`
	}
	// IncompleteDetails is why a response stopped before its end:
	// "max_output_tokens" (a token limit cut it).
	IncompleteDetails struct {
		Reason string `json:"reason"`
	}
	// Item is an output item: reasoning, message or function_call.
	Item struct {
		ID        string    `json:"id"`
		Type      string    `json:"type"`
		Status    string    `json:"status"`
		Role      string    `json:"role,omitempty"`
		Content   []OutPart `json:"content,omitzero"`
		Summary   []OutPart `json:"summary,omitzero"`
		CallID    string    `json:"call_id,omitempty"`
		Name      string    `json:"name,omitempty"`
		Arguments *string   `json:"arguments,omitempty"`
	}
	// Event is an event of a streamed response; the fields sent
	// depend on Type.
	Event struct {
		Type           string         `json:"type"`
		SequenceNumber int            `json:"sequence_number"`
		Response       *Object        `json:"response,omitempty"`
		PromptProgress *wire.Progress `json:"prompt_progress,omitempty"`
		ItemID         string         `json:"item_id,omitempty"`
		OutputIndex    *int           `json:"output_index,omitempty"`
		ContentIndex   *int           `json:"content_index,omitempty"`
		Item           *Item          `json:"item,omitempty"`
		Part           *OutPart       `json:"part,omitempty"`
		Text           *string        `json:"text,omitempty"`
		Delta          *string        `json:"delta,omitempty"`
		Arguments      *string        `json:"arguments,omitempty"`
		Logprobs       *[]any         `json:"logprobs,omitempty"`
		Timings        *wire.Timings  `json:"timings,omitempty"`
	}
	// OutPart is a content part: output_text (with its annotations and
	// logprobs, empty) or reasoning_text (without).
	OutPart struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations,omitzero"`
		Logprobs    []any  `json:"logprobs,omitzero"`
	}
	Usage struct {
		InputTokens         int              `json:"input_tokens"`
		OutputTokens        int              `json:"output_tokens"`
		TotalTokens         int              `json:"total_tokens"`
		InputTokensDetails  InputDetails     `json:"input_tokens_details"`
		OutputTokensDetails OutputTokDetails `json:"output_tokens_details"`
	}
	InputDetails struct {
		CachedTokens int `json:"cached_tokens"`
	}
	OutputTokDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	}
)

// textPart is an output_text part of s.
func textPart(s string) OutPart {
	return OutPart{Type: "output_text", Text: s, Annotations: []any{}, Logprobs: []any{}}
}

// UsageOf is the usage of a finished generation.
func UsageOf(ev engine.Event) *Usage {
	return &Usage{InputTokens: ev.PromptTokens, OutputTokens: ev.Generated, TotalTokens: ev.PromptTokens + ev.Generated,
		InputTokensDetails: InputDetails{CachedTokens: ev.CachedTokens}}
}

// Items converts a parsed message to output items.
func Items(msg chat.Message) []Item {
	items := []Item{}
	if msg.ReasoningContent != "" {
		items = append(items, Item{ID: wire.NewID("rs_"), Type: "reasoning", Status: "completed", Summary: []OutPart{},
			Content: []OutPart{{Type: "reasoning_text", Text: msg.ReasoningContent}}})
	}
	if msg.Content != "" {
		items = append(items, Item{ID: wire.NewID("msg_"), Type: "message", Status: "completed", Role: "assistant",
			Content: []OutPart{textPart(msg.Content)}})
	}
	for _, tc := range msg.ToolCalls {
		args := tc.Arguments
		items = append(items, Item{ID: wire.NewID("fc_"), Type: "function_call", Status: "completed", CallID: wire.IDOrNew(tc.ID, "call_"), Name: tc.Name, Arguments: &args})
	}
	return items
}

// mediaParts converts the content of a Responses input message that
// holds input_image parts into text and image parts; it returns nil when
// there is no image.
func mediaParts(i int, content json.RawMessage) ([]wire.TextOrImage, error) {
	if wire.Kind(content) != 'a' {
		return nil, nil
	}
	var parts []Part
	if json.Unmarshal(content, &parts) != nil {
		return nil, nil // reported by the text path
	}
	hasImage := false
	for _, p := range parts {
		hasImage = hasImage || p.Type == "input_image"
	}
	if !hasImage {
		return nil, nil
	}
	out := make([]wire.TextOrImage, 0, len(parts))
	for j, p := range parts {
		switch {
		case p.Type == "input_text" && p.Text != nil:
			out = append(out, wire.TextOrImage{Text: *p.Text})
		case p.Type == "input_image" && p.ImageURL != nil:
			out = append(out, wire.TextOrImage{Image: true, URL: *p.ImageURL})
		case p.Type == "input_image":
			return nil, wire.Errorf("input[%d].content[%d]: input_image needs an image_url (a data: URL)", i, j)
		default:
			return nil, wire.Errorf("input[%d].content[%d]: unsupported part type %q", i, j, p.Type)
		}
	}
	return out, nil
}

// NewObject is the response object of a new response from model, with no
// output yet.
func NewObject(model string) Object {
	return Object{ID: wire.NewID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Model: model, Output: []Item{}}
}

// Complete returns base finished with output items and the usage of the
// final event ev: "completed", or "incomplete" when a token limit cut it
// (incomplete_details' reason max_output_tokens, the last item
// "incomplete"), as OpenAI's.
func Complete(base Object, items []Item, ev engine.Event) Object {
	out := base
	out.Output = items
	out.Usage = UsageOf(ev)
	if Cut(ev) {
		out.Status, out.IncompleteDetails = "incomplete", &IncompleteDetails{Reason: "max_output_tokens"}
		if n := len(items); n > 0 {
			items[n-1].Status = "incomplete"
		}
		return out
	}
	now := time.Now().Unix()
	out.CompletedAt, out.Status = &now, "completed"
	return out
}

// Cut reports whether the final event ev ends a generation that a token
// limit cut short.
func Cut(ev engine.Event) bool { return ev.Stop == engine.StopTypeLimit }

// Stream turns a generation's parsed deltas into the Responses event
// stream: response.created and response.in_progress, then each output item
// in turn (added, its deltas, done), then response.completed with the
// whole response. Each event goes to send with its type (send sets the
// sequence number, and any per-token timings), which reports false when
// the client is gone; so do the methods, after which the stream is over.
type Stream struct {
	send       func(typ string, ev Event) bool
	base       Object
	inProgress Object
	done       []Item
	cur        *Item  // the open item
	buf        string // its text or arguments so far
	curTool    int
}

// NewStream returns the stream of the response base.
func NewStream(base Object, send func(typ string, ev Event) bool) *Stream {
	inProgress := base
	inProgress.Status = "in_progress"
	return &Stream{send: send, base: base, inProgress: inProgress, curTool: -1}
}

// noLogprobs is the empty logprobs of text events.
func noLogprobs() *[]any { return &[]any{} }

// Begin sends response.created and response.in_progress.
func (s *Stream) Begin() bool {
	return s.send("response.created", Event{Response: &s.inProgress}) &&
		s.send("response.in_progress", Event{Response: &s.inProgress})
}

// Progress sends response.in_progress with the prompt's progress
// (llama-server's return_progress).
func (s *Stream) Progress(progress *wire.Progress) bool {
	return s.send("response.in_progress", Event{Response: &s.inProgress, PromptProgress: progress})
}

// closeItem ends the open item, if any, with status.
func (s *Stream) closeItem(status string) bool {
	if s.cur == nil {
		return true
	}
	idx := len(s.done)
	it := *s.cur
	it.Status = status
	buf := s.buf
	ok := true
	switch it.Type {
	case "message":
		part := textPart(buf)
		it.Content = []OutPart{part}
		ok = s.send("response.output_text.done", Event{ItemID: it.ID, OutputIndex: &idx, ContentIndex: new(0), Text: &buf, Logprobs: noLogprobs()}) &&
			s.send("response.content_part.done", Event{ItemID: it.ID, OutputIndex: &idx, ContentIndex: new(0), Part: &part})
	case "reasoning":
		it.Content = []OutPart{{Type: "reasoning_text", Text: buf}}
		ok = s.send("response.reasoning_text.done", Event{ItemID: it.ID, OutputIndex: &idx, ContentIndex: new(0), Text: &buf})
	case "function_call":
		args := buf
		it.Arguments = &args
		ok = s.send("response.function_call_arguments.done", Event{ItemID: it.ID, OutputIndex: &idx, Arguments: &buf})
	}
	ok = ok && s.send("response.output_item.done", Event{OutputIndex: &idx, Item: &it})
	s.done = append(s.done, it)
	s.cur, s.buf = nil, ""
	return ok
}

func (s *Stream) openItem(it Item) bool {
	if !s.closeItem("completed") {
		return false
	}
	it.Status = "in_progress"
	s.cur = &it
	idx := len(s.done)
	if !s.send("response.output_item.added", Event{OutputIndex: &idx, Item: &it}) {
		return false
	}
	if it.Type == "message" {
		return s.send("response.content_part.added", Event{ItemID: it.ID, OutputIndex: &idx, ContentIndex: new(0), Part: new(textPart(""))})
	}
	return true
}

// Delta sends a parsed piece of the answer: reasoning, text and
// function-call deltas, each in an output item of its kind.
func (s *Stream) Delta(d chat.Delta) bool {
	if d.ReasoningContent != "" {
		if s.cur == nil || s.cur.Type != "reasoning" {
			if !s.openItem(Item{ID: wire.NewID("rs_"), Type: "reasoning", Summary: []OutPart{}}) {
				return false
			}
		}
		s.buf += d.ReasoningContent
		if !s.send("response.reasoning_text.delta", Event{ItemID: s.cur.ID, OutputIndex: new(len(s.done)), ContentIndex: new(0), Delta: &d.ReasoningContent}) {
			return false
		}
	}
	if d.Content != "" {
		if s.cur == nil || s.cur.Type != "message" {
			if !s.openItem(Item{ID: wire.NewID("msg_"), Type: "message", Role: "assistant", Content: []OutPart{}}) {
				return false
			}
		}
		s.buf += d.Content
		if !s.send("response.output_text.delta", Event{ItemID: s.cur.ID, OutputIndex: new(len(s.done)), ContentIndex: new(0), Delta: &d.Content, Logprobs: noLogprobs()}) {
			return false
		}
	}
	for _, tc := range d.ToolCalls {
		if s.cur == nil || s.cur.Type != "function_call" || s.curTool != tc.Index {
			empty := ""
			if !s.openItem(Item{ID: wire.NewID("fc_"), Type: "function_call", CallID: wire.IDOrNew(tc.ID, "call_"), Name: tc.Name, Arguments: &empty}) {
				return false
			}
			s.curTool = tc.Index
		}
		if tc.ArgumentsDelta != "" {
			s.buf += tc.ArgumentsDelta
			if !s.send("response.function_call_arguments.delta", Event{ItemID: s.cur.ID, OutputIndex: new(len(s.done)), Delta: &tc.ArgumentsDelta}) {
				return false
			}
		}
	}
	return true
}

// Finish sends the last delta d, closes the open item and sends
// response.completed with the usage of the final event ev and timings
// (nil: none). A response that a token limit cut is "incomplete", as
// Complete says, its last item too; its last event is still
// response.completed, not OpenAI's response.incomplete: llama.cpp's
// clients and tests wait for response.completed, and the clients of
// OpenAI read the status from either.
func (s *Stream) Finish(d chat.Delta, ev engine.Event, timings *wire.Timings) bool {
	status := "completed"
	if Cut(ev) {
		status = "incomplete"
	}
	if !s.Delta(d) || !s.closeItem(status) {
		return false
	}
	final := Complete(s.base, s.done, ev)
	return s.send("response.completed", Event{Response: &final, Timings: timings})
}
