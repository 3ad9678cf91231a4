package server

// Anthropic's Messages API: POST /v1/messages and
// POST /v1/messages/count_tokens. As llama.cpp does, a request is converted
// to an OpenAI chat request and run by the chat completion machinery; the
// answer is converted back into content blocks, and errors take
// Anthropic's shape.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/x/llama/engine"

	"github.com/x/llama/chat"
)

// Wire types of a Messages request.
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
	}
	anthMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	// anthBlock is a content block of any type; the fields used depend on Type.
	anthBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		Thinking  string          `json:"thinking,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   json.RawMessage `json:"content,omitempty"`
		Source    json.RawMessage `json:"source,omitempty"` // image blocks
	}
	anthTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	anthToolChoice struct {
		Type string `json:"type"` // auto, any, tool, none
		Name string `json:"name"`
	}
	anthThinking struct {
		Type         string `json:"type"` // enabled or disabled
		BudgetTokens int    `json:"budget_tokens"`
	}
)

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
	anthErrorBody struct {
		Type  string        `json:"type"`
		Error anthErrorInfo `json:"error"`
	}
	anthErrorInfo struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
)

// anthErrorType maps llama.cpp's error types to Anthropic's.
func anthErrorType(t string, status int) string {
	switch t {
	case errInvalidRequest, errExceedContext, errNotSupported:
		return "invalid_request_error"
	case errAuthentication:
		return "authentication_error"
	case errPermission:
		return "permission_error"
	case errNotFound:
		return "not_found_error"
	case errUnavailable:
		return "overloaded_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// anthToChat converts a Messages request to an OpenAI chat completion body,
// as llama.cpp's server_chat_convert_anthropic_to_oai.
func anthToChat(req *anthRequest) (map[string]any, error) {
	msgs := []map[string]any{}
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
					sys += b.Text
				}
			}
		default:
			return nil, badRequest(`"system" must be a string or an array of text blocks`)
		}
		msgs = append(msgs, map[string]any{"role": "system", "content": sys})
	}
	if req.Messages == nil {
		return nil, badRequest(`"messages" is required`)
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, badRequest("messages[%d].role must be user or assistant, not %q", i, m.Role)
		}
		switch jsonKind(m.Content) {
		case 's':
			var s string
			_ = json.Unmarshal(m.Content, &s)
			msgs = append(msgs, map[string]any{"role": m.Role, "content": s})
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
		var parts, calls, results []map[string]any
		reasoning := ""
		for j, b := range blocks {
			switch b.Type {
			case "text":
				parts = append(parts, map[string]any{"type": "text", "text": b.Text})
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
				calls = append(calls, map[string]any{"id": b.ID, "type": "function",
					"function": map[string]any{"name": b.Name, "arguments": args}})
			case "tool_result":
				text, err := anthResultText(b.Content)
				if err != nil {
					return nil, badRequest("messages[%d].content[%d]: %v", i, j, err)
				}
				results = append(results, map[string]any{"role": "tool", "tool_call_id": b.ToolUseID, "content": text})
			case "image":
				part, err := anthImagePart(b.Source)
				if err != nil {
					return nil, badRequest("messages[%d].content[%d]: %v", i, j, err)
				}
				parts = append(parts, part)
			case "document":
				return nil, badRequest("messages[%d].content[%d]: %s blocks are not supported by this model", i, j, b.Type)
			default:
				return nil, badRequest("messages[%d].content[%d]: unknown content block type %q", i, j, b.Type)
			}
		}
		if len(parts) > 0 || len(calls) > 0 || reasoning != "" {
			msg := map[string]any{"role": m.Role}
			if anthHasMedia(parts) {
				msg["content"] = parts // OpenAI parts, images included
			} else if len(parts) > 0 {
				// Text parts are joined into one string, which every
				// template reads (some would print a list of parts).
				var sb strings.Builder
				for _, p := range parts {
					sb.WriteString(p["text"].(string))
				}
				msg["content"] = sb.String()
			} else {
				msg["content"] = ""
			}
			if len(calls) > 0 {
				msg["tool_calls"] = calls
			}
			if reasoning != "" {
				msg["reasoning_content"] = reasoning
			}
			msgs = append(msgs, msg)
		}
		msgs = append(msgs, results...)
	}
	body := map[string]any{"messages": msgs}
	if len(req.Tools) > 0 {
		var tools []map[string]any
		for i, t := range req.Tools {
			if t.Name == "" {
				return nil, badRequest("tools[%d] has no name", i)
			}
			params := json.RawMessage(`{"type":"object"}`)
			if len(t.InputSchema) > 0 && !isNull(t.InputSchema) {
				params = t.InputSchema
			}
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
				"name": t.Name, "description": t.Description, "parameters": params}})
		}
		body["tools"] = tools
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "":
			body["tool_choice"] = "auto"
		case "any":
			body["tool_choice"] = "required"
		case "tool":
			if tc.Name == "" {
				return nil, badRequest(`tool_choice of type "tool" needs a name`)
			}
			body["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tc.Name}}
		case "none":
			body["tool_choice"] = "none"
		default:
			return nil, badRequest("unknown tool_choice type %q", tc.Type)
		}
	}
	if len(req.StopSequences) > 0 {
		body["stop"] = req.StopSequences
	}
	if req.MaxTokens == nil {
		return nil, badRequest(`"max_tokens" is required`)
	}
	if *req.MaxTokens < 1 {
		return nil, badRequest(`"max_tokens" must be at least 1`)
	}
	body["max_tokens"] = *req.MaxTokens
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		body["top_p"] = *req.TopP
	}
	if req.TopK != nil {
		body["top_k"] = *req.TopK
	}
	kwargs := map[string]any{}
	for k, v := range req.ChatTemplateKwargs {
		kwargs[k] = v
	}
	if th := req.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			kwargs["enable_thinking"] = true
		case "disabled":
			kwargs["enable_thinking"] = false
		default:
			return nil, badRequest(`"thinking.type" must be "enabled" or "disabled"`)
		}
	}
	if len(kwargs) > 0 {
		body["chat_template_kwargs"] = kwargs
	}
	if req.Model != "" {
		body["model"] = req.Model
	}
	return body, nil
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

// toFields turns a converted body into the reqFields the chat handlers read.
func toFields(body map[string]any) (reqFields, error) {
	f := reqFields{}
	for k, v := range body {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, badRequest("%s: %v", k, err)
		}
		f[k] = b
	}
	return f, nil
}

// anthPrepare decodes and converts a Messages request and gets its
// instance. Unless it fails, release must be called.
func anthPrepare(s *Server, r *http.Request) (*anthRequest, reqFields, *instance, func(), error) {
	var req anthRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, nil, nil, nil, err
	}
	body, err := anthToChat(&req)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	f, err := toFields(body)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	inst, release, err := s.instanceFor(r, req.Model)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return &req, f, inst, release, nil
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
		body, err := anthToChat(&req)
		if err != nil {
			return err
		}
		f, err := toFields(body)
		if err != nil {
			return err
		}
		inst, release, err := s.instanceFor(r, req.Model)
		if err != nil {
			return err
		}
		defer release()
		g, _, _, err := parseChatRequestWith(f, inst, true, nil)
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
		req, f, inst, release, err := anthPrepare(s, r)
		if err != nil {
			return err
		}
		defer release()
		g, plan, co, err := parseChatRequestWith(f, inst, true, nil)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		events, err := s.runTask(ctx, inst, g.task)
		if err != nil {
			return err
		}
		id := newID("msg_")
		if req.Stream {
			streamAnthropic(w, plan, co.Model, id, events)
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
			out.Content = append(out.Content, anthOutBlock{Type: "tool_use", ID: idOrNew(tc.ID, "toolu_"), Name: tc.Name, Input: toolArgs(tc.Arguments)})
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
func streamAnthropic(w http.ResponseWriter, plan *chatPlan, model, id string, events <-chan engine.Event) {
	sse := sseStart(w)
	send := func(name string, v any) bool {
		if _, err := w.Write([]byte("event: " + name + "\n")); err != nil {
			return false
		}
		return sse.data(v) == nil
	}
	started := false
	start := func(ev engine.Event) bool {
		if started {
			return true
		}
		started = true
		msg := anthResponse{ID: id, Type: "message", Role: "assistant", Model: model, Content: []anthOutBlock{},
			Usage: anthUsage{InputTokens: ev.PromptTokens - ev.CachedTokens, CacheReadInputTokens: ev.CachedTokens}}
		return send("message_start", map[string]any{"type": "message_start", "message": msg}) &&
			send("ping", map[string]any{"type": "ping"})
	}
	parser := newChatStream(plan.Parse).withPrefix(plan.Prefill).withJSONContent(plan.ResponseFormat)
	index := -1
	open := "" // kind of the open block: thinking, text, tool
	openTool := -1
	calls := 0
	closeBlock := func() bool {
		if open == "" {
			return true
		}
		open = ""
		return send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	openBlock := func(kind string, block anthOutBlock) bool {
		if !closeBlock() {
			return false
		}
		index++
		open = kind
		return send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block})
	}
	delta := func(d map[string]any) bool {
		return send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
	}
	emit := func(d chat.Delta) bool {
		if d.ReasoningContent != "" {
			if open != "thinking" {
				empty := ""
				if !openBlock("thinking", anthOutBlock{Type: "thinking", Thinking: &empty}) {
					return false
				}
			}
			if !delta(map[string]any{"type": "thinking_delta", "thinking": d.ReasoningContent}) {
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
			if !delta(map[string]any{"type": "text_delta", "text": d.Content}) {
				return false
			}
		}
		for _, tc := range d.ToolCalls {
			if open != "tool" || openTool != tc.Index {
				if !openBlock("tool", anthOutBlock{Type: "tool_use", ID: idOrNew(tc.ID, "toolu_"), Name: tc.Name, Input: json.RawMessage(`{}`)}) {
					return false
				}
				openTool = tc.Index
				calls++
			}
			if tc.ArgumentsDelta != "" {
				if !delta(map[string]any{"type": "input_json_delta", "partial_json": tc.ArgumentsDelta}) {
					return false
				}
			}
		}
		return true
	}
	for ev := range events {
		if ev.Err != nil {
			_, body := anthropicErrors.render(ev.Err)
			send("error", body)
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
			md := map[string]any{"stop_reason": sr, "stop_sequence": nil}
			if sr == "stop_sequence" {
				md["stop_sequence"] = ev.StoppingWord
			}
			u := anthUsageOf(ev)
			if !send("message_delta", map[string]any{"type": "message_delta", "delta": md, "usage": u}) {
				return
			}
			send("message_stop", map[string]any{"type": "message_stop"})
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
