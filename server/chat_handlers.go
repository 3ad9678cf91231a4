package server

// OpenAI-compatible chat completions, POST /v1/chat/completions (and
// /chat/completions): messages rendered with the model's chat template,
// tools constrained by a grammar of the template's tool-call format, the
// output parsed back into content, reasoning and tool calls, whole or as
// streamed deltas.
//
// Every chat-shaped endpoint reads the same way, top to bottom: its body
// is decoded once into the dialect's typed body (oaiChatBody, respBody,
// anthropic.Request, a transcription form), one function of the dialect
// translates that into a wire.Chat (the conversation in package chat's
// types plus options: oaiChat, responses.Request.ToChat then oaiChat, anthropic.ToChat,
// transcriptionChat), and startChat turns it into an engine.Request and
// the plan to read its output with.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// chatPlan is how to run a chat and read its output: package chat's plan
// and the thinking budget.
type chatPlan struct {
	*chat.Plan
	// budget makes the thinking budget's sampler of each task (nil: none).
	budget *budgetSpec
}

// samplers returns new samplers of the plan for one task.
func (p *chatPlan) samplers() []llama.Sampler {
	if p.budget == nil {
		return nil
	}
	if s := p.budget.sampler(); s != nil {
		return []llama.Sampler{llama.Custom(s)}
	}
	return nil
}

// chatTemplates returns the instance's chat templates for package chat,
// made once (the special tokens' texts are looked up then); callers only
// read them.
func (inst *instance) chatTemplates() *chat.Templates {
	inst.templatesOnce.Do(func() {
		t := chat.ForModelWith(inst.Model, inst.Template)
		if inst.ToolTemplate != nil {
			t.ToolUse = inst.ToolTemplate
		}
		t.Thinking = inst.Opts.Reasoning
		inst.templates = t
	})
	return inst.templates
}

// prepareChat renders req with chat.Templates.Prepare and sets t's prompt
// and grammar for it, within the server's limits. t holds the generation
// parameters already parsed (its Params.Grammar, if any, came from the
// request's grammar or json_schema).
func (inst *instance) prepareChat(req *wire.Chat, t *engine.Request) (*chatPlan, error) {
	if err := inst.checkMessagesText(req.Messages); err != nil {
		return nil, err
	}
	useTools := len(req.Tools) > 0 && req.ToolChoice.Mode != "none"
	if useTools {
		if err := checkToolsSize(req.Tools); err != nil {
			return nil, err
		}
	} else if len(req.Schema) > 0 {
		if err := checkSchemaSize(req.Schema); err != nil {
			return nil, err
		}
	}
	tmpls := inst.chatTemplates()
	cp, err := tmpls.Prepare(chat.Request{
		Messages:           req.Messages,
		AllowEmpty:         req.AllowEmpty,
		Tools:              req.Tools,
		ToolChoice:         req.ToolChoice,
		FreeTextToolChoice: true, // as llama-server: a choice the template cannot honour is answered in free text
		ParallelToolCalls:  req.Parallel,
		NoGenerationPrompt: !req.AddGenerationPrompt,
		Continue:           req.Continue,
		Extra:              req.Extra,
		Reasoning:          cmp.Or(req.Reasoning, inst.Opts.ReasoningFormat),
		Schema:             req.Schema,
		PlainSchema:        !inst.Opts.Jinja,
		Grammar:            t.Params.Grammar,
	})
	if err != nil {
		return nil, chatError(err)
	}
	if cp.Grammar != "" {
		if err := checkGrammar(inst.Model, cp.Grammar); err != nil {
			if cp.ToolGrammar {
				return nil, badRequest("tool grammar: %v", err) // built from the client's tools
			}
			return nil, err
		}
		engine.SetChatGrammar(inst.Model, &t.Params, cp)
	}
	toks, err := inst.promptTokens(cp.Prompt, req.Media, t)
	if err != nil {
		return nil, err
	}
	t.Prompt = toks
	plan := &chatPlan{Plan: cp}
	if plan.budget, err = inst.chatBudget(req, cp); err != nil {
		return nil, err
	}
	t.Samplers = plan.samplers()
	return plan, nil
}

// chatError converts an error of package chat to the server's.
func chatError(err error) error {
	var re *chat.RequestError
	if errors.As(err, &re) {
		return badRequest("%s", re.Msg)
	}
	return err
}

// chatBudget returns the thinking budget of a chat (nil: none): the
// request's reasoning_budget_tokens or thinking_budget_tokens (-1 or
// absent: the server's ReasoningBudget) and reasoning_budget_message,
// with the thinking tags of the template (chat.Plan.ThinkingTags).
func (inst *instance) chatBudget(req *wire.Chat, plan *chat.Plan) (*budgetSpec, error) {
	o := &req.Opts
	budget, msg := -1, inst.Opts.ReasoningBudgetMessage
	if inst.Opts.ReasoningBudget > 0 {
		budget = inst.Opts.ReasoningBudget
	}
	for _, b := range []*wire.Num{&o.ReasoningBudgetTokens, &o.ThinkingBudgetTokens} {
		if b.Set {
			n := -1
			if err := b.Int(&n, -1, math.MaxInt32); err != nil {
				return nil, err
			}
			if n >= 0 {
				budget = n
			}
			break
		}
	}
	if err := o.ReasoningBudgetMessage.Read(&msg, "a string"); err != nil {
		return nil, err
	}
	if budget < 0 {
		return nil, nil
	}
	start, end, ok, err := plan.ThinkingTags()
	if err != nil {
		return nil, chatError(err)
	}
	if !ok {
		return nil, nil
	}
	return inst.budgetFor(budget, msg, plan.Prompt, start, end), nil
}

// wireMessage is an OpenAI chat message as received.
type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
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
	if jsonKind(raw) != 'a' {
		return nil, badRequest(`"messages" must be an array`)
	}
	// The messages are read one by one from raw, so that a request's
	// memory holds its text about once besides its body (a copy of every
	// message, then of every content, held at once, made a request of
	// many messages peak at 15 times its size); counting them first
	// sizes msgs once.
	var count []struct{}
	if err := json.Unmarshal(raw, &count); err != nil {
		return nil, badRequest(`"messages": %v`, err)
	}
	if len(count) == 0 && !allowEmpty {
		return nil, badRequest(`"messages" must not be empty`)
	}
	msgs := make([]chat.Message, 0, len(count))
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // [
		return nil, badRequest(`"messages": %v`, err)
	}
	for i := 0; dec.More(); i++ {
		var it json.RawMessage
		if err := dec.Decode(&it); err != nil {
			return nil, badRequest(`"messages": %v`, err)
		}
		var wm wireMessage
		if jsonKind(it) != 'o' {
			return nil, badRequest("messages[%d] must be an object", i)
		}
		if err := json.Unmarshal(it, &wm); err != nil {
			return nil, badRequest("messages[%d]: %v", i, err)
		}
		switch wm.Role {
		case chat.RoleSystem, chat.RoleDeveloper, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		case "":
			return nil, badRequest("messages[%d] has no role", i)
		default:
			return nil, badRequest("messages[%d] has an unknown role %q (want system, developer, user, assistant or tool)", i, wm.Role)
		}
		m := chat.Message{Role: wm.Role, Name: wm.Name, ToolCallID: wm.ToolCallID, ReasoningContent: wm.ReasoningContent}
		hasContent := len(wm.Content) > 0
		switch jsonKind(wm.Content) {
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
				return nil, badRequest("messages[%d].content: parts must be objects with type and text", i)
			}
			for j, p := range parts {
				if p.Type == "image_url" || p.Type == "input_audio" {
					in, err := wire.MediaPart(p.Type, p.ImageURL, p.InputAudio)
					if err != nil {
						return nil, badRequest("messages[%d].content[%d]: %v", i, j, err)
					}
					*media = append(*media, in)
					m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: marker})
					m.Content += marker
					continue
				}
				switch p.Type {
				case "text":
				case "input_video":
					return nil, badRequest("messages[%d].content[%d]: video input is not supported", i, j)
				default:
					return nil, badRequest("messages[%d].content[%d]: unsupported content type %q (only text)", i, j, p.Type)
				}
				if p.Text == nil {
					return nil, badRequest("messages[%d].content[%d]: text part without text", i, j)
				}
				m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: *p.Text})
				m.Content += *p.Text
			}
		default:
			return nil, badRequest("messages[%d].content must be a string or an array of parts", i)
		}
		for j, tc := range wm.ToolCalls {
			if tc.Function.Name == "" {
				return nil, badRequest("messages[%d].tool_calls[%d] has no function name", i, j)
			}
			args := string(tc.Function.Arguments)
			if jsonKind(tc.Function.Arguments) == 's' {
				_ = json.Unmarshal(tc.Function.Arguments, &args)
			} else if args == "" || args == "null" {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
		if wm.Role == chat.RoleAssistant {
			if !hasContent && len(m.ToolCalls) == 0 {
				return nil, badRequest("messages[%d]: an assistant message needs content or tool_calls", i)
			}
		} else if !hasContent {
			return nil, badRequest("messages[%d]: a %s message needs content", i, wm.Role)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// oaiChatBody is an OpenAI chat completion body (also read by
// apply-template, input_tokens and, embedded, the Responses body).
type oaiChatBody struct {
	modelField
	wire.Gen
	wire.ChatFields
	oaiUnsupported
	Messages             json.RawMessage          `json:"messages"`
	N                    wire.Num                 `json:"n"`
	Tools                wire.Opt[[]wireTool]     `json:"tools"`
	ToolChoice           json.RawMessage          `json:"tool_choice"` // a mode or a function
	ParallelToolCalls    wire.Opt[bool]           `json:"parallel_tool_calls"`
	ResponseFormat       wire.Opt[responseFormat] `json:"response_format"`
	AddGenerationPrompt  wire.Opt[bool]           `json:"add_generation_prompt"`
	ContinueFinalMessage json.RawMessage          `json:"continue_final_message"`
	ReasoningFormat      wire.Opt[string]         `json:"reasoning_format"`
	ChatTemplateKwargs   wire.Opt[map[string]any] `json:"chat_template_kwargs"`
	ReasoningEffort      wire.Opt[string]         `json:"reasoning_effort"`
}

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"`
	JSONSchema *struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// oaiChat is the OpenAI chat dialect: it translates b into req, the
// internal chat request, for startChat. What req already holds (set by
// another dialect's converter, the Responses one) and b does not give
// stays.
func (b *oaiChatBody) oaiChat(inst *instance, req *wire.Chat) error {
	if len(b.Messages) == 0 && req.Messages == nil {
		return badRequest(`"messages" is required`)
	}
	if err := b.oaiUnsupported.check(); err != nil {
		return err
	}
	req.Gen, req.Opts = b.Gen, b.ChatFields
	req.N, req.AddGenerationPrompt = 1, true
	if err := b.N.Int(&req.N, 1, int64(max(1, inst.Engine.Slots()))); err != nil {
		return err
	}
	if len(b.Messages) > 0 {
		msgs, media, err := toChatMessages(b.Messages, req.AllowEmpty, inst.Server.mediaMarker)
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
func (b *oaiChatBody) tools(req *wire.Chat) error {
	var tools []wireTool
	if err := b.Tools.Read(&tools, "an array of function tools"); err != nil {
		return err
	}
	for i, t := range tools {
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return badRequest(`tools[%d] must be {"type": "function", "function": {"name": ...}}`, i)
		}
		params := t.Function.Parameters
		if len(params) > 0 && jsonKind(params) != 'o' {
			return badRequest("tools[%d].function.parameters must be a JSON Schema object", i)
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
		return badRequest(`"tool_choice" %q needs "tools"`, req.ToolChoice.Mode)
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

// toolChoice reads OpenAI's tool_choice: a mode or {"type": "function",
// "function": {"name": ...}}.
func toolChoice(raw json.RawMessage, tc *chat.ToolChoice) error {
	switch jsonKind(raw) {
	case 0:
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto", "none", "required":
			tc.Mode = s
		default:
			return badRequest(`"tool_choice" must be "auto", "none", "required" or a function`)
		}
	case 'o':
		var fn struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &fn) != nil {
			return badRequest(`"tool_choice" must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}`)
		}
		if fn.Function.Name == "" {
			return badRequest(`"tool_choice" must name a function`)
		}
		*tc = chat.ToolChoice{Mode: "function", Function: fn.Function.Name}
	default:
		return badRequest(`"tool_choice" must be a string or an object`)
	}
	return nil
}

// responseFormat reads response_format into req's JSON Schema.
func (b *oaiChatBody) responseFormat(req *wire.Chat) error {
	var rf responseFormat
	if err := b.ResponseFormat.Read(&rf, `an object like {"type": "json_schema", "json_schema": {"schema": ...}}`); err != nil || !b.ResponseFormat.Set {
		return err
	}
	switch rf.Type {
	case "", "text":
	case "json_object":
		req.Schema = rf.Schema
		if len(req.Schema) == 0 || isNull(req.Schema) {
			req.Schema = json.RawMessage(`{}`)
		}
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || isNull(rf.JSONSchema.Schema) {
			req.Schema = json.RawMessage(`{}`)
		} else {
			req.Schema = rf.JSONSchema.Schema
		}
	default:
		return badRequest(`response_format type must be "text", "json_object" or "json_schema", got %q`, rf.Type)
	}
	if len(req.Schema) > 0 && jsonKind(req.Schema) != 'o' && jsonKind(req.Schema) != 'b' {
		return badRequest("response_format schema must be a JSON Schema object")
	}
	return nil
}

// chatOptions are the OpenAI chat settings beyond generation.
type chatOptions struct {
	Model string
	// N is the number of choices ("n", 1 to the number of slots).
	N            int
	IncludeUsage bool
	Logprobs     bool
}

// oaiChatRequest is the OpenAI chat dialect from body to task: b
// translated (oaiChat) and handed to startChat. allowEmpty accepts a
// conversation without messages (the template renders none).
func (b *oaiChatBody) chatRequest(inst *instance, allowEmpty bool) (*genRequest, *chatPlan, chatOptions, error) {
	req := &wire.Chat{AllowEmpty: allowEmpty}
	if err := b.oaiChat(inst, req); err != nil {
		return nil, nil, chatOptions{N: 1}, err
	}
	return inst.startChat(req)
}

// startChat turns the internal chat request every dialect decodes to
// into a task and the plan to read its output with: the template's
// variables, the generation parameters, the OpenAI chat options, then the
// rendered prompt (prepareChat).
func (inst *instance) startChat(req *wire.Chat) (*genRequest, *chatPlan, chatOptions, error) {
	co := chatOptions{N: max(req.N, 1), Model: cmp.Or(req.Model, inst.Name)}
	if err := inst.templateVars(req); err != nil {
		return nil, nil, co, err
	}
	t, opt, err := inst.generation(&req.Gen, inst.Opts.NPredict)
	if err != nil {
		return nil, nil, co, err
	}
	if inst.Opts.Jinja && len(req.Gen.JSONSchema) > 0 && len(req.Schema) == 0 {
		req.Schema, t.Params.Grammar = req.Gen.JSONSchema, ""
	}
	if err := inst.chatOptions(req, t, &co); err != nil {
		return nil, nil, co, err
	}
	plan, err := inst.prepareChat(req, t)
	if err != nil {
		return nil, nil, co, err
	}
	opt.Settings = generationSettings(t, opt, inst)
	g := &genRequest{inst: inst, prompts: [][]llama.Token{t.Prompt}, task: t, opt: opt}
	return g, plan, co, nil
}

// templateVars sets req's template variables: the server's defaults
// (ChatTemplateKwargs) for those it does not set, and reasoning_effort.
func (inst *instance) templateVars(req *wire.Chat) error {
	req.Extra = inst.Opts.withTemplateKwargs(req.Extra)
	if v, ok := req.Extra["enable_thinking"]; ok {
		if _, isBool := v.(bool); !isBool {
			return badRequest(`invalid type for "enable_thinking" (expected boolean)`)
		}
	}
	if effort := req.ReasoningEffort; effort != "" {
		if req.Extra == nil {
			req.Extra = map[string]any{}
		}
		if effort == "none" {
			req.Extra["enable_thinking"] = false
		} else {
			req.Extra["reasoning_effort"] = effort
		}
	}
	return nil
}

// chatOptions reads req's OpenAI chat options into t and co:
// max_completion_tokens, logprobs, top_logprobs and stream_options.
func (inst *instance) chatOptions(req *wire.Chat, t *engine.Request, co *chatOptions) error {
	o := &req.Opts
	if o.MaxCompletionTokens.Set && !req.Gen.Params.Has("n_predict") {
		if err := o.MaxCompletionTokens.Int(&t.NPredict, -1, maxNPredict); err != nil {
			return err
		}
		if d := inst.Opts.NPredict; d > 0 && (t.NPredict < 0 || t.NPredict > d) {
			t.NPredict = d // the server's -n bounds this name too
		}
	}
	if err := o.Logprobs.Read(&co.Logprobs, "a boolean"); err != nil {
		return err
	}
	switch {
	case co.Logprobs:
		t.Params.NProbs = 20
		if err := o.TopLogprobs.Int(&t.Params.NProbs, 0, 20); err != nil {
			return err
		}
	case o.TopLogprobs.Set:
		return badRequest(`"top_logprobs" requires "logprobs": true`)
	case t.Params.NProbs > 0:
		co.Logprobs = true // llama.cpp's own n_probs shows them too, as llama-server
	}
	var so wire.StreamOptions
	if err := o.StreamOptions.Read(&so, `an object like {"include_usage": true}`); err != nil {
		return err
	}
	co.IncludeUsage = so.IncludeUsage
	return nil
}

// Wire types of chat completion responses.
type (
	oaiChatCompletion struct {
		ID                string          `json:"id"`
		Object            string          `json:"object"`
		Created           int64           `json:"created"`
		Model             string          `json:"model"`
		SystemFingerprint string          `json:"system_fingerprint"`
		Choices           []oaiChatChoice `json:"choices"`
		Usage             *oaiUsage       `json:"usage,omitempty"`
		Timings           *wire.Timings   `json:"timings,omitempty"`
		// Verbose is llama-server's __verbose debug object (the native
		// /completion result), with "verbose" or --verbose.
		Verbose any `json:"__verbose,omitempty"`
		// engine.PromptProgress is set on the progress chunks of return_progress.
		PromptProgress *wire.Progress `json:"prompt_progress,omitempty"`
	}
	oaiChatChoice struct {
		Index        int             `json:"index"`
		Message      *oaiChatMessage `json:"message,omitempty"`
		Delta        any             `json:"delta,omitempty"` // *oaiChatMessage or oaiFirstDelta
		Logprobs     *oaiLogprobs    `json:"logprobs,omitempty"`
		FinishReason *string         `json:"finish_reason"`
	}
	// oaiFirstDelta is the first streamed delta, as llama-server (and
	// OpenAI) send it: the role, with content null.
	oaiFirstDelta struct {
		Role    string  `json:"role"`
		Content *string `json:"content"`
	}
	// oaiChatMessage is an assistant message or a streamed delta of one.
	oaiChatMessage struct {
		Role             string        `json:"role,omitempty"`
		Content          *string       `json:"content,omitempty"`
		ReasoningContent string        `json:"reasoning_content,omitempty"`
		ToolCalls        []oaiToolCall `json:"tool_calls,omitempty"`
	}
	oaiToolCall struct {
		Index    *int            `json:"index,omitempty"`
		ID       string          `json:"id,omitempty"`
		Type     string          `json:"type,omitempty"`
		Function oaiToolFunction `json:"function"`
	}
	oaiToolFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
)

// collectChat waits for the result of a chat (of one choice) that is not
// streamed and reads its message with chatMessage.
func collectChat(ctx context.Context, inst *instance, plan *chatPlan, st eventStream) (*completionResult, chat.Message, error) {
	res, err := collect(ctx, inst.Model, st, 1)
	if err != nil {
		return nil, chat.Message{}, err
	}
	return res[0], chatMessage(plan, res[0]), nil
}

// chatMessage reads the message of a chat's result with parseChatOutput.
func chatMessage(plan *chatPlan, res *completionResult) chat.Message {
	return plan.ParseOutput(res.Text)
}

// nullableContent is OpenAI's content: "" becomes null when the message
// carries tool calls.
func nullableContent(s string, toolCalls bool) *string {
	if s == "" && toolCalls {
		return nil
	}
	return &s
}

func handleChatCompletion(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var b oaiChatBody
		inst, release, err := s.requestInstance(r, &b)
		if err != nil {
			return err
		}
		defer release()
		arrived := inst.Engine.Expect()
		defer arrived()
		g, plan, co, err := b.chatRequest(inst, false)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		tasks := make([]*engine.Request, co.N)
		for i := range tasks {
			t := *g.task
			if i > 0 && plan.budget != nil {
				t.Samplers = plan.samplers() // a sampler per task
			}
			tasks[i] = &t
		}
		st, err := s.startTasks(ctx, inst, arrived, tasks)
		if err != nil {
			return err
		}
		base := oaiChatCompletion{
			ID: wire.NewID("chatcmpl-"), Created: time.Now().Unix(), Model: co.Model,
			SystemFingerprint: systemFingerprint,
		}
		reasoningControl := b.ReasoningControl.V && !b.ReasoningControl.Bad
		defer s.controls.track(base.ID, reasoningControl)()
		if g.opt.Stream {
			streamChat(ctx, w, g, plan, co, st, base)
			return nil
		}
		results, err := collect(ctx, inst.Model, st, co.N)
		if err != nil {
			return err
		}
		resp := base
		resp.Object = "chat.completion"
		var u oaiUsage
		for i, res := range results {
			msg := chatMessage(plan, res)
			out := &oaiChatMessage{Role: chat.RoleAssistant, ReasoningContent: msg.ReasoningContent}
			for _, tc := range msg.ToolCalls {
				out.ToolCalls = append(out.ToolCalls, oaiToolCall{ID: wire.IDOrNew(tc.ID, "call_"), Type: "function", Function: oaiToolFunction{Name: tc.Name, Arguments: tc.Arguments}})
			}
			out.Content = nullableContent(msg.Content, len(out.ToolCalls) > 0)
			fr := finishReason(res.Final.Stop, len(out.ToolCalls) > 0)
			choice := oaiChatChoice{Index: i, Message: out, FinishReason: &fr}
			if co.Logprobs {
				choice.Logprobs = &oaiLogprobs{Content: wire.Probs(inst.Model, res.Steps, g.opt.PostSamplingProbs)}
			}
			resp.Choices = append(resp.Choices, choice)
			if i == 0 && g.opt.Verbose {
				resp.Verbose = nativeFinal(g, 0, res, false)
			}
			u.add(res.Final)
			resp.Timings = wire.NewTimings(res.Final.Timings)
		}
		resp.Usage = &u
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
}

// streamChat sends chat.completion.chunk events for each choice (one per
// task of events, "index" telling them apart): the assistant role, the
// parsed deltas, a chunk with the finish reason, then, once every choice is
// done, optionally the usage (with empty choices), then [DONE].
func streamChat(ctx context.Context, w http.ResponseWriter, g *genRequest, plan *chatPlan, co chatOptions, events eventStream, base oaiChatCompletion) {
	sse, _ := sseStart(ctx, w)
	base.Object = "chat.completion.chunk"
	type choiceState struct {
		parser   *chat.Stream
		ids      map[int]string
		pending  []wire.Step
		anyCalls bool
		done     bool
	}
	states := make([]*choiceState, co.N)
	for i := range states {
		states[i] = &choiceState{ids: map[int]string{},
			parser: plan.NewStream()}
	}
	send := func(c oaiChatChoice, tm *wire.Timings) bool {
		chunk := base
		chunk.Choices = []oaiChatChoice{c}
		chunk.Timings = tm
		return sse.data(chunk) == nil
	}
	// The first chunk gives the role; with return_progress every progress
	// report is such a chunk carrying prompt_progress, as in llama-server.
	if !g.task.ReturnProgress {
		for i := range co.N {
			if !send(oaiChatChoice{Index: i, Delta: oaiFirstDelta{Role: chat.RoleAssistant}}, nil) {
				return
			}
		}
	}
	emit := func(idx int, st *choiceState, d chat.Delta, tm *wire.Timings) bool {
		if d.Empty() && len(st.pending) == 0 {
			return true
		}
		m := &oaiChatMessage{ReasoningContent: d.ReasoningContent}
		if d.Content != "" {
			c := d.Content
			m.Content = &c
		}
		for _, tc := range d.ToolCalls {
			st.anyCalls = true
			ti := tc.Index
			call := oaiToolCall{Index: &ti, Function: oaiToolFunction{Name: tc.Name, Arguments: tc.ArgumentsDelta}}
			if _, seen := st.ids[ti]; !seen {
				id := wire.IDOrNew(tc.ID, "call_")
				st.ids[ti] = id
				call.ID, call.Type = id, "function"
			}
			m.ToolCalls = append(m.ToolCalls, call)
		}
		c := oaiChatChoice{Index: idx, Delta: m}
		if co.Logprobs && len(st.pending) > 0 {
			c.Logprobs = &oaiLogprobs{Content: wire.Probs(g.inst.Model, st.pending, g.opt.PostSamplingProbs)}
			st.pending = nil
		}
		return send(c, tm)
	}
	var usage oaiUsage
	var last wire.Timings
	left := co.N
	for events.Next() {
		ev, idx := events.Event(), events.Index()
		st := states[idx]
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Progress != nil {
			chunk := base
			chunk.Choices = []oaiChatChoice{{Index: idx, Delta: oaiFirstDelta{Role: chat.RoleAssistant}}}
			chunk.PromptProgress = wire.NewProgress(ev.Progress)
			if sse.data(chunk) != nil {
				return
			}
			continue
		}
		if ev.Done {
			if st.done {
				continue
			}
			st.done = true
			d := st.parser.Finish(ev.Stop == engine.StopTypeLimit)
			if !emit(idx, st, d, nil) {
				return
			}
			fr := finishReason(ev.Stop, st.anyCalls)
			tm := wire.NewTimings(ev.Timings)
			var finTimings *wire.Timings
			if !co.IncludeUsage {
				finTimings = tm
			}
			if !send(oaiChatChoice{Index: idx, Delta: &oaiChatMessage{}, FinishReason: &fr}, finTimings) {
				return
			}
			usage.add(ev)
			last = *tm
			if left--; left > 0 {
				continue
			}
			if co.IncludeUsage {
				chunk := base
				chunk.Choices = []oaiChatChoice{}
				chunk.Usage, chunk.Timings = &usage, &last
				if sse.data(chunk) != nil {
					return
				}
			}
			_ = sse.data("[DONE]")
			return
		}
		if co.Logprobs {
			st.pending = append(st.pending, wire.StepOf(ev))
		}
		if ev.Text == "" {
			continue
		}
		d := st.parser.Push(ev.Text)
		var tm *wire.Timings
		if g.opt.TimingsPerToken {
			tm = wire.NewTimings(ev.Timings)
		}
		if d.Empty() {
			continue
		}
		if !emit(idx, st, d, tm) {
			return
		}
	}
}
