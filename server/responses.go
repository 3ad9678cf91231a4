package server

// OpenAI's Responses API: POST /v1/responses and
// POST /v1/responses/input_tokens. A request is converted to the internal
// wire.Chat as llama.cpp converts it to a chat completion request (input
// items to messages, flat function tools to chat tools; the other fields
// are chat completion fields) and run by the chat pipeline; the answer
// becomes output items: reasoning, a message with output_text, and
// function_call items.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama/chat"
)

// respInputItem is one input item of any kind; the fields used depend on
// Type (and Role for messages).
type respInputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Summary   json.RawMessage `json:"summary"`
}

// respPart is a content part of a message item.
type respPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Refusal  *string `json:"refusal"`
	ImageURL *string `json:"image_url"` // input_image parts
}

// respBody is a Responses request body. Its own fields (below) are
// converted by respToChat or, having no chat equivalent, ignored; the
// others are chat completion fields, read as the chat endpoint reads them
// (parallel_tool_calls, stream_options, a tool_choice mode and the
// sampling fields among them). Of the fields agent clients send, these
// change nothing here and are ignored, as llama-server ignores them: store
// (nothing is stored: every request carries its whole conversation),
// include (reasoning.encrypted_content and the like: the reasoning is sent
// as text), prompt_cache_key (the prompt cache reuses any common prefix),
// client_metadata, service_tier and text.verbosity.
type respBody struct {
	oaiChatBody
	Input              json.RawMessage      `json:"input"` // a string or items
	Instructions       wire.Opt[string]     `json:"instructions"`
	PreviousResponseID wire.Opt[string]     `json:"previous_response_id"`
	Tools              wire.Opt[[]respTool] `json:"tools"`
	MaxOutputTokens    wire.Num             `json:"max_output_tokens"`
	Reasoning          json.RawMessage      `json:"reasoning"`
	// Messages is not read: a chat completion's messages are no
	// Responses field.
	Messages json.RawMessage `json:"messages"`
}

// respTool is a tool of a Responses request. A function is described flat
// ({"type": "function", "name", "description", "parameters"}); the other
// kinds agent clients send (custom tools with a grammar, namespaces of
// functions, web_search, local_shell, file_search, mcp...) have no chat
// completion equivalent and are left out, as llama-server leaves them out.
type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// respReasoning is the reasoning option: effort becomes reasoning_effort;
// summary (auto, concise, detailed) asks for summaries of the reasoning,
// which is sent whole instead.
type respReasoning struct {
	Effort          string `json:"effort"`
	Summary         string `json:"summary"`
	GenerateSummary string `json:"generate_summary"`
}

// respToChat converts a Responses request body to the internal chat
// request, as llama.cpp's server_chat_convert_responses_to_chatcmpl
// converts it to a chat completion: input items become messages, flat
// function tools chat tools, max_output_tokens llama.cpp's max_tokens and
// reasoning.effort reasoning_effort. The body's chat completion fields are
// left to oaiChat, once the instance is known.
func (b *respBody) respToChat(marker string) (*wire.Chat, error) {
	if len(b.Input) == 0 {
		return nil, badRequest(`"input" is required`)
	}
	var prev string
	if err := b.PreviousResponseID.Read(&prev, "a string"); err != nil {
		return nil, err
	}
	if prev != "" {
		return nil, badRequest(`"previous_response_id" is not supported: send the previous output items as input`)
	}
	req := &wire.Chat{}
	if b.Instructions.Set {
		var ins string
		if err := b.Instructions.Read(&ins, "a string"); err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleSystem, Content: ins})
	}
	switch jsonKind(b.Input) {
	case 's':
		var s string
		_ = json.Unmarshal(b.Input, &s)
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleUser, Content: s})
	case 'a':
		var items []respInputItem
		if json.Unmarshal(b.Input, &items) != nil {
			return nil, badRequest(`"input" must be a string or an array of input items`)
		}
		for i, it := range items {
			if err := respItemToChat(req, i, it, marker); err != nil {
				return nil, err
			}
		}
	default:
		return nil, badRequest(`"input" must be a string or an array of input items`)
	}
	var tools []respTool
	if err := b.Tools.Read(&tools, "an array of function tools"); err != nil {
		return nil, err
	}
	for _, t := range tools {
		if t.Type != "function" {
			continue // other tool kinds have no chat equivalent
		}
		i := len(req.Tools)
		if t.Name == "" {
			return nil, badRequest(`tools[%d] must be {"type": "function", "function": {"name": ...}}`, i)
		}
		if len(t.Parameters) > 0 && jsonKind(t.Parameters) != 'o' {
			return nil, badRequest("tools[%d].function.parameters must be a JSON Schema object", i)
		}
		req.Tools = append(req.Tools, chat.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	if jsonKind(b.ToolChoice) == 'o' {
		// Responses names a forced function flat: {"type":"function","name":...}.
		const want = `"tool_choice" must be "auto", "none", "required" or {"type": "function", "name": ...}`
		var tc struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(b.ToolChoice, &tc) != nil || tc.Type != "function" || tc.Name == "" {
			return nil, badRequest(want)
		}
		req.ToolChoice = chat.ToolChoice{Mode: "function", Function: tc.Name}
		b.ToolChoice = nil
	}
	if b.MaxOutputTokens.Set {
		b.MaxOutputTokens.SetName("max_tokens")
		n, err := b.MaxOutputTokens.Integer()
		if err != nil {
			return nil, err
		}
		b.Params.SetInt("max_tokens", n)
	}
	if jsonKind(b.Reasoning) == 'o' {
		var r respReasoning
		if json.Unmarshal(b.Reasoning, &r) != nil {
			return nil, badRequest(`"reasoning" must be an object like {"effort": "low"}`)
		}
		if r.Effort != "" {
			req.ReasoningEffort = r.Effort
			b.ReasoningEffort = wire.Opt[string]{}
		}
	}
	return req, nil
}

// joinParts is the text of parts joined with newlines, as templates that
// read a string see them.
func joinParts(parts []chat.ContentPart) string {
	var sb strings.Builder
	for i, p := range parts {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// respItemToChat appends the chat form of one input item to req's
// messages. Assistant output (messages, function calls, reasoning)
// following an assistant message is merged into it.
func respItemToChat(req *wire.Chat, i int, it respInputItem, marker string) error {
	var last *chat.Message
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == chat.RoleAssistant {
		last = &req.Messages[n-1]
	}
	// text returns a content as a string, or as the text parts of an
	// array (which templates see joined with newlines, as llama-server
	// passes them).
	text := func(allowed ...string) (string, []chat.ContentPart, error) {
		if jsonKind(it.Content) == 's' {
			var s string
			_ = json.Unmarshal(it.Content, &s)
			return s, nil, nil
		}
		if jsonKind(it.Content) != 'a' {
			return "", nil, badRequest("input[%d].content must be a string or an array of parts", i)
		}
		var parts []respPart
		if err := json.Unmarshal(it.Content, &parts); err != nil {
			return "", nil, badRequest("input[%d].content: %v", i, err)
		}
		var out []chat.ContentPart
		for j, p := range parts {
			ok := false
			for _, a := range allowed {
				ok = ok || p.Type == a
			}
			switch {
			case !ok:
				return "", nil, badRequest("input[%d].content[%d]: unsupported part type %q", i, j, p.Type)
			case p.Type == "refusal" && p.Refusal != nil:
				out = append(out, chat.ContentPart{Type: "text", Text: *p.Refusal})
			case p.Text == nil:
				return "", nil, badRequest("input[%d].content[%d] needs text", i, j)
			default:
				out = append(out, chat.ContentPart{Type: "text", Text: *p.Text})
			}
		}
		return joinParts(out), out, nil
	}
	add := func(m chat.Message) error {
		req.Messages = append(req.Messages, m)
		return nil
	}
	switch {
	case it.Type == "function_call":
		if it.CallID == "" || it.Name == "" || it.Arguments == nil {
			return badRequest("input[%d]: a function_call needs call_id, name and arguments", i)
		}
		call := chat.ToolCall{ID: it.CallID, Name: it.Name, Arguments: *it.Arguments}
		if last != nil {
			last.ToolCalls = append(last.ToolCalls, call)
			return nil
		}
		return add(chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call}})
	case it.Type == "function_call_output":
		if it.CallID == "" {
			return badRequest("input[%d]: a function_call_output needs call_id", i)
		}
		m := chat.Message{Role: chat.RoleTool, ToolCallID: it.CallID}
		switch jsonKind(it.Output) {
		case 's':
			_ = json.Unmarshal(it.Output, &m.Content)
		case 'a':
			var parts []respPart
			if err := json.Unmarshal(it.Output, &parts); err != nil {
				return badRequest("input[%d].output: %v", i, err)
			}
			for _, p := range parts {
				if p.Type != "input_text" || p.Text == nil {
					return badRequest("input[%d].output: parts must be input_text", i)
				}
				m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: *p.Text})
			}
			m.Content = joinParts(m.Parts)
		default:
			return badRequest("input[%d]: a function_call_output needs output", i)
		}
		return add(m)
	case it.Type == "reasoning":
		var parts []respPart
		_ = json.Unmarshal(it.Content, &parts)
		r := ""
		for _, p := range parts {
			if p.Text != nil {
				r += *p.Text
			}
		}
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
			last.Content = joinParts(last.Parts)
			return nil
		}
		return add(chat.Message{Role: chat.RoleAssistant, Content: s, Parts: parts})
	case (it.Role == "user" || it.Role == "system" || it.Role == "developer") && (it.Type == "message" || it.Type == ""):
		if parts, err := respMediaParts(i, it.Content); err != nil || parts != nil {
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
	return badRequest("input[%d]: cannot determine the type of the item (type %q, role %q)", i, it.Type, it.Role)
}

// Wire types of a response.
type (
	respObject struct {
		ID          string     `json:"id"`
		Object      string     `json:"object"`
		CreatedAt   int64      `json:"created_at"`
		CompletedAt *int64     `json:"completed_at,omitempty"`
		Status      string     `json:"status"`
		Model       string     `json:"model"`
		Output      []respItem `json:"output"`
		Usage       *respUsage `json:"usage,omitempty"`
	}
	// respItem is an output item: reasoning, message or function_call.
	respItem struct {
		ID        string        `json:"id"`
		Type      string        `json:"type"`
		Status    string        `json:"status"`
		Role      string        `json:"role,omitempty"`
		Content   []respOutPart `json:"content,omitempty"`
		Summary   []respOutPart `json:"summary,omitempty"`
		CallID    string        `json:"call_id,omitempty"`
		Name      string        `json:"name,omitempty"`
		Arguments *string       `json:"arguments,omitempty"`
	}
	// respEvent is an event of a streamed response; the fields sent
	// depend on Type.
	respEvent struct {
		Type           string        `json:"type"`
		SequenceNumber int           `json:"sequence_number"`
		Response       *respObject   `json:"response,omitempty"`
		PromptProgress *progressJSON `json:"prompt_progress,omitempty"`
		ItemID         string        `json:"item_id,omitempty"`
		OutputIndex    *int          `json:"output_index,omitempty"`
		ContentIndex   *int          `json:"content_index,omitempty"`
		Item           *respItem     `json:"item,omitempty"`
		Part           *respOutPart  `json:"part,omitempty"`
		Text           *string       `json:"text,omitempty"`
		Delta          *string       `json:"delta,omitempty"`
		Arguments      *string       `json:"arguments,omitempty"`
		Logprobs       *[]any        `json:"logprobs,omitempty"`
		Timings        *timingsJSON  `json:"timings,omitempty"`
	}
	respOutPart struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
		Logprobs    []any  `json:"logprobs"`
	}
	respUsage struct {
		InputTokens         int                  `json:"input_tokens"`
		OutputTokens        int                  `json:"output_tokens"`
		TotalTokens         int                  `json:"total_tokens"`
		InputTokensDetails  respInputDetails     `json:"input_tokens_details"`
		OutputTokensDetails respOutputTokDetails `json:"output_tokens_details"`
	}
	respInputDetails struct {
		CachedTokens int `json:"cached_tokens"`
	}
	respOutputTokDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	}
)

func textPart(s string) respOutPart {
	return respOutPart{Type: "output_text", Text: s, Annotations: []any{}, Logprobs: []any{}}
}

func respUsageOf(ev engine.Event) *respUsage {
	return &respUsage{InputTokens: ev.PromptTokens, OutputTokens: ev.Generated, TotalTokens: ev.PromptTokens + ev.Generated,
		InputTokensDetails: respInputDetails{CachedTokens: ev.CachedTokens}}
}

// respItems converts a parsed message to output items.
func respItems(msg chat.Message) []respItem {
	items := []respItem{}
	if msg.ReasoningContent != "" {
		items = append(items, respItem{ID: wire.NewID("rs_"), Type: "reasoning", Status: "completed", Summary: []respOutPart{},
			Content: []respOutPart{{Type: "reasoning_text", Text: msg.ReasoningContent}}})
	}
	if msg.Content != "" {
		items = append(items, respItem{ID: wire.NewID("msg_"), Type: "message", Status: "completed", Role: "assistant",
			Content: []respOutPart{textPart(msg.Content)}})
	}
	for _, tc := range msg.ToolCalls {
		args := tc.Arguments
		items = append(items, respItem{ID: wire.NewID("fc_"), Type: "function_call", Status: "completed", CallID: wire.IDOrNew(tc.ID, "call_"), Name: tc.Name, Arguments: &args})
	}
	return items
}

// respPrepare reads a Responses body as a chat request. Unless it fails,
// release must be called.
func respPrepare(s *Server, r *http.Request) (*genRequest, *chatPlan, chatOptions, *instance, func(), error) {
	var b respBody
	if err := decodeBody(r, &b); err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	model, err := b.model()
	if err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	req, err := b.respToChat(s.mediaMarker)
	if err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	inst, release, err := s.instanceFor(r, model)
	if err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	g, plan, co, err := func() (*genRequest, *chatPlan, chatOptions, error) {
		if err := b.oaiChat(inst, req); err != nil {
			return nil, nil, chatOptions{}, err
		}
		return inst.startChat(req)
	}()
	if err != nil {
		release()
		return nil, nil, chatOptions{}, nil, nil, err
	}
	return g, plan, co, inst, release, nil
}

func handleResponsesInputTokens(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		g, _, _, _, release, err := respPrepare(s, r)
		if err != nil {
			return err
		}
		defer release()
		writeJSON(w, http.StatusOK, inputTokens{Object: "response.input_tokens", InputTokens: len(g.task.Prompt)})
		return nil
	}
}

func handleResponses(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		g, plan, co, inst, release, err := respPrepare(s, r)
		if err != nil {
			return err
		}
		defer release()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		events, err := s.runTask(ctx, inst, nil, g.task)
		if err != nil {
			return err
		}
		base := respObject{ID: wire.NewID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Model: co.Model, Output: []respItem{}}
		if g.opt.Stream {
			streamResponses(ctx, w, plan, base, events, g.opt.TimingsPerToken)
			return nil
		}
		res, msg, err := collectChat(ctx, inst, plan, events)
		if err != nil {
			return err
		}
		out := base
		now := time.Now().Unix()
		out.CompletedAt, out.Status = &now, "completed"
		out.Output = respItems(msg)
		out.Usage = respUsageOf(res.Final)
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// streamResponses sends the Responses event stream: response.created and
// response.in_progress, then each output item in turn (added, its deltas,
// done), then response.completed with the whole response.
func streamResponses(ctx context.Context, w http.ResponseWriter, plan *chatPlan, base respObject, events eventStream, timingsPerToken bool) {
	sse, _ := sseStart(ctx, w)
	var tokenTimings *timingsJSON // timings_per_token: set on a token's text deltas
	send := func(typ string, ev respEvent) bool {
		if tokenTimings != nil && (typ == "response.output_text.delta" || typ == "response.reasoning_text.delta" || typ == "response.function_call_arguments.delta") {
			ev.Timings = tokenTimings
		}
		ev.Type, ev.SequenceNumber = typ, sse.seq()
		return sse.send(typ, ev) == nil
	}
	zero := 0
	noLogprobs := &[]any{}
	inProgress := base
	inProgress.Status = "in_progress"
	if !send("response.created", respEvent{Response: &inProgress}) ||
		!send("response.in_progress", respEvent{Response: &inProgress}) {
		return
	}
	var done []respItem
	var cur *respItem // the open item
	var buf string    // its text or arguments so far
	curTool := -1
	closeItem := func() bool {
		if cur == nil {
			return true
		}
		idx := len(done)
		it := *cur
		it.Status = "completed"
		ok := true
		switch it.Type {
		case "message":
			part := textPart(buf)
			it.Content = []respOutPart{part}
			ok = send("response.output_text.done", respEvent{ItemID: it.ID, OutputIndex: &idx, ContentIndex: &zero, Text: &buf, Logprobs: noLogprobs}) &&
				send("response.content_part.done", respEvent{ItemID: it.ID, OutputIndex: &idx, ContentIndex: &zero, Part: &part})
		case "reasoning":
			it.Content = []respOutPart{{Type: "reasoning_text", Text: buf}}
			ok = send("response.reasoning_text.done", respEvent{ItemID: it.ID, OutputIndex: &idx, ContentIndex: &zero, Text: &buf})
		case "function_call":
			args := buf
			it.Arguments = &args
			ok = send("response.function_call_arguments.done", respEvent{ItemID: it.ID, OutputIndex: &idx, Arguments: &buf})
		}
		ok = ok && send("response.output_item.done", respEvent{OutputIndex: &idx, Item: &it})
		done = append(done, it)
		cur, buf = nil, ""
		return ok
	}
	openItem := func(it respItem) bool {
		if !closeItem() {
			return false
		}
		it.Status = "in_progress"
		cur = &it
		idx := len(done)
		if !send("response.output_item.added", respEvent{OutputIndex: &idx, Item: &it}) {
			return false
		}
		if it.Type == "message" {
			return send("response.content_part.added", respEvent{ItemID: it.ID, OutputIndex: &idx, ContentIndex: &zero, Part: new(textPart(""))})
		}
		return true
	}
	emit := func(d chat.Delta) bool {
		if d.ReasoningContent != "" {
			if cur == nil || cur.Type != "reasoning" {
				if !openItem(respItem{ID: wire.NewID("rs_"), Type: "reasoning", Summary: []respOutPart{}}) {
					return false
				}
			}
			buf += d.ReasoningContent
			if !send("response.reasoning_text.delta", respEvent{ItemID: cur.ID, OutputIndex: new(len(done)), ContentIndex: &zero, Delta: &d.ReasoningContent}) {
				return false
			}
		}
		if d.Content != "" {
			if cur == nil || cur.Type != "message" {
				if !openItem(respItem{ID: wire.NewID("msg_"), Type: "message", Role: "assistant", Content: []respOutPart{}}) {
					return false
				}
			}
			buf += d.Content
			if !send("response.output_text.delta", respEvent{ItemID: cur.ID, OutputIndex: new(len(done)), ContentIndex: &zero, Delta: &d.Content, Logprobs: noLogprobs}) {
				return false
			}
		}
		for _, tc := range d.ToolCalls {
			if cur == nil || cur.Type != "function_call" || curTool != tc.Index {
				empty := ""
				if !openItem(respItem{ID: wire.NewID("fc_"), Type: "function_call", CallID: wire.IDOrNew(tc.ID, "call_"), Name: tc.Name, Arguments: &empty}) {
					return false
				}
				curTool = tc.Index
			}
			if tc.ArgumentsDelta != "" {
				buf += tc.ArgumentsDelta
				if !send("response.function_call_arguments.delta", respEvent{ItemID: cur.ID, OutputIndex: new(len(done)), Delta: &tc.ArgumentsDelta}) {
					return false
				}
			}
		}
		return true
	}
	parser := plan.NewStream()
	for events.Next() {
		ev := events.Event()
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Progress != nil {
			// llama-server's return_progress: in_progress events with
			// prompt_progress.
			if !send("response.in_progress", respEvent{Response: &inProgress, PromptProgress: wireProgress(ev.Progress)}) {
				return
			}
			continue
		}
		if ev.Done {
			tokenTimings = nil
			d := parser.Finish(ev.Stop == engine.StopLimit)
			if !emit(d) || !closeItem() {
				return
			}
			final := base
			now := time.Now().Unix()
			final.CompletedAt, final.Status = &now, "completed"
			final.Output = done
			final.Usage = respUsageOf(ev)
			send("response.completed", respEvent{Response: &final, Timings: wireTimings(ev.Timings)})
			return
		}
		if ev.Text == "" {
			continue
		}
		if timingsPerToken {
			tokenTimings = wireTimings(ev.Timings)
		}
		if d := parser.Push(ev.Text); !d.Empty() && !emit(d) {
			return
		}
	}
}
