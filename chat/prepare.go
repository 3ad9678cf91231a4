package chat

// Chat orchestration: a conversation, its tools and options in; the prompt,
// the grammar that constrains generation and the options to read the
// output with out. This is what llama-server does for a chat request
// between decoding its body and running the prompt, with no HTTP and no
// model: package engine turns a Plan into an engine request.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/x/llama/internal/jsonschema"
)

// Templates are a model's chat templates and what rendering them needs.
// Its methods only read it: one Templates serves concurrent requests.
type Templates struct {
	// Default renders every chat; it is required.
	Default Renderer
	// ToolUse, when set, renders the chats that offer tools (a model's
	// "tool_use" template), as llama.cpp picks it.
	ToolUse Renderer
	// BOS and EOS are the texts of the model's special tokens, given to
	// templates as bos_token and eos_token.
	BOS, EOS string
	// AddBOS says the tokenizer adds BOS itself: a BOS text the template
	// writes at the start of the prompt is removed, so that the prompt
	// does not start with two.
	AddBOS bool
	// Thinking is enable_thinking when a chat does not set it: "on",
	// "off", or "" (auto: whether the template's generation prompt reacts to
	// it, TemplateCaps.ThinkingByDefault, as llama-server).
	Thinking string
}

// RequestError is a chat request that cannot be served as asked: a
// conflict between its options, a conversation the template refuses, or
// tools whose grammar cannot be built. llama-server answers it with 400.
type RequestError struct {
	Msg string
	// Err is the underlying error, if any.
	Err error
}

func (e *RequestError) Error() string { return e.Msg }

// Unwrap returns the underlying error.
func (e *RequestError) Unwrap() error { return e.Err }

func requestError(err error, format string, args ...any) *RequestError {
	return &RequestError{Msg: fmt.Sprintf(format, args...), Err: err}
}

// For returns the renderer of a chat with or without tools: ToolUse when
// tools are offered and it is set, else Default.
func (t *Templates) For(tools bool) Renderer {
	if tools && t.ToolUse != nil {
		return t.ToolUse
	}
	return t.Default
}

// Render applies the template to msgs. extra are template variables;
// enable_thinking is added as [Templates.Thinking] says when extra does not
// set it. An error is a *[RequestError].
func (t *Templates) Render(msgs []Message, tools []Tool, addGen bool, extra map[string]any) (string, error) {
	tmpl := t.For(len(tools) > 0)
	out, err := tmpl.Render(TemplateInput{
		Messages: msgs, Tools: tools, AddGenerationPrompt: addGen,
		BOSToken: t.BOS, EOSToken: t.EOS, Extra: t.Kwargs(tmpl, extra),
	})
	if err != nil {
		return "", requestError(err, "cannot apply the chat template: %v", err)
	}
	if t.AddBOS && t.BOS != "" {
		out = strings.TrimPrefix(out, t.BOS)
	}
	return out, nil
}

// Kwargs returns extra with enable_thinking set as llama.cpp sets it when
// extra does not: true with Thinking "on", false with "off", and otherwise
// whether tmpl's generation prompt reacts to it (TemplateCaps.ThinkingByDefault).
func (t *Templates) Kwargs(tmpl Renderer, extra map[string]any) map[string]any {
	if _, ok := extra["enable_thinking"]; ok {
		return extra
	}
	out := make(map[string]any, len(extra)+1)
	for k, v := range extra {
		out[k] = v
	}
	switch t.Thinking {
	case "on":
		out["enable_thinking"] = true
	case "off":
		out["enable_thinking"] = false
	default:
		out["enable_thinking"] = tmpl.Caps().ThinkingByDefault
	}
	return out
}

// ReasoningMarkers finds the text a template writes around an assistant
// message's reasoning, as llama.cpp's template analysis does: from a
// rendered probe message when the template shows reasoning, else <think>
// and </think> when the generation prompt gen opens a <think> block.
func (t *Templates) ReasoningMarkers(gen string, extra map[string]any) (start, end string, ok bool) {
	const r, c = "PROBE_REASONING_TEXT", "PROBE_CONTENT_TEXT"
	probe := []Message{{Role: RoleUser, Content: "x"}, {Role: RoleAssistant, ReasoningContent: r, Content: c}}
	if out, err := t.Render(probe, nil, false, extra); err == nil && gen != "" {
		if g := strings.LastIndex(out, strings.TrimRight(gen, " \n")); g >= 0 {
			rest := out[g+len(strings.TrimRight(gen, " \n")):]
			ri, ci := strings.Index(rest, r), strings.Index(rest, c)
			if ri >= 0 && ci > ri {
				start = strings.TrimLeft(rest[:ri], "\n")
				if strings.HasSuffix(gen, "\n") && !strings.HasPrefix(rest, "\n") {
					start = rest[:ri]
				}
				return start, rest[ri+len(r) : ci], start != ""
			}
		}
	}
	if strings.Contains(gen, "<think>") {
		return "<think>", "</think>", true
	}
	return "", "", false
}

// GenericToolsPrompt is the instruction added to the system message for
// templates whose tool-call format is the generic JSON one.
const GenericToolsPrompt = "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's request"

// Request is a chat to prepare. The zero value of each option is its
// default.
type Request struct {
	// Messages is the conversation. Ending it with an assistant message
	// continues that message (assistant prefill).
	Messages []Message
	// AllowEmpty accepts no messages at all.
	AllowEmpty bool
	// Tools are the functions the model may call.
	Tools []Tool
	// ToolChoice says whether and which tools to call (zero: auto). On
	// a template with no tool-call format of its own (FormatContentOnly)
	// and no FallbackFormat, "required" or a named function cannot be
	// honoured: Prepare refuses it, unless FreeTextToolChoice.
	ToolChoice ToolChoice
	// FallbackFormat is the tool-call format used when the template has
	// none of its own: FormatGeneric, llama.cpp's JSON envelope
	// ({"tool_call": ...} or {"response": ...}), which a grammar imposes
	// on any model. What the template cannot render is written for it:
	// the tools into the system message, earlier calls as their JSON,
	// tool results as user messages ({"tool_response": ...}). Zero
	// (FormatContentOnly): none; any other format is refused.
	FallbackFormat Format
	// FreeTextToolChoice answers a tool choice the template cannot honour
	// as llama-server v0.4.0 does: the tools are given to the template,
	// the model answers in free text, and no call is parsed.
	FreeTextToolChoice bool
	// ParallelToolCalls allows several calls in one answer (nil: when
	// the template can).
	ParallelToolCalls *bool
	// NoGenerationPrompt leaves the assistant turn unopened.
	NoGenerationPrompt bool
	// Continue continues the last message: "auto", "content" or
	// "reasoning_content" ("": only an assistant message at the end,
	// unless NoPrefillAssistant).
	Continue string
	// PureContent renders the conversation and the tools with the
	// template as it is and reads the whole output as content: no
	// tool-call grammar or parsing, no generic tool fallback, thinking
	// left in the content (llama-server's --skip-chat-parsing). A
	// response format's grammar still applies.
	PureContent bool
	// NoPrefillAssistant renders an assistant message at the end of the
	// conversation as a whole message, after which the model answers in a
	// new turn, instead of continuing it (llama-server's
	// --no-prefill-assistant).
	NoPrefillAssistant bool
	// Extra are template variables (chat_template_kwargs).
	Extra map[string]any
	// Reasoning is the reasoning format by name (see
	// [ParseReasoningFormat]; "": auto).
	Reasoning string
	// Schema is a JSON Schema the answer must follow (response_format).
	// The answer may come after whitespace or in a ```json fence, and its
	// content is then the JSON alone; {} asks for nothing. With Tools
	// under tool choice auto, the answer is calls or that JSON, and the
	// grammar applies from the first token; a call required leaves the
	// schema unused.
	Schema json.RawMessage
	// PlainSchema makes Schema's grammar the whole answer, as
	// llama-server without --jinja: no fence, and {} asks for an object.
	PlainSchema bool
	// Grammar is a GBNF grammar the caller constrains the answer with.
	// It cannot be combined with tools or Schema.
	Grammar string
}

// Plan is how to run a chat and read its output.
type Plan struct {
	// Prompt is the rendered conversation, ending with the generation
	// prompt (or the text of the message continued).
	Prompt string
	// Grammar constrains generation to the tool calls or the response
	// format ("": neither; Request.Grammar, if any, stays the caller's).
	// With GrammarLazy it applies only from one of GrammarTriggers on.
	// One that applies from the first token lets a thinking model reason
	// first (unless the reasoning format is none): it must end the block
	// the generation prompt opened, and on a template that thinks on
	// request (enable_thinking) it may open one of its own.
	Grammar         string
	GrammarLazy     bool
	GrammarTriggers []Trigger
	// PreservedTokens are special tokens of the tool-call format that
	// must be tokenized as themselves.
	PreservedTokens []string
	// Parse are the options to read the output with.
	Parse ParseOptions
	// Prefill is the text the answer starts with when it is read back: the
	// content of the message continued, or its reasoning where that is
	// what is continued; or, where the reasoning format is none and the
	// generation prompt opens a thinking block the model is free to
	// close, that block's opening (as "<think>\n"), so that the content
	// holds the whole block, as llama-server's does (but for a format
	// whose parser drops the block's markers: Kimi K3's content is the
	// block's text without them).
	Prefill string
	// JSONContent says the content is the JSON of a response format
	// alone: the whitespace and ```json fence around it are left out.
	JSONContent bool
	// ToolGrammar says Grammar was built from the tools.
	ToolGrammar bool

	tmpls *Templates
	hist  []Message // the conversation before the generation prompt
	tools []Tool
	extra map[string]any
	// promptIsWithGen says Prompt is hist rendered with its generation
	// prompt; gen is that prompt alone where Prepare found it (haveGen).
	gen                      string
	promptIsWithGen, haveGen bool
	tagsOnce                 sync.Once
	tags                     thinkingTags
}

// thinkingTags are the result of Plan.ThinkingTags.
type thinkingTags struct {
	start, end string
	ok         bool
	err        error
}

// Prepare renders req and returns its plan. Errors are *[RequestError].
func (t *Templates) Prepare(req Request) (*Plan, error) {
	if len(req.Messages) == 0 && !req.AllowEmpty {
		return nil, requestError(nil, `"messages" must not be empty`)
	}
	reasoning, err := ParseReasoningFormat(cmp.Or(req.Reasoning, "auto"))
	if err != nil {
		return nil, requestError(err, "%v", err)
	}
	choice := req.ToolChoice
	if choice.Mode == "" {
		choice.Mode = "auto"
	}
	plan := &Plan{tmpls: t, extra: req.Extra}
	msgs := req.Messages
	// With tool_choice none the template does not see the tools either.
	useTools := len(req.Tools) > 0 && choice.Mode != "none"
	tmpl := t.For(useTools)
	format := tmpl.Format()
	fallback := false
	if format == FormatContentOnly && req.FallbackFormat != FormatContentOnly && !req.PureContent {
		if req.FallbackFormat != FormatGeneric {
			return nil, requestError(nil, "tools: fallback tool-call format %v is not supported (only chat.FormatGeneric)", req.FallbackFormat)
		}
		format, fallback = FormatGeneric, true
		msgs = genericHistory(msgs, tmpl.Caps())
	}
	var tools []Tool
	if useTools {
		tools = req.Tools
		if req.Grammar != "" {
			return nil, requestError(nil, "cannot use custom grammar constraints with tools")
		}
		if err := checkToolChoice(choice, req.Tools); err != nil {
			return nil, requestError(err, "tools: %v", err)
		}
		if format == FormatContentOnly && choice.Mode != "auto" && !req.FreeTextToolChoice {
			return nil, requestError(nil, "tools: the chat template has no tool-call format, so tool choice %q cannot be honoured: "+
				"set FallbackFormat to chat.FormatGeneric to constrain calls to JSON, use tool choice auto, or give a template with tool calls", toolChoiceName(choice))
		}
		if fallback && !tmpl.Caps().SupportsTools {
			list, err := genericToolList(req.Tools)
			if err != nil {
				return nil, requestError(err, "tools: %v", err)
			}
			msgs = addSystem(msgs, list)
		}
	}
	// A template with no tool-call format sees the tools, but nothing
	// constrains or parses calls, whatever the tool choice: the model
	// answers in free text, as llama.cpp's chat parser has it.
	callTools := useTools && format != FormatContentOnly
	wantSchema := len(req.Schema) > 0 && (req.PlainSchema || !isEmptyObject(req.Schema))
	if wantSchema && req.Grammar != "" {
		return nil, requestError(nil, "cannot use response_format with grammar or json_schema")
	}
	schema := req.Schema
	if isEmptyObject(schema) {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	// Under tool choice auto the schema is converted once, inside the
	// tools' grammar, as the answer that calls no tool; elsewhere alone.
	schemaInTools := wantSchema && callTools && !req.PureContent && choice.Mode == "auto"
	var schemaGrammar string // the response format's grammar alone
	if wantSchema && !schemaInTools {
		g, err := jsonschema.ToGBNF(schema)
		if err != nil {
			return nil, requestError(err, "invalid json_schema: %v", err)
		}
		if !req.PlainSchema {
			g = responseFormatGrammar(g)
		}
		g = formatAnswer(format, g)
		schemaGrammar = g
	}
	if callTools {
		if format == FormatGeneric {
			msgs = addSystem(msgs, GenericToolsPrompt)
		}
		parallel := tmpl.Caps().SupportsParallelToolCalls
		if req.ParallelToolCalls != nil {
			parallel = *req.ParallelToolCalls
		}
		// With a response format, an answer that calls no tool is its
		// JSON (under auto; a call required leaves no other answer).
		var answer json.RawMessage
		if schemaInTools {
			answer, plan.JSONContent = schema, !req.PlainSchema
		}
		tg, err := buildToolGrammar(format, req.Tools, choice, parallel, answer, !req.PlainSchema)
		if rf := (*responseFormatError)(nil); errors.As(err, &rf) {
			return nil, requestError(rf.err, "invalid json_schema: %v", rf.err)
		}
		if err != nil {
			return nil, requestError(err, "tools: %v", err)
		}
		// Llama 3.x writes a call as a bare JSON object: with no marker to
		// wait for, llama.cpp v0.4.0 constrains it only when a call is
		// required, and under auto parses what the model wrote freely.
		if format == FormatLlama3x && choice.Mode == "auto" && answer == nil {
			tg = nil
		}
		if tg != nil {
			plan.Grammar, plan.GrammarLazy = tg.Grammar, tg.Lazy
			plan.GrammarTriggers, plan.PreservedTokens = tg.Triggers, tg.PreservedTokens
			plan.ToolGrammar = true
		}
	} else if wantSchema {
		// No tool can be called here (none given, tool choice none, or a
		// template with no call format): the answer is the JSON.
		plan.Grammar, plan.JSONContent = schemaGrammar, !req.PlainSchema
	}
	// A conversation ending with an assistant message is continued from
	// its text (llama.cpp's assistant prefill), as is the last message with
	// Continue: the conversation before it is rendered, then the
	// template's generation prompt, then the message's text. The answer's
	// content starts with that text, as llama-server's does.
	addGen, cont := !req.NoGenerationPrompt, req.Continue
	n := len(msgs)
	if n == 0 {
		cont = ""
	}
	if cont == "" && n > 0 && msgs[n-1].Role == RoleAssistant && !req.NoPrefillAssistant {
		if n >= 2 && msgs[n-2].Role == RoleAssistant {
			return nil, requestError(nil, "cannot have 2 or more assistant messages at the end of the list")
		}
		cont, addGen = "auto", false
	}
	if cont != "" && addGen {
		return nil, requestError(nil, "cannot set both add_generation_prompt and continue_final_message to true")
	}
	if cont != "" && msgs[n-1].Role == RoleAssistant && len(msgs[n-1].ToolCalls) > 0 {
		return nil, requestError(nil, "cannot continue an assistant message that contains tool calls")
	}
	var prompt string
	inBlock := false // the prompt ends inside the continued message's reasoning
	if cont == "" {
		prompt, err = t.Render(msgs, tools, addGen, req.Extra)
	} else {
		last := msgs[n-1]
		var before, withGen string
		before, err = t.Render(msgs[:n-1], tools, false, req.Extra)
		if err == nil {
			withGen, err = t.Render(msgs[:n-1], tools, true, req.Extra)
		}
		if err == nil {
			i := 0
			for i < len(before) && i < len(withGen) && before[i] == withGen[i] {
				i++
			}
			gen := withGen[i:]
			plan.gen, plan.haveGen = strings.TrimPrefix(withGen, before), true
			// Templates with reasoning get the message's reasoning between
			// their markers first (closed when continuing the content).
			start, end, ok := t.ReasoningMarkers(gen, req.Extra)
			if !ok {
				start, end, ok = continuedBlock(format, gen, end)
			}
			if !ok && last.ReasoningContent != "" {
				// The template shows no reasoning: the format's markers,
				// as its model writes them.
				start, end, ok = continuationMarkers(format, tmpl.Source())
			}
			if ok {
				if k := strings.LastIndex(gen, start); k >= 0 {
					gen = gen[:k]
				}
				gen += start + last.ReasoningContent
				if cont != "reasoning_content" {
					gen += end
				} else {
					// The answer goes on in the block: read back, its
					// reasoning starts with the message's.
					inBlock, plan.Prefill = true, last.ReasoningContent
					if reasoning == ReasoningNone || format == FormatGPTOSS {
						// GPT-OSS's parser reads the analysis header itself.
						plan.Prefill = start + last.ReasoningContent
					}
				}
			}
			prompt = before + gen
			if cont != "reasoning_content" {
				plan.Prefill = continuationText(last)
			}
			if format == FormatFunctionaryV32 && strings.HasSuffix(gen, ">>>") {
				// The text's recipient, which the generation prompt
				// leaves to the model, as llama.cpp writes it.
				plan.Prefill = "all\n" + plan.Prefill
			}
			if !inBlock {
				prompt += plan.Prefill
			}
		}
	}
	if err != nil {
		return nil, err
	}
	plan.Prompt = prompt
	plan.hist, plan.tools = msgs, tools
	if cont == "" && addGen {
		plan.promptIsWithGen = true
	}
	if cont != "" {
		plan.hist = msgs[:n-1]
	}
	trimmed := strings.TrimRight(prompt, " \t\r\n")
	// With the fallback and no tools to call, the answer is plain text:
	// the generic parser would read a call the model mimics from the
	// history as one.
	if fallback && !callTools {
		format = FormatContentOnly
	}
	plan.Parse = ParseOptions{
		Format:             format,
		Reasoning:          reasoning,
		ThinkingForcedOpen: reasoning != ReasoningNone && (inBlock && format != FormatGPTOSS || opensThinking(format, trimmed)),
		ParseToolCalls:     callTools,
		Tools:              req.Tools,
	}
	// A message continued from its content has closed its reasoning; one
	// continued from its reasoning is read as reasoning only where the
	// prompt ends with an open block.
	if plan.Grammar != "" && !plan.GrammarLazy && !req.PureContent && reasoning != ReasoningNone &&
		(cont == "" || cont == "reasoning_content" && plan.Parse.ThinkingForcedOpen) {
		thinking := t.Kwargs(tmpl, req.Extra)["enable_thinking"] != false
		if err := plan.allowReasoning(tmpl.Caps(), thinking); err != nil {
			return nil, err
		}
	}
	if start, _, opened := openedBlock(format, trimmed); opened && reasoning == ReasoningNone && cont == "" && !req.PureContent &&
		(plan.Grammar == "" || plan.GrammarLazy) && !dropsThinkMarkers(format) {
		plan.Prefill = prompt[strings.LastIndex(prompt, start):]
	}
	if req.PureContent {
		if plan.ToolGrammar {
			plan.Grammar, plan.GrammarLazy, plan.GrammarTriggers, plan.ToolGrammar = "", false, nil, false
			plan.Grammar, plan.JSONContent = schemaGrammar, schemaGrammar != "" && !req.PlainSchema
		}
		plan.PreservedTokens = nil
		plan.Parse = ParseOptions{Format: FormatContentOnly, Reasoning: ReasoningNone}
	}
	return plan, nil
}

// ThinkingTags returns the tags around the model's thinking in the
// answer, for a thinking budget: the template's reasoning markers, found
// from the generation prompt of the plan's conversation, or <think> and
// </think> when that prompt opens a <think> block itself. ok is false
// when the template has no thinking.
func (p *Plan) ThinkingTags() (start, end string, ok bool, err error) {
	p.tagsOnce.Do(func() {
		tg := &p.tags
		tg.start, tg.end, tg.ok, tg.err = p.thinkingTags()
	})
	return p.tags.start, p.tags.end, p.tags.ok, p.tags.err
}

// thinkingTags is ThinkingTags uncached. It renders what Prepare did not.
func (p *Plan) thinkingTags() (start, end string, ok bool, err error) {
	t := p.tmpls
	gen := p.gen
	if !p.haveGen {
		before, err := t.Render(p.hist, p.tools, false, p.extra)
		if err != nil {
			return "", "", false, err
		}
		withGen := p.Prompt
		if !p.promptIsWithGen {
			if withGen, err = t.Render(p.hist, p.tools, true, p.extra); err != nil {
				return "", "", false, err
			}
		}
		gen = strings.TrimPrefix(withGen, before)
	}
	start, end, ok = t.ReasoningMarkers(gen, p.extra)
	if !ok {
		// The generation prompt opens the block itself.
		if fs, fe, opened := openedBlock(p.Parse.Format, gen); opened && fs != thinkOpen {
			start, end, ok = fs, fe, true
		} else if strings.Contains(gen, "<think>") {
			start, end, ok = "<think>", cmp.Or(strings.TrimSpace(end), "</think>"), true
		}
	}
	return start, end, ok, nil
}

// continuedBlock gives the markers a continued message's reasoning goes
// between where ReasoningMarkers finds no start because the generation
// prompt gen opens the block itself (Qwen 3.5, R1 distills, MiniCPM5,
// Cohere2 MoE, Kimi K3): start is the opening as gen writes it ("<think>\n"),
// end what the template writes after an earlier message's reasoning
// (probeEnd, from ReasoningMarkers), else the format's end marker; Kimi K3's
// end also opens its response section, as llama.cpp writes it. ok is
// false where gen opens no block.
func continuedBlock(f Format, gen, probeEnd string) (start, end string, ok bool) {
	marker, end, ok := openedBlock(f, gen)
	if !ok {
		return "", "", false
	}
	switch {
	case f == FormatKimiK3:
		end = kimi3ThinkEnd + kimi3Resp
	case strings.Contains(probeEnd, end):
		end = probeEnd
	}
	return gen[strings.LastIndex(gen, marker):], end, true
}

// continuationMarkers are the markers the model of format f writes around
// its reasoning, for a continued message's reasoning where the template
// (source src) shows none because it drops the last turn's reasoning, as
// llama.cpp's handlers for these models write them: a GPT-OSS analysis
// message before the final one, Gemma 4's thought channel, Ministral 3's
// [THINK], Command R7B's and Hunyuan 3's blocks, the <think> of Kimi K2,
// LFM2 and DeepSeek V3.2, or <think> where the template writes both tags
// (as llama.cpp's template analysis finds them). ok is false elsewhere:
// llama.cpp drops the reasoning of a template that shows none.
func continuationMarkers(f Format, src string) (start, end string, ok bool) {
	switch f {
	case FormatGPTOSS:
		return hChannel + "analysis" + hMessage, hEnd + hStart + "assistant" + hChannel + "final" + hMessage, true
	case FormatGemma:
		return "<|channel>thought\n", "<channel|>", true
	case FormatMagistral:
		// Ministral 3's template, not Mistral Small 3.2's or Devstral's.
		ok = strings.Contains(src, "[SYSTEM_PROMPT]") && !strings.Contains(src, "[CALL_ID]")
		return "[THINK]", "[/THINK]", ok
	case FormatKimiK2, FormatLFM2, FormatDeepSeekV32:
		return thinkOpen, thinkClose, true
	case FormatCommandR7B:
		return "<|START_THINKING|>", "<|END_THINKING|>", true
	case FormatHunyuan3:
		return hyThink, hyThinkEnd, true
	}
	// A template that writes both tags somewhere (a thinking mode's
	// system prompt or empty block) has a model that writes them.
	ok = strings.Contains(src, thinkOpen) && strings.Contains(src, thinkClose)
	return thinkOpen, thinkClose, ok
}

// openedBlock returns the markers of the thinking block that text, without
// its trailing spaces, ends by opening: format f's own, or <think>.
func openedBlock(f Format, text string) (start, end string, ok bool) {
	text = strings.TrimRight(text, " \t\r\n")
	if fs, fe, _ := thinkMarkers(f); fs != "" && strings.HasSuffix(text, fs) {
		return fs, fe, true
	}
	if strings.HasSuffix(text, thinkOpen) {
		return thinkOpen, thinkClose, true
	}
	return "", "", false
}

// opensThinking reports whether prompt ends by opening a thinking block
// (see openedBlock).
func opensThinking(f Format, prompt string) bool {
	_, _, ok := openedBlock(f, prompt)
	return ok
}

// ParseOutput reads the whole output of the plan's generation (the text
// generated, without the prefill) into the assistant message.
func (p *Plan) ParseOutput(output string) Message {
	return p.trimmed(ParseWhole(p.Prefill+output, p.Parse))
}

// trimmed is msg with its content trimmed to its JSON under a response
// format.
func (p *Plan) trimmed(msg Message) Message {
	if p.JSONContent {
		msg.Content = TrimJSONContent(msg.Content)
	}
	return msg
}

// ParseLimited is ParseOutput for an output that generation cut at its
// token limit. When the cut leaves the output malformed (a tool call
// unfinished), the message is what a [Stream] of the same output reports
// (the calls read so far, the last one's arguments as far as they went)
// rather than the raw output as content: streamed or not, an answer cut
// short reads the same.
func (p *Plan) ParseLimited(output string) Message {
	if msg, err := Parse(p.Prefill+output, p.Parse); err == nil {
		return p.trimmed(msg)
	}
	s := p.NewStream()
	m := Message{Role: RoleAssistant}
	m.addDelta(s.Push(output))
	m.addDelta(s.Finish(true))
	return m
}

// NewStream returns a Stream that reads the plan's output as it is
// generated, piece by piece, into deltas of the assistant message.
func (p *Plan) NewStream() *Stream {
	return NewStream(p.Parse).WithPrefix(p.Prefill).WithJSONContent(p.JSONContent)
}

// checkToolChoice refuses a choice of unknown mode or naming a function
// that is not among tools, whatever the template's format.
func checkToolChoice(choice ToolChoice, tools []Tool) error {
	switch choice.Mode {
	case "auto", "required", "function":
		_, err := callable(choice, tools)
		return err
	case "none":
		return nil
	}
	return fmt.Errorf("chat: unknown tool choice mode %q", choice.Mode)
}

// toolChoiceName is a choice as an error names it: its mode, or the
// function it names.
func toolChoiceName(c ToolChoice) string {
	if c.Mode == "function" {
		return "function " + c.Function
	}
	return c.Mode
}

// continuationText is the text of a message continued: its content, or
// its text parts joined by blank lines, as llama.cpp joins them.
func continuationText(m Message) string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var texts []string
	for _, p := range m.Parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

// addSystem puts text in the system message, adding one if needed.
func addSystem(msgs []Message, text string) []Message {
	out := make([]Message, 0, len(msgs)+1)
	if len(msgs) > 0 && msgs[0].Role == RoleSystem {
		m := msgs[0]
		if m.Content != "" {
			m.Content += "\n\n" + text
		} else {
			m.Content = text
		}
		if len(m.Parts) > 0 {
			m.Parts = append(append([]ContentPart(nil), m.Parts...), ContentPart{Type: "text", Text: "\n\n" + text})
		}
		return append(append(out, m), msgs[1:]...)
	}
	out = append(out, Message{Role: RoleSystem, Content: text})
	return append(out, msgs...)
}

// isEmptyObject reports whether v is the JSON object {}.
func isEmptyObject(v json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(v, &m) == nil && m != nil && len(m) == 0
}

// responseFormatGrammar wraps the grammar of a response_format schema the
// way llama.cpp's chat parser does (after the generation prompt, which the
// prompt already holds): optional whitespace, then the JSON either bare or
// in a ```json fence, then optional whitespace. The schema's root takes
// a name the schema's grammar does not use (a property "response-format"
// has a rule of that name).
func responseFormatGrammar(schema string) string {
	name := unusedRule(schema, "response-format")
	var sb strings.Builder
	fmt.Fprintf(&sb, "root ::= space space ( \"```json\" space %s space \"```\" | space %s space )\n", name, name)
	sb.WriteString(renameGBNFRule(schema, "root", name))
	if !strings.Contains(schema, "\nspace ::=") && !strings.HasPrefix(schema, "space ::=") {
		sb.WriteString("\nspace ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}")
	}
	return sb.String()
}

// renameGBNFRule renames rule from to "to" in GBNF text, leaving string
// literals and character classes alone.
func renameGBNFRule(g, from, to string) string {
	var sb strings.Builder
	isName := func(c byte) bool {
		return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(g); {
		c := g[i]
		switch {
		case c == '"' || c == '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(g) && g[j] != end {
				if g[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(g))
			sb.WriteString(g[i:j])
			i = j
		case c == '#':
			j := strings.IndexByte(g[i:], '\n')
			if j < 0 {
				j = len(g) - i
			}
			sb.WriteString(g[i : i+j])
			i += j
		case isName(c):
			j := i
			for j < len(g) && isName(g[j]) {
				j++
			}
			if g[i:j] == from {
				sb.WriteString(to)
			} else {
				sb.WriteString(g[i:j])
			}
			i = j
		default:
			sb.WriteByte(c)
			i++
		}
	}
	return sb.String()
}
