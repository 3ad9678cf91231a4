// Package anthropic is the server's dialect of Anthropic's Messages API
// (POST /v1/messages, POST /v1/messages/count_tokens): its wire types, the
// translation of a request into the internal wire.Chat (ToChat, as
// llama.cpp converts it to an OpenAI chat request) and of the answer back
// into content blocks (NewResponse) or a stream of events (Stream). The
// server's handlers decode the body, run the chat and write what this
// package builds; errors of translation are *wire.Error (a 400).
package anthropic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama/chat"
)

// Wire types of a Messages request. Fields that have no meaning for a
// local model are decoded all the same, so that what a client sends is
// named here, and are ignored as llama-server ignores them: metadata,
// context_management (the edits that clear old thinking and tool results
// server-side; the client sends the whole conversation), output_config's
// effort, service_tier, cache_control on blocks and tools (the prompt cache
// reuses any common prefix without marks) and defer_loading on tools
// (every tool is given to the template).
type (
	Request struct {
		Model         string          `json:"model"`
		System        json.RawMessage `json:"system"`
		Messages      []Message       `json:"messages"`
		Tools         []Tool          `json:"tools"`
		ToolChoice    *ToolChoice     `json:"tool_choice"`
		StopSequences wire.StringList `json:"stop_sequences"`
		MaxTokens     *int            `json:"max_tokens"`
		Temperature   *float64        `json:"temperature"`
		TopP          *float64        `json:"top_p"`
		TopK          *int            `json:"top_k"`
		Stream        bool            `json:"stream"`
		Thinking      *Thinking       `json:"thinking"`
		// ChatTemplateKwargs is llama.cpp's extension, passed through.
		ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
		// OutputConfig's format constrains the answer to a JSON Schema.
		OutputConfig *OutputConfig `json:"output_config"`
		// OutputFormat is the same format under its name of the
		// structured-outputs beta, which the SDKs' beta calls still send;
		// output_config.format wins when both are given.
		OutputFormat      *OutputFormat      `json:"output_format"`
		Metadata          *Metadata          `json:"metadata"`
		ContextManagement *ContextManagement `json:"context_management"`
		ServiceTier       string             `json:"service_tier"`
	}
	Message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	// Block is a content block of any type; the fields used depend on Type.
	Block struct {
		Type         string          `json:"type"`
		Text         string          `json:"text,omitempty"`
		Thinking     string          `json:"thinking,omitempty"`
		ID           string          `json:"id,omitempty"`
		Name         string          `json:"name,omitempty"`
		Input        json.RawMessage `json:"input,omitempty"`
		ToolUseID    string          `json:"tool_use_id,omitempty"`
		Content      json.RawMessage `json:"content,omitempty"`
		Source       json.RawMessage `json:"source,omitempty"`  // image and document blocks; a search result's URL
		Title        string          `json:"title,omitempty"`   // documents and search results
		Context      string          `json:"context,omitempty"` // documents
		IsError      bool            `json:"is_error,omitempty"`
		CacheControl *CacheControl   `json:"cache_control,omitempty"`
	}
	Tool struct {
		// Type is empty or "custom" for a client tool; Anthropic's
		// server tools (web_search_20250305, ...) are given to the
		// template as functions of their name, as llama-server does.
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		DeferLoading bool            `json:"defer_loading"`
		CacheControl *CacheControl   `json:"cache_control"`
	}
	ToolChoice struct {
		Type string `json:"type"` // auto, any, tool, none
		Name string `json:"name"`
		// DisableParallelToolUse allows one tool call at most.
		DisableParallelToolUse bool `json:"disable_parallel_tool_use"`
	}
	// Thinking is "enabled" with a budget, "disabled", or "adaptive"
	// (the model decides; the template's default).
	Thinking struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
		// Display (summarized, omitted) shapes thinking output on
		// Anthropic's side; the thinking here is shown as generated.
		Display string `json:"display"`
	}
	CacheControl struct {
		Type string `json:"type"` // ephemeral
		TTL  string `json:"ttl"`
	}
	OutputConfig struct {
		Effort string        `json:"effort"` // low, medium, high, max: ignored
		Format *OutputFormat `json:"format"`
	}
	OutputFormat struct {
		Type   string          `json:"type"` // json_schema
		Schema json.RawMessage `json:"schema"`
	}
	Metadata struct {
		UserID string `json:"user_id"`
	}
	ContextManagement struct {
		Edits []ContextEdit `json:"edits"`
	}
	// ContextEdit is a server-side edit of the conversation
	// (clear_thinking_20251015, clear_tool_uses_20250919); the fields
	// besides Type depend on it.
	ContextEdit struct {
		Type string          `json:"type"`
		Keep json.RawMessage `json:"keep"`
	}
)

// DefaultMaxTokens is the max_tokens of a request without one, as
// llama-server defaults it (the API requires it; clients always send it).
const DefaultMaxTokens = 4096

// DefaultThinkingBudget is the thinking budget of "enabled" thinking
// without budget_tokens, as llama-server defaults it.
const DefaultThinkingBudget = 10000

// Wire types of a Messages response.
type (
	Response struct {
		ID           string     `json:"id"`
		Type         string     `json:"type"`
		Role         string     `json:"role"`
		Content      []OutBlock `json:"content"`
		Model        string     `json:"model"`
		StopReason   *string    `json:"stop_reason"`
		StopSequence *string    `json:"stop_sequence"`
		Usage        Usage      `json:"usage"`
	}
	OutBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text,omitempty"`
		Thinking  *string         `json:"thinking,omitempty"`
		Signature *string         `json:"signature,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
	}
	Usage struct {
		InputTokens          int `json:"input_tokens"`
		OutputTokens         int `json:"output_tokens"`
		CacheReadInputTokens int `json:"cache_read_input_tokens"`
	}
	// Event is an event of a streamed message; the fields sent
	// depend on Type.
	Event struct {
		Type         string    `json:"type"`
		Message      *Response `json:"message,omitempty"`
		Index        *int      `json:"index,omitempty"`
		ContentBlock *OutBlock `json:"content_block,omitempty"`
		Delta        any       `json:"delta,omitempty"` // Delta or MessageDelta
		Usage        *Usage    `json:"usage,omitempty"`
	}
	// Delta is the delta of a content_block_delta event.
	Delta struct {
		Type        string  `json:"type"`
		Thinking    *string `json:"thinking,omitempty"`
		Text        *string `json:"text,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	// MessageDelta is the delta of the message_delta event.
	MessageDelta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
)

// ToChat converts a Messages request to the internal chat request,
// as llama.cpp's server_chat_convert_anthropic_to_oai converts it to an
// OpenAI one: the system prompt becomes a system message, tool_result
// blocks become tool messages after their turn, tool_use blocks become
// tool calls, thinking blocks reasoning, and the sampling fields
// llama.cpp's parameters of the same meaning. A message of another role
// than user or assistant (agent clients put system messages mid-way) is
// passed on with its role, for the template to place or refuse; the text
// blocks of a message are its content parts, which templates see joined
// with newlines. Blocks of types without a meaning here (server tool
// results, search results, containers) are left out, as llama-server
// leaves them out. Text documents and search results are text parts (see
// sourceText), where llama-server drops them unseen; a document the model
// cannot read (a PDF, a URL, a file) is refused.
func ToChat(req *Request, marker string) (*wire.Chat, error) {
	out := &wire.Chat{AllowEmpty: true, AddGenerationPrompt: true, N: 1, Model: req.Model,
		ToolChoice: chat.ToolChoice{Mode: "auto"}, Messages: []chat.Message{}}
	if len(req.System) > 0 && !wire.IsNull(req.System) {
		var sys string
		switch wire.Kind(req.System) {
		case 's':
			_ = json.Unmarshal(req.System, &sys)
		case 'a':
			var blocks []Block
			if err := json.Unmarshal(req.System, &blocks); err != nil {
				return nil, wire.Errorf(`"system" must be a string or an array of text blocks`)
			}
			var sb strings.Builder
			for _, b := range blocks {
				if b.Type == "text" {
					sb.WriteString(billingHeader(b.Text))
				}
			}
			sys = sb.String()
		default:
			return nil, wire.Errorf(`"system" must be a string or an array of text blocks`)
		}
		if wire.Kind(req.System) == 's' {
			sys = billingHeader(sys)
		}
		out.Messages = append(out.Messages, chat.Message{Role: chat.RoleSystem, Content: sys})
	}
	if req.Messages == nil {
		return nil, wire.Errorf(`"messages" is required`)
	}
	for i, m := range req.Messages {
		switch m.Role {
		case chat.RoleUser, chat.RoleAssistant, chat.RoleSystem, chat.RoleDeveloper, chat.RoleTool:
		case "":
			return nil, wire.Errorf("messages[%d] has no role", i)
		default:
			return nil, wire.Errorf("messages[%d] has an unknown role %q (want user, assistant, system, developer or tool)", i, m.Role)
		}
		switch wire.Kind(m.Content) {
		case 's':
			var s string
			_ = json.Unmarshal(m.Content, &s)
			out.Messages = append(out.Messages, chat.Message{Role: m.Role, Content: s})
			continue
		case 'a':
		case 0:
			if m.Role == "assistant" {
				continue
			}
			return nil, wire.Errorf("messages[%d] has no content", i)
		default:
			return nil, wire.Errorf("messages[%d].content must be a string or an array of content blocks", i)
		}
		var blocks []Block
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, wire.Errorf("messages[%d].content: %v", i, err)
		}
		var parts []wire.TextOrImage
		var calls []chat.ToolCall
		var results []chat.Message
		reasoning := ""
		for j, b := range blocks {
			switch b.Type {
			case "text":
				parts = append(parts, wire.TextOrImage{Text: b.Text})
			case "thinking":
				reasoning += b.Thinking
			case "redacted_thinking":
			case "tool_use":
				args := "{}"
				if len(b.Input) > 0 && !wire.IsNull(b.Input) {
					if wire.Kind(b.Input) != 'o' {
						return nil, wire.Errorf("messages[%d].content[%d].input must be an object", i, j)
					}
					args = string(compactJSON(b.Input))
				}
				calls = append(calls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
			case "tool_result":
				text, err := resultText(b.Content)
				if err != nil {
					return nil, wire.Errorf("messages[%d].content[%d]: %v", i, j, err)
				}
				results = append(results, chat.Message{Role: chat.RoleTool, ToolCallID: b.ToolUseID, Content: text})
			case "image":
				url, err := imageURL(b.Source)
				if err != nil {
					return nil, wire.Errorf("messages[%d].content[%d]: %v", i, j, err)
				}
				parts = append(parts, wire.TextOrImage{Image: true, URL: url})
			case "document", "search_result":
				text, err := sourceText(b)
				if err != nil {
					return nil, wire.Errorf("messages[%d].content[%d]: %v", i, j, err)
				}
				parts = append(parts, wire.TextOrImage{Text: text})
			case "":
				return nil, wire.Errorf("messages[%d].content[%d] has no type", i, j)
			default:
				// server_tool_use, web_search_tool_result, search_result,
				// container_upload...: nothing a local template can show.
			}
		}
		if len(parts) > 0 || len(calls) > 0 || reasoning != "" {
			// Errors name the message by its place in the converted
			// conversation, as the chat endpoint would.
			at := len(out.Messages)
			msg := chat.Message{Role: m.Role}
			if slices.ContainsFunc(parts, func(p wire.TextOrImage) bool { return p.Image }) {
				var err error
				if msg, err = wire.MediaMessage(m.Role, parts, at, &out.Media, marker); err != nil {
					return nil, err
				}
			} else {
				// The text blocks are the message's parts, as llama-server
				// passes them: a template that reads a string sees them
				// joined with newlines, one that reads parts sees the list.
				for _, p := range parts {
					msg.Parts = append(msg.Parts, chat.ContentPart{Type: "text", Text: p.Text})
				}
				msg.Content = wire.JoinParts(msg.Parts, "\n")
			}
			for j, c := range calls {
				if c.Name == "" {
					return nil, wire.Errorf("messages[%d].tool_calls[%d] has no function name", at, j)
				}
			}
			msg.ReasoningContent, msg.ToolCalls = reasoning, calls
			out.Messages = append(out.Messages, msg)
		}
		out.Messages = append(out.Messages, results...)
	}
	for i, t := range req.Tools {
		// A tool's type and defer_loading change nothing here: every
		// tool is a function for the template.
		if t.Name == "" {
			return nil, wire.Errorf("tools[%d] has no name", i)
		}
		params := json.RawMessage(`{"type":"object"}`)
		if len(t.InputSchema) > 0 && !wire.IsNull(t.InputSchema) {
			params = compactJSON(t.InputSchema)
		}
		if wire.Kind(params) != 'o' {
			return nil, wire.Errorf("tools[%d].function.parameters must be a JSON Schema object", i)
		}
		out.Tools = append(out.Tools, chat.Tool{Name: t.Name, Description: t.Description, Parameters: params})
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "":
		case "any":
			out.ToolChoice.Mode = "required"
		case "tool":
			if tc.Name == "" {
				return nil, wire.Errorf(`tool_choice of type "tool" needs a name`)
			}
			out.ToolChoice = chat.ToolChoice{Mode: "function", Function: tc.Name}
		case "none":
			out.ToolChoice.Mode = "none"
		default:
			// A newer kind is left to the model, as llama-server leaves it.
		}
		if tc.DisableParallelToolUse {
			one := false
			out.Parallel = &one
		}
	}
	if len(req.StopSequences) > 0 {
		out.Gen.Stop = wire.SomeStrs("stop", slices.Clone([]string(req.StopSequences)))
	}
	maxTokens := DefaultMaxTokens
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if maxTokens < 1 {
		return nil, wire.Errorf(`"max_tokens" must be at least 1`)
	}
	out.Gen.Params.SetInt("max_tokens", int64(maxTokens))
	if req.Temperature != nil {
		out.Gen.Params.SetFloat("temperature", *req.Temperature)
	}
	if req.TopP != nil {
		out.Gen.Params.SetFloat("top_p", *req.TopP)
	}
	if req.TopK != nil {
		out.Gen.Params.SetInt("top_k", int64(*req.TopK))
	}
	kwargs := maps.Clone(req.ChatTemplateKwargs)
	if th := req.Thinking; th != nil {
		if kwargs == nil {
			kwargs = map[string]any{}
		}
		switch th.Type {
		case "enabled":
			kwargs["enable_thinking"] = true
			budget := DefaultThinkingBudget
			if th.BudgetTokens != nil {
				budget = *th.BudgetTokens
			}
			if budget < 0 {
				return nil, wire.Errorf(`"thinking.budget_tokens" must not be negative`)
			}
			out.Opts.ThinkingBudgetTokens = wire.NumInt("thinking_budget_tokens", int64(budget))
		case "disabled":
			kwargs["enable_thinking"] = false
		default:
			// "adaptive" (and any newer kind): the template's default.
		}
	}
	format, field := req.OutputFormat, "output_format"
	if oc := req.OutputConfig; oc != nil && oc.Format != nil {
		format, field = oc.Format, "output_config.format"
	}
	if format != nil {
		switch format.Type {
		case "json_schema":
			if wire.Kind(format.Schema) != 'o' {
				return nil, wire.Errorf(`"%s.schema" must be a JSON Schema object`, field)
			}
			out.Schema = compactJSON(format.Schema)
		default:
			return nil, wire.Errorf(`"%s.type" must be "json_schema"`, field)
		}
	}
	if len(kwargs) > 0 {
		out.Extra = kwargs
	}
	if out.ToolChoice.Mode != "auto" && out.ToolChoice.Mode != "none" && len(out.Tools) == 0 {
		return nil, wire.Errorf(`"tool_choice" %q needs "tools"`, out.ToolChoice.Mode)
	}
	return out, nil
}

// billingHeader returns a system text with the cch stamp of Claude
// Code's x-anthropic-billing-header line made constant, as llama-server
// makes it: the stamp changes with every request and would keep the prompt
// cache from reaching past it. Any other text is returned as it is.
func billingHeader(text string) string {
	const prefix = "x-anthropic-billing-header:"
	if !strings.HasPrefix(text, prefix) {
		return text
	}
	at := strings.Index(text[len(prefix):], "cch=")
	if at < 0 {
		return text
	}
	start := len(prefix) + at + len("cch=")
	const stamp = 5
	if start+stamp >= len(text) || text[start+stamp] != ';' {
		return text
	}
	return text[:start] + strings.Repeat("f", stamp) + text[start+stamp:]
}

// noImageInput is the error for images given to a model without a
// multimodal projector (none can be loaded here), in llama-server's words.
const noImageInput = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"

// resultText flattens a tool_result's content (a string or text
// blocks) to text.
func resultText(raw json.RawMessage) (string, error) {
	switch wire.Kind(raw) {
	case 0:
		return "", nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	case 'a':
		var blocks []Block
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return "", err
		}
		var sb strings.Builder
		for _, b := range blocks {
			switch b.Type {
			case "text":
				sb.WriteString(b.Text)
			case "document", "search_result":
				text, err := sourceText(b)
				if err != nil {
					return "", err
				}
				if sb.Len() > 0 {
					sb.WriteString("\n\n")
				}
				sb.WriteString(text)
			case "image":
				// llama-server passes them on as images, which a model
				// without a multimodal projector refuses.
				return "", errors.New(noImageInput)
			}
		}
		return sb.String(), nil
	}
	return "", wire.Errorf("tool_result content must be a string or an array of blocks")
}

// sourceText is the text a document or search_result block shows the
// model: its title, a document's context or a search result's source URL,
// and its text, as paragraphs. A document's text is a plain-text source
// ({"type": "text", "data": ...}) or a content source (a string or text
// blocks); its other sources (base64 such as PDFs, URLs, files) cannot be
// read here and are refused. A search result's text is its text blocks.
func sourceText(b Block) (string, error) {
	paras := []string{b.Title}
	var content json.RawMessage
	if b.Type == "search_result" {
		var url string
		if json.Unmarshal(b.Source, &url) != nil {
			return "", errors.New("search_result source must be a string (its URL)")
		}
		paras = append(paras, url)
		content = b.Content
	} else {
		var src struct {
			Type      string          `json:"type"`
			MediaType string          `json:"media_type"`
			Data      string          `json:"data"`
			Content   json.RawMessage `json:"content"`
		}
		if wire.Kind(b.Source) != 'o' || json.Unmarshal(b.Source, &src) != nil {
			return "", errors.New("document block needs a source object")
		}
		paras = append(paras, b.Context)
		switch src.Type {
		case "text":
			paras = append(paras, src.Data)
		case "content":
			content = src.Content
		default:
			return "", fmt.Errorf("document source type %q (%s) cannot be read by this server: send the text as a text source", src.Type, cmp.Or(src.MediaType, "no media type"))
		}
	}
	if content != nil {
		var text string
		switch wire.Kind(content) {
		case 's':
			_ = json.Unmarshal(content, &text)
		case 'a':
			var blocks []Block
			if json.Unmarshal(content, &blocks) != nil {
				return "", fmt.Errorf("%s content must be a string or text blocks", b.Type)
			}
			var sb strings.Builder
			for _, c := range blocks {
				switch c.Type {
				case "text":
					if sb.Len() > 0 {
						sb.WriteByte('\n')
					}
					sb.WriteString(c.Text)
				case "image":
					return "", errors.New(noImageInput)
				}
			}
			text = sb.String()
		default:
			return "", fmt.Errorf("%s content must be a string or text blocks", b.Type)
		}
		paras = append(paras, text)
	}
	paras = slices.DeleteFunc(paras, func(p string) bool { return p == "" })
	return strings.Join(paras, "\n\n"), nil
}

func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// StopReason maps how generation ended to Anthropic's stop_reason.
func StopReason(ev engine.Event, toolCalls bool) string {
	switch {
	case toolCalls && (ev.Stop == engine.StopTypeEOS || ev.Stop == engine.StopTypeWord):
		return "tool_use"
	case ev.Stop == engine.StopTypeWord:
		return "stop_sequence"
	case ev.Stop == engine.StopTypeEOS:
		return "end_turn"
	}
	return "max_tokens"
}

// UsageOf is the usage of a finished generation.
func UsageOf(ev engine.Event) Usage {
	return Usage{InputTokens: ev.PromptTokens - ev.CachedTokens, OutputTokens: ev.Generated, CacheReadInputTokens: ev.CachedTokens}
}

// toolArgs returns a call's arguments as a JSON object ({} when they do
// not parse as one).
func toolArgs(args string) json.RawMessage {
	raw := json.RawMessage(strings.TrimSpace(args))
	if wire.Kind(raw) != 'o' || !json.Valid(raw) {
		return json.RawMessage(`{}`)
	}
	return compactJSON(raw)
}

// imageURL converts an Anthropic image block's source (base64 data
// with its media type, or a data: URL) into the URL of an image.
func imageURL(raw json.RawMessage) (string, error) {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if wire.Kind(raw) != 'o' || json.Unmarshal(raw, &src) != nil {
		return "", errors.New("image block needs a source object")
	}
	switch src.Type {
	case "base64":
		if !strings.HasPrefix(src.MediaType, "image/") {
			return "", fmt.Errorf("image source media_type %q is not an image type", src.MediaType)
		}
		return "data:" + src.MediaType + ";base64," + src.Data, nil
	case "url":
		return src.URL, nil
	}
	return "", fmt.Errorf("image source type %q is not supported (base64 or url)", src.Type)
}

// NewResponse is the answer msg of a finished generation (final is its
// last event), as Anthropic's message object with id and model.
func NewResponse(id, model string, msg chat.Message, final engine.Event) Response {
	out := Response{ID: id, Type: "message", Role: "assistant", Model: model, Content: []OutBlock{}}
	if msg.ReasoningContent != "" {
		th, sig := msg.ReasoningContent, ""
		out.Content = append(out.Content, OutBlock{Type: "thinking", Thinking: &th, Signature: &sig})
	}
	if msg.Content != "" {
		text := msg.Content
		out.Content = append(out.Content, OutBlock{Type: "text", Text: &text})
	}
	for _, tc := range msg.ToolCalls {
		out.Content = append(out.Content, OutBlock{Type: "tool_use", ID: wire.IDOrNew(tc.ID, "toolu_"), Name: tc.Name, Input: toolArgs(tc.Arguments)})
	}
	sr := StopReason(final, len(msg.ToolCalls) > 0)
	out.StopReason = &sr
	if sr == "stop_sequence" {
		sw := final.StoppingWord
		out.StopSequence = &sw
	}
	out.Usage = UsageOf(final)
	return out
}

// Stream turns a generation's parsed deltas into the events of
// Anthropic's stream: message_start, ping, one content block at a time
// (start, deltas, stop), message_delta with the stop reason and usage,
// message_stop. Each event goes to send (its name and its object), which
// reports false when the client is gone; so do the methods, after which
// the stream is over.
type Stream struct {
	id, model string
	send      func(name string, v any) bool
	started   bool
	index     int
	open      string // kind of the open block: thinking, text, tool
	openTool  int
	calls     int
}

// NewStream returns the stream of message id from model.
func NewStream(id, model string, send func(name string, v any) bool) *Stream {
	return &Stream{id: id, model: model, send: send, index: -1, openTool: -1}
}

// Start sends message_start and ping once, at the first event of the
// generation (ev gives the prompt's usage).
func (s *Stream) Start(ev engine.Event) bool {
	if s.started {
		return true
	}
	s.started = true
	msg := Response{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []OutBlock{},
		Usage: Usage{InputTokens: ev.PromptTokens - ev.CachedTokens, CacheReadInputTokens: ev.CachedTokens}}
	return s.send("message_start", Event{Type: "message_start", Message: &msg}) &&
		s.send("ping", Event{Type: "ping"})
}

func (s *Stream) closeBlock() bool {
	if s.open == "" {
		return true
	}
	s.open = ""
	return s.send("content_block_stop", Event{Type: "content_block_stop", Index: &s.index})
}

func (s *Stream) openBlock(kind string, block OutBlock) bool {
	if !s.closeBlock() {
		return false
	}
	s.index++
	s.open = kind
	return s.send("content_block_start", Event{Type: "content_block_start", Index: &s.index, ContentBlock: &block})
}

func (s *Stream) delta(d Delta) bool {
	return s.send("content_block_delta", Event{Type: "content_block_delta", Index: &s.index, Delta: d})
}

// Delta sends a parsed piece of the answer: thinking, text and tool-call
// deltas, each in a block of its kind.
func (s *Stream) Delta(d chat.Delta) bool {
	if d.ReasoningContent != "" {
		if s.open != "thinking" {
			empty := ""
			if !s.openBlock("thinking", OutBlock{Type: "thinking", Thinking: &empty}) {
				return false
			}
		}
		if !s.delta(Delta{Type: "thinking_delta", Thinking: &d.ReasoningContent}) {
			return false
		}
	}
	if d.Content != "" {
		if s.open != "text" {
			empty := ""
			if !s.openBlock("text", OutBlock{Type: "text", Text: &empty}) {
				return false
			}
		}
		if !s.delta(Delta{Type: "text_delta", Text: &d.Content}) {
			return false
		}
	}
	for _, tc := range d.ToolCalls {
		if s.open != "tool" || s.openTool != tc.Index {
			if !s.openBlock("tool", OutBlock{Type: "tool_use", ID: wire.IDOrNew(tc.ID, "toolu_"), Name: tc.Name, Input: json.RawMessage(`{}`)}) {
				return false
			}
			s.openTool = tc.Index
			s.calls++
		}
		if tc.ArgumentsDelta != "" {
			if !s.delta(Delta{Type: "input_json_delta", PartialJSON: &tc.ArgumentsDelta}) {
				return false
			}
		}
	}
	return true
}

// Finish sends the last delta d, closes the open block and ends the
// message with the stop reason and usage of the final event ev.
func (s *Stream) Finish(ev engine.Event, d chat.Delta) bool {
	if !s.Delta(d) || !s.closeBlock() {
		return false
	}
	sr := StopReason(ev, s.calls > 0)
	md := MessageDelta{StopReason: sr}
	if sr == "stop_sequence" {
		md.StopSequence = &ev.StoppingWord
	}
	u := UsageOf(ev)
	if !s.send("message_delta", Event{Type: "message_delta", Delta: md, Usage: &u}) {
		return false
	}
	return s.send("message_stop", Event{Type: "message_stop"})
}
