package server

// The chat machinery of every chat-shaped endpoint (OpenAI's chat
// completions in openai_handlers.go, Anthropic's Messages, Responses, the
// transcriptions): messages rendered with the model's chat template, tools
// constrained by a grammar of the template's tool-call format, the output
// parsed back into content, reasoning and tool calls, whole or as streamed
// deltas.
//
// Every chat-shaped endpoint reads the same way, top to bottom: its body
// is decoded once into the dialect's typed body (openai.ChatBody, respBody,
// anthropic.Request, a transcription form), one function of the dialect
// translates that into a wire.Chat (the conversation in package chat's
// types plus options: openai.ToChat, responses.Request.ToChat then
// openai.ToChat, anthropic.ToChat, transcriptionChat), and startChat turns
// it into an engine.Request and the plan to read its output with.

import (
	"cmp"
	"context"
	"errors"
	"math"

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
	}
	// With tools too: the schema is converted, and under tool choice auto
	// the answer may be its JSON.
	if len(req.Schema) > 0 {
		if err := checkSchemaSize(req.Schema); err != nil {
			return nil, err
		}
	}
	tmpls := inst.chatTemplates()
	// A template with no tool-call format of its own: under "auto" the
	// model sees the tools as the template shows them and answers in free
	// text, as llama-server's. When the client demands a call ("required",
	// a named function), llama-server answers in free text all the same;
	// here llama.cpp's generic JSON format is imposed by a grammar
	// instead, the tools listed in the system message, so that the call
	// asked for is made.
	var fallback chat.Format
	if req.ToolChoice.Mode == "required" || req.ToolChoice.Mode == "function" {
		fallback = chat.FormatGeneric
	}
	cp, err := tmpls.Prepare(chat.Request{
		Messages:           req.Messages,
		AllowEmpty:         req.AllowEmpty,
		Tools:              req.Tools,
		ToolChoice:         req.ToolChoice,
		FallbackFormat:     fallback,
		FreeTextToolChoice: true, // with no fallback: as llama-server, free text
		ParallelToolCalls:  req.Parallel,
		NoGenerationPrompt: !req.AddGenerationPrompt,
		Continue:           req.Continue,
		NoPrefillAssistant: inst.Opts.NoPrefillAssistant,
		PureContent:        inst.Opts.SkipChatParsing,
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
		// The request's own grammar, or its json_schema's, was checked
		// with its other parameters; a grammar the plan made is checked here.
		gr := t.Params.ParsedGrammar
		if gr.Source() != cp.Grammar {
			if gr, err = checkGrammar(inst.Model, cp.Grammar); err != nil {
				if cp.ToolGrammar {
					return nil, badRequest("tool grammar: %v", err) // built from the client's tools
				}
				return nil, err
			}
		}
		engine.SetChatGrammar(inst.Model, &t.Params, cp)
		t.Params.ParsedGrammar = gr
	}
	toks, err := inst.promptTokens(cp.Prompt, req.Media, t)
	if err != nil {
		return nil, err
	}
	t.Prompt = toks
	if len(req.Media) == 0 {
		t.UserStarts = userStarts(inst.Model, cp.Prompt, toks) // for context checkpoints
	}
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

// chatOptions are the OpenAI chat settings beyond generation.
type chatOptions struct {
	Model string
	// N is the number of choices ("n", 1 to the number of slots).
	N            int
	IncludeUsage bool
	Logprobs     bool
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
	// A chat's lazy grammar, triggers and preserved tokens come from its
	// template's tool format alone (llama-server overwrites the body's).
	req.Gen.GrammarLazy, req.Gen.GrammarTriggers, req.Gen.PreservedTokens = wire.Opt[bool]{}, wire.Opt[[]wire.Trigger]{}, wire.Opt[[]string]{}
	// Under --jinja the body's json_schema is the template's to render, as
	// response_format's is: it is converted there, not as a raw grammar.
	if inst.Opts.Jinja && len(req.Gen.JSONSchema) > 0 && len(req.Schema) == 0 {
		if err := checkSchemaField(&req.Gen); err != nil {
			return nil, nil, co, err
		}
		req.Schema, req.Gen.JSONSchema = req.Gen.JSONSchema, nil
	}
	t, opt, err := inst.generation(&req.Gen, inst.Opts.NPredict)
	if err != nil {
		return nil, nil, co, err
	}
	if err := inst.chatOptions(req, t, &co); err != nil {
		return nil, nil, co, err
	}
	plan, err := inst.prepareChat(req, t)
	if err != nil {
		return nil, nil, co, err
	}
	opt.Settings = generationSettings(t, opt, inst)
	g := &genRequest{inst: inst, prompts: [][]llama.Token{t.Prompt}, task: t, opt: opt, n: co.N}
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
		t.SampledProbs = true // each token's own, with top_logprobs 0 too
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

// collectChat waits for the result of a chat (of one choice) that is not
// streamed and reads its message with chatMessage.
func collectChat(ctx context.Context, inst *instance, plan *chatPlan, st eventStream) (*completionResult, chat.Message, error) {
	res, err := collect(ctx, inst.Model, st, 1)
	if err != nil {
		return nil, chat.Message{}, err
	}
	return res[0], chatMessage(plan, res[0]), nil
}

// chatMessage reads the message of a chat's result (see ParseResult).
func chatMessage(plan *chatPlan, res *completionResult) chat.Message {
	return plan.ParseResult(res.Text, res.Final.Stop == engine.StopTypeLimit)
}

// ParseResult reads a whole output; limited says that generation cut it
// at the token limit, which is read as its stream would have reported it
// (chat.Plan.ParseLimited).
func (p *chatPlan) ParseResult(output string, limited bool) chat.Message {
	if limited {
		return p.ParseLimited(output)
	}
	return p.ParseOutput(output)
}
