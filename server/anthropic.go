package server

// Anthropic's Messages API: POST /v1/messages and
// POST /v1/messages/count_tokens. A request is decoded into its wire types,
// converted to the internal wire.Chat (as llama.cpp converts it to an
// OpenAI chat request) and run by the chat completion machinery; the
// answer is converted back into content blocks, and errors take
// Anthropic's shape.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
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
	anthRequest struct {
		Model         string          `json:"model"`
		System        json.RawMessage `json:"system"`
		Messages      []anthMessage   `json:"messages"`
		Tools         []anthTool      `json:"tools"`
		ToolChoice    *anthToolChoice `json:"tool_choice"`
		StopSequences []string        `json:"stop_sequences"`
		MaxTokens     *int            `json:"max_tokens"`
		Temperature   *float64        `json:"temperature"`
		TopP          *float64        `json:"top_p"`
		TopK          *int            `json:"top_k"`
		Stream        bool            `json:"stream"`
		Thinking      *anthThinking   `json:"thinking"`
		// ChatTemplateKwargs is llama.cpp's extension, passed through.
		ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
		// OutputConfig's format constrains the answer to a JSON Schema.
		OutputConfig      *anthOutputConfig      `json:"output_config"`
		Metadata          *anthMetadata          `json:"metadata"`
		ContextManagement *anthContextManagement `json:"context_management"`
		ServiceTier       string                 `json:"service_tier"`
	}
	anthMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	// anthBlock is a content block of any type; the fields used depend on Type.
	anthBlock struct {
		Type         string            `json:"type"`
		Text         string            `json:"text,omitempty"`
		Thinking     string            `json:"thinking,omitempty"`
		ID           string            `json:"id,omitempty"`
		Name         string            `json:"name,omitempty"`
		Input        json.RawMessage   `json:"input,omitempty"`
		ToolUseID    string            `json:"tool_use_id,omitempty"`
		Content      json.RawMessage   `json:"content,omitempty"`
		Source       json.RawMessage   `json:"source,omitempty"` // image blocks
		IsError      bool              `json:"is_error,omitempty"`
		CacheControl *anthCacheControl `json:"cache_control,omitempty"`
	}
	anthTool struct {
		// Type is empty or "custom" for a client tool; Anthropic's
		// server tools (web_search_20250305, ...) are given to the
		// template as functions of their name, as llama-server does.
		Type         string            `json:"type"`
		Name         string            `json:"name"`
		Description  string            `json:"description"`
		InputSchema  json.RawMessage   `json:"input_schema"`
		DeferLoading bool              `json:"defer_loading"`
		CacheControl *anthCacheControl `json:"cache_control"`
	}
	anthToolChoice struct {
		Type string `json:"type"` // auto, any, tool, none
		Name string `json:"name"`
		// DisableParallelToolUse allows one tool call at most.
		DisableParallelToolUse bool `json:"disable_parallel_tool_use"`
	}
	// anthThinking is "enabled" with a budget, "disabled", or "adaptive"
	// (the model decides; the template's default).
	anthThinking struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
		// Display (summarized, omitted) shapes thinking output on
		// Anthropic's side; the thinking here is shown as generated.
		Display string `json:"display"`
	}
	anthCacheControl struct {
		Type string `json:"type"` // ephemeral
		TTL  string `json:"ttl"`
	}
	anthOutputConfig struct {
		Effort string            `json:"effort"` // low, medium, high, max: ignored
		Format *anthOutputFormat `json:"format"`
	}
	anthOutputFormat struct {
		Type   string          `json:"type"` // json_schema
		Schema json.RawMessage `json:"schema"`
	}
	anthMetadata struct {
		UserID string `json:"user_id"`
	}
	anthContextManagement struct {
		Edits []anthContextEdit `json:"edits"`
	}
	// anthContextEdit is a server-side edit of the conversation
	// (clear_thinking_20251015, clear_tool_uses_20250919); the fields
	// besides Type depend on it.
	anthContextEdit struct {
		Type string          `json:"type"`
		Keep json.RawMessage `json:"keep"`
	}
)

// anthDefaultMaxTokens is the max_tokens of a request without one, as
// llama-server defaults it (the API requires it; clients always send it).
const anthDefaultMaxTokens = 4096

// anthDefaultThinkingBudget is the thinking budget of "enabled" thinking
// without budget_tokens, as llama-server defaults it.
const anthDefaultThinkingBudget = 10000

// Wire types of a Messages response.
type (
	anthResponse struct {
		ID           string         `json:"id"`
		Type         string         `json:"type"`
		Role         string         `json:"role"`
		Content      []anthOutBlock `json:"content"`
		Model        string         `json:"model"`
		StopReason   *string        `json:"stop_reason"`
		StopSequence *string        `json:"stop_sequence"`
		Usage        anthUsage      `json:"usage"`
	}
	anthOutBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text,omitempty"`
		Thinking  *string         `json:"thinking,omitempty"`
		Signature *string         `json:"signature,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
	}
	anthUsage struct {
		InputTokens          int `json:"input_tokens"`
		OutputTokens         int `json:"output_tokens"`
		CacheReadInputTokens int `json:"cache_read_input_tokens"`
	}
	// anthEvent is an event of a streamed message; the fields sent
	// depend on Type.
	anthEvent struct {
		Type         string        `json:"type"`
		Message      *anthResponse `json:"message,omitempty"`
		Index        *int          `json:"index,omitempty"`
		ContentBlock *anthOutBlock `json:"content_block,omitempty"`
		Delta        any           `json:"delta,omitempty"` // anthDelta or anthMessageDelta
		Usage        *anthUsage    `json:"usage,omitempty"`
	}
	// anthDelta is the delta of a content_block_delta event.
	anthDelta struct {
		Type        string  `json:"type"`
		Thinking    *string `json:"thinking,omitempty"`
		Text        *string `json:"text,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	// anthMessageDelta is the delta of the message_delta event.
	anthMessageDelta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
)

// anthToChat converts a Messages request to the internal chat request,
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
// leaves them out; a document is refused rather than dropped unseen.
func anthToChat(req *anthRequest, marker string) (*wire.Chat, error) {
	out := &wire.Chat{AllowEmpty: true, AddGenerationPrompt: true, N: 1, Model: req.Model,
		ToolChoice: chat.ToolChoice{Mode: "auto"}, Messages: []chat.Message{}}
	if len(req.System) > 0 && !isNull(req.System) {
		var sys string
		switch jsonKind(req.System) {
		case 's':
			_ = json.Unmarshal(req.System, &sys)
		case 'a':
			var blocks []anthBlock
			if err := json.Unmarshal(req.System, &blocks); err != nil {
				return nil, badRequest(`"system" must be a string or an array of text blocks`)
			}
			for _, b := range blocks {
				if b.Type == "text" {
					sys += anthBillingHeader(b.Text)
				}
			}
		default:
			return nil, badRequest(`"system" must be a string or an array of text blocks`)
		}
		if jsonKind(req.System) == 's' {
			sys = anthBillingHeader(sys)
		}
		out.Messages = append(out.Messages, chat.Message{Role: chat.RoleSystem, Content: sys})
	}
	if req.Messages == nil {
		return nil, badRequest(`"messages" is required`)
	}
	for i, m := range req.Messages {
		switch m.Role {
		case chat.RoleUser, chat.RoleAssistant, chat.RoleSystem, chat.RoleDeveloper, chat.RoleTool:
		case "":
			return nil, badRequest("messages[%d] has no role", i)
		default:
			return nil, badRequest("messages[%d] has an unknown role %q (want user, assistant, system, developer or tool)", i, m.Role)
		}
		switch jsonKind(m.Content) {
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
			return nil, badRequest("messages[%d] has no content", i)
		default:
			return nil, badRequest("messages[%d].content must be a string or an array of content blocks", i)
		}
		var blocks []anthBlock
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, badRequest("messages[%d].content: %v", i, err)
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
				if len(b.Input) > 0 && !isNull(b.Input) {
					if jsonKind(b.Input) != 'o' {
						return nil, badRequest("messages[%d].content[%d].input must be an object", i, j)
					}
					args = string(compactJSON(b.Input))
				}
				calls = append(calls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
			case "tool_result":
				text, err := anthResultText(b.Content)
				if err != nil {
					return nil, badRequest("messages[%d].content[%d]: %v", i, j, err)
				}
				results = append(results, chat.Message{Role: chat.RoleTool, ToolCallID: b.ToolUseID, Content: text})
			case "image":
				url, err := anthImageURL(b.Source)
				if err != nil {
					return nil, badRequest("messages[%d].content[%d]: %v", i, j, err)
				}
				parts = append(parts, wire.TextOrImage{Image: true, URL: url})
			case "document":
				return nil, badRequest("messages[%d].content[%d]: %s blocks are not supported by this model", i, j, b.Type)
			case "":
				return nil, badRequest("messages[%d].content[%d] has no type", i, j)
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
				for k, p := range parts {
					if k > 0 {
						msg.Content += "\n"
					}
					msg.Content += p.Text
					msg.Parts = append(msg.Parts, chat.ContentPart{Type: "text", Text: p.Text})
				}
			}
			for j, c := range calls {
				if c.Name == "" {
					return nil, badRequest("messages[%d].tool_calls[%d] has no function name", at, j)
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
			return nil, badRequest("tools[%d] has no name", i)
		}
		params := json.RawMessage(`{"type":"object"}`)
		if len(t.InputSchema) > 0 && !isNull(t.InputSchema) {
			params = compactJSON(t.InputSchema)
		}
		if jsonKind(params) != 'o' {
			return nil, badRequest("tools[%d].function.parameters must be a JSON Schema object", i)
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
				return nil, badRequest(`tool_choice of type "tool" needs a name`)
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
		out.Gen.Stop = wire.SomeStrs("stop", slices.Clone(req.StopSequences))
	}
	maxTokens := anthDefaultMaxTokens
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if maxTokens < 1 {
		return nil, badRequest(`"max_tokens" must be at least 1`)
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
			budget := anthDefaultThinkingBudget
			if th.BudgetTokens != nil {
				budget = *th.BudgetTokens
			}
			if budget < 0 {
				return nil, badRequest(`"thinking.budget_tokens" must not be negative`)
			}
			out.Opts.ThinkingBudgetTokens = wire.NumInt("thinking_budget_tokens", int64(budget))
		case "disabled":
			kwargs["enable_thinking"] = false
		default:
			// "adaptive" (and any newer kind): the template's default.
		}
	}
	if oc := req.OutputConfig; oc != nil && oc.Format != nil {
		switch oc.Format.Type {
		case "json_schema":
			if jsonKind(oc.Format.Schema) != 'o' {
				return nil, badRequest(`"output_config.format.schema" must be a JSON Schema object`)
			}
			out.Schema = compactJSON(oc.Format.Schema)
		default:
			return nil, badRequest(`"output_config.format.type" must be "json_schema"`)
		}
	}
	if len(kwargs) > 0 {
		out.Extra = kwargs
	}
	if out.ToolChoice.Mode != "auto" && out.ToolChoice.Mode != "none" && len(out.Tools) == 0 {
		return nil, badRequest(`"tool_choice" %q needs "tools"`, out.ToolChoice.Mode)
	}
	return out, nil
}

// anthBillingHeader returns a system text with the cch stamp of Claude
// Code's x-anthropic-billing-header line made constant, as llama-server
// makes it: the stamp changes with every request and would keep the prompt
// cache from reaching past it. Any other text is returned as it is.
func anthBillingHeader(text string) string {
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

// anthResultText flattens a tool_result's content (a string or text
// blocks) to text.
// noImageInput is the error for images given to a model without a
// multimodal projector (none can be loaded here), in llama-server's words.
const noImageInput = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"

func anthResultText(raw json.RawMessage) (string, error) {
	switch jsonKind(raw) {
	case 0:
		return "", nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	case 'a':
		var blocks []anthBlock
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return "", err
		}
		var sb strings.Builder
		for _, b := range blocks {
			switch b.Type {
			case "text":
				sb.WriteString(b.Text)
			case "image", "document":
				// llama-server passes them on as images, which a model
				// without a multimodal projector refuses.
				return "", errors.New(noImageInput)
			}
		}
		return sb.String(), nil
	}
	return "", badRequest("tool_result content must be a string or an array of blocks")
}

func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// anthPrepare decodes and converts a Messages request and gets its
// instance. Unless it fails, release must be called.
func anthPrepare(s *Server, r *http.Request) (*anthRequest, *wire.Chat, *instance, func(), error) {
	var req anthRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, nil, nil, nil, err
	}
	creq, err := anthToChat(&req, s.mediaMarker)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	inst, release, err := s.instanceFor(r, req.Model)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return &req, creq, inst, release, nil
}

func handleAnthropicCountTokens(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req anthRequest
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
		if req.MaxTokens == nil {
			one := 1 // count_tokens takes no max_tokens
			req.MaxTokens = &one
		}
		creq, err := anthToChat(&req, s.mediaMarker)
		if err != nil {
			return err
		}
		inst, release, err := s.instanceFor(r, req.Model)
		if err != nil {
			return err
		}
		defer release()
		g, _, _, err := inst.startChat(creq)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(g.task.Prompt)})
		return nil
	}
}

// anthStopReason maps how generation ended to Anthropic's stop_reason.
func anthStopReason(ev engine.Event, toolCalls bool) string {
	switch {
	case toolCalls && (ev.Stop == engine.StopEOS || ev.Stop == engine.StopWord):
		return "tool_use"
	case ev.Stop == engine.StopWord:
		return "stop_sequence"
	case ev.Stop == engine.StopEOS:
		return "end_turn"
	}
	return "max_tokens"
}

func anthUsageOf(ev engine.Event) anthUsage {
	return anthUsage{InputTokens: ev.PromptTokens - ev.CachedTokens, OutputTokens: ev.Generated, CacheReadInputTokens: ev.CachedTokens}
}

// toolArgs returns a call's arguments as a JSON object ({} when they do
// not parse as one).
func toolArgs(args string) json.RawMessage {
	raw := json.RawMessage(strings.TrimSpace(args))
	if jsonKind(raw) != 'o' || !json.Valid(raw) {
		return json.RawMessage(`{}`)
	}
	return compactJSON(raw)
}

func handleAnthropicMessages(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, creq, inst, release, err := anthPrepare(s, r)
		if err != nil {
			return err
		}
		defer release()
		arrived := inst.Engine.Expect()
		defer arrived()
		g, plan, co, err := inst.startChat(creq)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		events, err := s.runTask(ctx, inst, arrived, g.task)
		if err != nil {
			return err
		}
		id := wire.NewID("msg_")
		if req.Stream {
			streamAnthropic(ctx, w, plan, co.Model, id, events)
			return nil
		}
		res, msg, err := collectChat(ctx, inst, plan, events)
		if err != nil {
			return err
		}
		out := anthResponse{ID: id, Type: "message", Role: "assistant", Model: co.Model, Content: []anthOutBlock{}}
		if msg.ReasoningContent != "" {
			th, sig := msg.ReasoningContent, ""
			out.Content = append(out.Content, anthOutBlock{Type: "thinking", Thinking: &th, Signature: &sig})
		}
		if msg.Content != "" {
			text := msg.Content
			out.Content = append(out.Content, anthOutBlock{Type: "text", Text: &text})
		}
		for _, tc := range msg.ToolCalls {
			out.Content = append(out.Content, anthOutBlock{Type: "tool_use", ID: wire.IDOrNew(tc.ID, "toolu_"), Name: tc.Name, Input: toolArgs(tc.Arguments)})
		}
		sr := anthStopReason(res.Final, len(msg.ToolCalls) > 0)
		out.StopReason = &sr
		if sr == "stop_sequence" {
			sw := res.Final.StoppingWord
			out.StopSequence = &sw
		}
		out.Usage = anthUsageOf(res.Final)
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// streamAnthropic sends a message as Anthropic's stream: message_start,
// ping, one content block at a time (start, deltas, stop), message_delta
// with the stop reason and usage, message_stop.
func streamAnthropic(ctx context.Context, w http.ResponseWriter, plan *chatPlan, model, id string, events eventStream) {
	sse, _ := sseStart(ctx, w)
	send := func(name string, v any) bool { return sse.send(name, v) == nil }
	started := false
	start := func(ev engine.Event) bool {
		if started {
			return true
		}
		started = true
		msg := anthResponse{ID: id, Type: "message", Role: "assistant", Model: model, Content: []anthOutBlock{},
			Usage: anthUsage{InputTokens: ev.PromptTokens - ev.CachedTokens, CacheReadInputTokens: ev.CachedTokens}}
		return send("message_start", anthEvent{Type: "message_start", Message: &msg}) &&
			send("ping", anthEvent{Type: "ping"})
	}
	parser := plan.NewStream()
	index := -1
	open := "" // kind of the open block: thinking, text, tool
	openTool := -1
	calls := 0
	closeBlock := func() bool {
		if open == "" {
			return true
		}
		open = ""
		return send("content_block_stop", anthEvent{Type: "content_block_stop", Index: &index})
	}
	openBlock := func(kind string, block anthOutBlock) bool {
		if !closeBlock() {
			return false
		}
		index++
		open = kind
		return send("content_block_start", anthEvent{Type: "content_block_start", Index: &index, ContentBlock: &block})
	}
	delta := func(d anthDelta) bool {
		return send("content_block_delta", anthEvent{Type: "content_block_delta", Index: &index, Delta: d})
	}
	emit := func(d chat.Delta) bool {
		if d.ReasoningContent != "" {
			if open != "thinking" {
				empty := ""
				if !openBlock("thinking", anthOutBlock{Type: "thinking", Thinking: &empty}) {
					return false
				}
			}
			if !delta(anthDelta{Type: "thinking_delta", Thinking: &d.ReasoningContent}) {
				return false
			}
		}
		if d.Content != "" {
			if open != "text" {
				empty := ""
				if !openBlock("text", anthOutBlock{Type: "text", Text: &empty}) {
					return false
				}
			}
			if !delta(anthDelta{Type: "text_delta", Text: &d.Content}) {
				return false
			}
		}
		for _, tc := range d.ToolCalls {
			if open != "tool" || openTool != tc.Index {
				if !openBlock("tool", anthOutBlock{Type: "tool_use", ID: wire.IDOrNew(tc.ID, "toolu_"), Name: tc.Name, Input: json.RawMessage(`{}`)}) {
					return false
				}
				openTool = tc.Index
				calls++
			}
			if tc.ArgumentsDelta != "" {
				if !delta(anthDelta{Type: "input_json_delta", PartialJSON: &tc.ArgumentsDelta}) {
					return false
				}
			}
		}
		return true
	}
	for events.Next() {
		ev := events.Event()
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Progress != nil {
			continue
		}
		if !start(ev) {
			return
		}
		if ev.Done {
			d := parser.Finish(ev.Stop == engine.StopLimit)
			if !emit(d) || !closeBlock() {
				return
			}
			sr := anthStopReason(ev, calls > 0)
			md := anthMessageDelta{StopReason: sr}
			if sr == "stop_sequence" {
				md.StopSequence = &ev.StoppingWord
			}
			u := anthUsageOf(ev)
			if !send("message_delta", anthEvent{Type: "message_delta", Delta: md, Usage: &u}) {
				return
			}
			send("message_stop", anthEvent{Type: "message_stop"})
			return
		}
		if ev.Text == "" {
			continue
		}
		d := parser.Push(ev.Text)
		if !d.Empty() && !emit(d) {
			return
		}
	}
}
