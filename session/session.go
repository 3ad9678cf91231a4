// Package session is a chat in one call: a conversation with its history,
// the model's chat template, Go functions as tools, and replies streamed,
// whole, or decoded into a Go type.
//
//	s, err := session.New(lctx, session.Options{System: "You are terse."})
//	session.AddTool(s, "get_weather", "Current weather in a city",
//		func(ctx context.Context, in struct{ City string `json:"city"` }) (string, error) {
//			return "sunny, 21 °C in " + in.City, nil
//		})
//	reply, err := s.Send(ctx, "What is the weather in Paris?")
//	fmt.Println(reply.Content)
//
// Each step of a turn is prepared by package chat as llama-server prepares
// a chat request (the prompt through the template, the grammar of the
// template's tool-call format, the parser of the answer), and run on a
// llama.Context (New) or on an engine.Engine (NewEngine). The calls the
// model makes are decoded into the tools' Go types and run, their results
// (or their errors) go back to the model, and the model steps again, up to
// Options.MaxSteps times; the last step then answers without tools.
//
// The package sits above chat (templates, parsing) and engine (slots,
// batching), which it both uses; neither knows about it.
//
// A template with no tool-call format of its own (Gemma 3's) cannot call
// tools: AddTool refuses them unless Options.ToolFormat names the generic
// JSON format (chat.FormatGeneric), which a grammar then imposes on every
// step that may call. Nothing is dropped silently: a tool choice that
// cannot be honoured is an error.
//
// The conversation is kept inside the context: before each step, when the
// prompt and Options.MaxTokens do not fit, the oldest turns (a user
// message and the answers and tool results after it) are dropped from the
// history; the system prompt and the current turn are always kept.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"sync"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
)

// Limits on what a session accepts.
const (
	// MaxTemplateFile is the largest template file TemplateFile reads.
	MaxTemplateFile = 1 << 20
	// MaxStepsLimit bounds Options.MaxSteps.
	MaxStepsLimit = 64
)

// Options configure a Session. The zero value uses the model's own chat
// template, no system prompt, greedy sampling, at most 512 tokens a step
// (or half the context, if less) and 4 steps with tool calls a turn.
type Options struct {
	// The chat template: at most one of these three; none means the
	// model's own (a model without one is an error that says to set one
	// of them). TemplateFile is a Jinja file; TemplateName one of
	// llama.cpp's built-in names (chat.BuiltinTemplateNames: "chatml",
	// "llama3", ...); Templates is a chat.Templates of the caller's.
	TemplateFile string
	TemplateName string
	Templates    *chat.Templates

	// System is the system prompt, kept when old turns are dropped.
	System string

	// ToolFormat is the tool-call format used when the template has none
	// of its own: chat.FormatGeneric (JSON, imposed by a grammar), or
	// zero for none, in which case such a template refuses tools.
	ToolFormat chat.Format
	// ToolChoice is the tool choice of each turn's first step ("auto",
	// "required", "none" or "function" with a name; zero: auto). Later
	// steps are auto, and the step after MaxSteps steps with calls is
	// none, so that a turn always ends with an answer.
	ToolChoice chat.ToolChoice
	// MaxSteps is the most steps with tool calls in one turn (0: 4; at
	// most MaxStepsLimit).
	MaxSteps int

	// MaxTokens is the most tokens generated in one step (0: 512, or half
	// the context if less). The room for them is kept free in the context.
	MaxTokens int
	// Sampling are the sampling settings. The zero value picks greedily;
	// sampling.Defaults() gives llama-server's.
	Sampling sampling.Params
	// Stop strings end a step (for templates whose end of turn is not an
	// end-of-generation token of the model).
	Stop []string
	// Seq is the sequence of the llama.Context a session of New uses.
	Seq int
}

// Session is a conversation with a model. Its methods are safe for
// concurrent use, but a session runs one turn at a time: a call while
// another runs (or while its stream is being read) fails with an error
// matching llama.ErrBusy. Run many conversations at once with many
// sessions over one engine (NewEngine).
type Session struct {
	mu      sync.Mutex
	r       runner
	m       *llama.Model
	tmpls   *chat.Templates
	o       Options
	tools   []tool
	history []chat.Message
	nCalls  int
}

// Call is a tool call the model made in a turn, and its outcome.
type Call struct {
	ID, Name string
	// Arguments is the JSON text the model wrote.
	Arguments string
	// Result is what went back to the model: the tool's result, or the
	// text of Err.
	Result string
	// Err is the tool's error, or why the call could not be made (an
	// unknown tool, arguments that do not decode).
	Err error
}

// Reply is the outcome of a turn.
type Reply struct {
	// Content and Reasoning are the final answer's text and thinking.
	Content, Reasoning string
	// Calls are the tool calls made on the way, in order.
	Calls []Call
	// Steps is how many times the model was run.
	Steps int
}

// Event is one step of a streamed turn: a piece of the answer's text or
// thinking, or a tool call that has run.
type Event struct {
	Content, Reasoning string
	Call               *Call
}

// New returns a session over one llama.Context, in sequence o.Seq. The
// context serves one turn at a time (llama.ErrBusy otherwise); give each
// concurrent session a context of its own, or use NewEngine. The session
// keeps its last prompt in the sequence's memory and decodes only what a
// step adds to it: leave that sequence to the session.
func New(lctx *llama.Context, o Options) (*Session, error) {
	if lctx == nil {
		return nil, invalid("nil *llama.Context")
	}
	if o.Seq < 0 || o.Seq >= lctx.Sequences() {
		return nil, invalid("sequence %d out of range [0, %d)", o.Seq, lctx.Sequences())
	}
	return newSession(&ctxRunner{lctx: lctx, seq: o.Seq}, lctx.Model(), o)
}

// NewEngine returns a session over an engine: its steps are engine
// requests, batched with those of other sessions, their prompts reused
// from the slots' cache. Any number of sessions may share one engine.
func NewEngine(eng *engine.Engine, o Options) (*Session, error) {
	if eng == nil {
		return nil, invalid("nil *engine.Engine")
	}
	return newSession(&engRunner{eng: eng}, eng.Model(), o)
}

func newSession(r runner, m *llama.Model, o Options) (*Session, error) {
	if o.MaxSteps < 0 || o.MaxSteps > MaxStepsLimit {
		return nil, invalid("MaxSteps %d out of range [0, %d]", o.MaxSteps, MaxStepsLimit)
	}
	if o.MaxTokens < 0 {
		return nil, invalid("negative MaxTokens %d", o.MaxTokens)
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 4
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = min(512, r.nCtx()/2)
	}
	if o.MaxTokens >= r.nCtx() {
		return nil, invalid("MaxTokens %d leaves no room in a context of %d tokens", o.MaxTokens, r.nCtx())
	}
	if o.ToolFormat != chat.FormatContentOnly && o.ToolFormat != chat.FormatGeneric {
		return nil, invalid("ToolFormat %v: only chat.FormatGeneric can stand in for a template's format", o.ToolFormat)
	}
	if err := o.Sampling.Limit(r.nCtx(), m.VocabSize()); err != nil {
		return nil, err
	}
	o.Stop = append([]string(nil), o.Stop...)
	t, err := templates(m, o)
	if err != nil {
		return nil, err
	}
	s := &Session{r: r, m: m, tmpls: t, o: o}
	if o.System != "" {
		s.history = []chat.Message{{Role: chat.RoleSystem, Content: o.System}}
	}
	return s, nil
}

// templates resolves the one template o names.
func templates(m *llama.Model, o Options) (*chat.Templates, error) {
	n := 0
	for _, set := range []bool{o.TemplateFile != "", o.TemplateName != "", o.Templates != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, invalid("set one of TemplateFile, TemplateName and Templates")
	}
	switch {
	case o.Templates != nil:
		if o.Templates.Default == nil {
			return nil, invalid("Templates.Default is nil")
		}
		return o.Templates, nil
	case o.TemplateFile != "":
		src, err := readFile(o.TemplateFile)
		if err != nil {
			return nil, err
		}
		t, err := chat.ParseTemplate(src)
		if err != nil {
			return nil, &llama.Error{Code: llama.CodeInvalid, Op: "session", Msg: "template file " + o.TemplateFile, Err: err}
		}
		return chat.ForModelWith(m, chat.NewJinjaRenderer(t)), nil
	case o.TemplateName != "":
		if !chat.IsBuiltinTemplate(o.TemplateName) {
			return nil, invalid("unknown template name %q (see chat.BuiltinTemplateNames)", o.TemplateName)
		}
		r, err := chat.NewResolver(false).For(o.TemplateName)
		if err != nil {
			return nil, &llama.Error{Code: llama.CodeInvalid, Op: "session", Err: err}
		}
		return chat.ForModelWith(m, r), nil
	}
	src, ok := m.ChatTemplate("")
	if !ok || strings.TrimSpace(src) == "" {
		return nil, invalid("the model has no chat template: set Options.TemplateFile (a Jinja file) or Options.TemplateName (a llama.cpp built-in such as \"chatml\")")
	}
	if _, err := chat.NewResolver(false).For(src); err != nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "session",
			Msg: "the model's chat template does not parse (" + err.Error() + "): set Options.TemplateFile or Options.TemplateName", Err: err}
	}
	return chat.ForModel(m, nil)
}

// readFile reads a template file of at most MaxTemplateFile bytes.
func readFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &llama.Error{Code: llama.CodeInvalid, Op: "session", Msg: "template file", Err: err}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTemplateFile+1))
	if err != nil {
		return "", &llama.Error{Code: llama.CodeInvalid, Op: "session", Msg: "template file", Err: err}
	}
	if len(b) > MaxTemplateFile {
		return "", invalid("template file %s is over %d bytes", path, MaxTemplateFile)
	}
	return string(b), nil
}

func invalid(format string, args ...any) error {
	return &llama.Error{Code: llama.CodeInvalid, Op: "session", Msg: fmt.Sprintf(format, args...)}
}

func busy() error {
	return &llama.Error{Code: llama.CodeBusy, Op: "session", Msg: "the session is running a turn"}
}

// History returns a copy of the conversation so far (the system prompt
// first, if any; tool calls and results included), or nil while a turn
// runs.
func (s *Session) History() []chat.Message {
	if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	return append([]chat.Message(nil), s.history...)
}

// SetHistory replaces the conversation (a saved one, say). Its messages
// are checked when the next turn renders them.
func (s *Session) SetHistory(msgs []chat.Message) error {
	if !s.mu.TryLock() {
		return busy()
	}
	defer s.mu.Unlock()
	s.history = append([]chat.Message(nil), msgs...)
	return nil
}

// Send runs a turn: text as the user's message, then the model's steps
// and tool calls, and returns the final answer. On an error (ctx's end
// among them) the history is as before the call.
func (s *Session) Send(ctx context.Context, text string) (*Reply, error) {
	return s.run(ctx, text, nil, func(Event) bool { return true })
}

// Stream runs a turn as Send does, yielding the answer's text as it is
// generated and each tool call once it has run. An error is yielded once,
// last. Breaking out of the loop ends the turn, and the history is then as
// before it, as on an error.
func (s *Session) Stream(ctx context.Context, text string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		_, err := s.run(ctx, text, nil, func(e Event) bool { return yield(e, nil) })
		if err != nil && !errors.Is(err, errStopped) {
			yield(Event{}, err)
		}
	}
}

// errStopped is a stream whose reader broke out of the loop.
var errStopped = errors.New("session: stream stopped by its reader")

// toolChoice is the choice of step i of a turn.
func (s *Session) toolChoice(step int) chat.ToolChoice {
	switch {
	case len(s.tools) == 0 || step >= s.o.MaxSteps:
		return chat.ToolChoice{Mode: "none"}
	case step == 0 && s.o.ToolChoice.Mode != "":
		return s.o.ToolChoice
	}
	return chat.ToolChoice{Mode: "auto"}
}

// run runs a turn. schema, when set, asks for a reply in that JSON Schema
// (no tools).
func (s *Session) run(ctx context.Context, text string, schema []byte, emit func(Event) bool) (*Reply, error) {
	if !s.mu.TryLock() {
		return nil, busy()
	}
	defer s.mu.Unlock()
	if m := s.o.ToolChoice.Mode; schema == nil && len(s.tools) == 0 && (m == "required" || m == "function") {
		return nil, invalid("tool choice %q with no tools (add them with AddTool)", m)
	}
	saved := s.history
	msgs := append(append([]chat.Message(nil), s.history...), chat.Message{Role: chat.RoleUser, Content: text})
	reply := &Reply{}
	for step := 0; ; step++ {
		if err := ctx.Err(); err != nil {
			s.history = saved
			return nil, &llama.Error{Code: llama.CodeCanceled, Op: "session", Err: err}
		}
		choice := s.toolChoice(step)
		if schema != nil {
			choice = chat.ToolChoice{Mode: "none"}
		}
		var err error
		var plan *chat.Plan
		var toks []llama.Token
		msgs, plan, toks, err = s.prepare(ctx, msgs, choice, schema)
		if err != nil {
			s.history = saved
			return nil, err
		}
		msg, err := s.step(ctx, plan, toks, emit)
		reply.Steps++
		if err != nil {
			s.history = saved
			return nil, err
		}
		for i := range msg.ToolCalls {
			if msg.ToolCalls[i].ID == "" {
				s.nCalls++
				msg.ToolCalls[i].ID = fmt.Sprintf("call_%d", s.nCalls)
			}
		}
		msgs = append(msgs, msg)
		if len(msg.ToolCalls) == 0 {
			reply.Content, reply.Reasoning = msg.Content, msg.ReasoningContent
			s.history = msgs
			return reply, nil
		}
		for _, tc := range msg.ToolCalls {
			c, err := s.call(ctx, tc)
			if err != nil {
				s.history = saved
				return nil, err
			}
			reply.Calls = append(reply.Calls, c)
			msgs = append(msgs, chat.Message{Role: chat.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: c.Result})
			if !emit(Event{Call: &c}) {
				s.history = saved
				return nil, errStopped
			}
		}
	}
}

// prepare renders msgs for a step, dropping the oldest turns while the
// prompt and MaxTokens do not fit in the context. It returns the messages
// kept. How many turns go is found by bisection (dropping more turns makes
// the prompt shorter), so that a long history (SetHistory) costs a few
// renders, not one per dropped turn; ctx's end stops it.
func (s *Session) prepare(ctx context.Context, msgs []chat.Message, choice chat.ToolChoice, schema []byte) ([]chat.Message, *chat.Plan, []llama.Token, error) {
	var decls []chat.Tool
	for _, t := range s.tools {
		decls = append(decls, t.decl)
	}
	no := false
	render := func(msgs []chat.Message) (*chat.Plan, []llama.Token, bool, error) {
		if err := ctx.Err(); err != nil {
			return nil, nil, false, &llama.Error{Code: llama.CodeCanceled, Op: "session", Err: err}
		}
		req := chat.Request{Messages: msgs, Tools: decls, ToolChoice: choice, FallbackFormat: s.o.ToolFormat, ParallelToolCalls: &no}
		if schema != nil {
			req.Tools, req.Schema = nil, schema
		}
		plan, err := s.tmpls.Prepare(req)
		if err != nil {
			return nil, nil, false, &llama.Error{Code: llama.CodeInvalid, Op: "session", Err: err}
		}
		toks, err := s.m.Tokenize(plan.Prompt, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
		if err != nil {
			return nil, nil, false, err
		}
		return plan, toks, len(toks)+s.o.MaxTokens <= s.r.nCtx(), nil
	}
	plan, toks, fits, err := render(msgs)
	if err != nil || fits {
		return msgs, plan, toks, err
	}
	// cuts[k-1] is where the messages kept start when k turns are dropped
	// (a turn: a user message and what follows it up to the next one);
	// the system prompt before start stays, and so does the last turn.
	start := 0
	for start < len(msgs) && (msgs[start].Role == chat.RoleSystem || msgs[start].Role == chat.RoleDeveloper) {
		start++
	}
	var cuts []int
	for i := start + 1; i < len(msgs); i++ {
		if msgs[i].Role == chat.RoleUser {
			cuts = append(cuts, i)
		}
	}
	drop := func(k int) []chat.Message {
		return append(append([]chat.Message(nil), msgs[:start]...), msgs[cuts[k-1]:]...)
	}
	// The fewest dropped turns that fit, in [lo, hi]; hi is checked last.
	lo, hi := 1, len(cuts)
	var best []chat.Message
	var bestPlan *chat.Plan
	var bestToks []llama.Token
	for lo <= hi {
		k := lo + (hi-lo)/2
		kept := drop(k)
		p, t, ok, err := render(kept)
		if err != nil {
			return nil, nil, nil, err
		}
		if ok {
			best, bestPlan, bestToks, hi = kept, p, t, k-1
		} else {
			toks, lo = t, k+1
		}
	}
	if best == nil {
		return nil, nil, nil, invalid("the current turn does not fit in the context: a prompt of %d tokens and MaxTokens %d, in %d", len(toks), s.o.MaxTokens, s.r.nCtx())
	}
	return best, bestPlan, bestToks, nil
}

// step generates one answer of the model and parses it.
func (s *Session) step(ctx context.Context, plan *chat.Plan, toks []llama.Token, emit func(Event) bool) (chat.Message, error) {
	params := s.o.Sampling.Clone()
	engine.SetChatGrammar(s.m, &params, plan)
	st := plan.NewStream()
	var out strings.Builder
	stopped := false
	send := func(d chat.Delta) bool {
		if d.Content == "" && d.ReasoningContent == "" {
			return true
		}
		if !emit(Event{Content: d.Content, Reasoning: d.ReasoningContent}) {
			stopped = true
			return false
		}
		return true
	}
	limited, err := s.r.generate(ctx, toks, genOptions{params: params, maxTokens: s.o.MaxTokens, stop: s.o.Stop,
		special: len(plan.PreservedTokens) > 0}, func(text string) bool {
		out.WriteString(text)
		return send(st.Push(text))
	})
	if stopped {
		return chat.Message{}, errStopped
	}
	if err != nil {
		return chat.Message{}, err
	}
	if !send(st.Finish(limited)) {
		return chat.Message{}, errStopped
	}
	msg := plan.ParseOutput(out.String())
	msg.Role = chat.RoleAssistant
	return msg, nil
}
