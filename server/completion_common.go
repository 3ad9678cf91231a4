package server

// Helpers shared by the generation endpoints (/completion, /v1/completions,
// /v1/chat/completions) and reusable by the others (Responses, Anthropic,
// infill):
//
//   - (*instance).tokenizePrompt(text): text to prompt tokens (BOS added as
//     the model wants, special token text parsed).
//   - (*instance).renderChat(msgs, tools, addGen, extra): the chat
//     template applied with the model's BOS/EOS texts; a leading BOS text is
//     stripped when tokenizing adds it anyway.
//   - (*instance).slotContext(): the context size of one slot.
//   - (*Server).runTask(ctx, inst, t): checks the prompt against the
//     context (exceed_context_size_error) and submits the task (engine.ErrBusy →
//     503); errors are *httpError.
//   - httpError, badRequest, writeHTTPError(w, err): errors with an HTTP
//     status and llama.cpp's error type.
//   - sseStart(w): a Server-Sent Events writer ("data: {json}\n\n").
//   - peekEvents(ctx, events): waits for the first event so that a task
//     failing at once gets an HTTP error status instead of a broken stream.
//   - collect(ctx, model, events): reads a task's events into a
//     completionResult (text, tokens, probabilities, the Done event).
//   - probsJSON(model, steps, post): llama.cpp's probability objects.
//   - parseFields / parseGeneration / parsePrompts (params.go): the
//     request body as reqFields, llama.cpp's generation parameters, prompts.
//   - parseChatRequest(f, inst) and (*instance).prepareChat(req, t)
//     (chat_handlers.go): an OpenAI chat body to a task, its grammar (tools,
//     response_format) and the chat.ParseOptions to read the output with.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/x/llama/engine"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// httpError is an error answered with a status and an error type.
type httpError struct {
	Status int
	Type   string
	Msg    string
	// Extra fields of the error object (n_prompt_tokens and n_ctx for
	// exceed_context_size_error).
	Extra map[string]any
	// Err is the cause, if any.
	Err error
}

func (e *httpError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *httpError) Unwrap() error { return e.Err }

// badRequest is a 400 invalid_request_error.
func badRequest(format string, args ...any) *httpError {
	return &httpError{Status: http.StatusBadRequest, Type: "invalid_request_error", Msg: fmt.Sprintf(format, args...)}
}

// errorObject is the JSON body of an error answer.
func errorObject(err error) (int, map[string]any) {
	var he *httpError
	var ce *engine.ContextSizeError
	switch {
	case errors.As(err, &he):
	case errors.As(err, &ce):
		he = exceedContext(ce.PromptTokens, ce.CtxSize)
	case errors.Is(err, engine.ErrBusy):
		he = &httpError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Msg: err.Error()}
	case errors.Is(err, llama.ErrInvalid), errors.Is(err, llama.ErrGrammar):
		he = badRequest("%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		he = &httpError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Msg: "request canceled: " + err.Error()}
	default:
		he = &httpError{Status: http.StatusInternalServerError, Type: "server_error", Msg: err.Error()}
	}
	obj := map[string]any{"code": he.Status, "message": he.Msg, "type": he.Type}
	for k, v := range he.Extra {
		obj[k] = v
	}
	return he.Status, map[string]any{"error": obj}
}

// writeHTTPError answers with err's status and error object.
func writeHTTPError(w http.ResponseWriter, err error) {
	status, body := errorObject(err)
	writeJSON(w, status, body)
}

// tokenizePrompt tokenizes prompt text the way llama.cpp does: the model's
// special tokens added (BOS) and special token text parsed.
func (inst *instance) tokenizePrompt(text string) ([]llama.Token, error) {
	if err := inst.checkPromptText(text); err != nil {
		return nil, err
	}
	toks, err := tokenizeText(inst.Model, text, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return nil, badRequest("cannot tokenize the prompt: %v", err)
	}
	return toks, nil
}

// specialText returns a special token's text ("" when absent).
func (inst *instance) specialText(t llama.Token) string {
	if t == llama.NoToken {
		return ""
	}
	s, err := inst.Model.TokenPiece(t, true)
	if err != nil {
		return ""
	}
	return s
}

// renderChat applies the instance's chat template. A BOS text the template
// writes at the start is removed when the tokenizer adds BOS itself, so the
// prompt does not start with two. Template errors are 400s.
func (inst *instance) renderChat(msgs []chat.Message, tools []chat.Tool, addGen bool, extra map[string]any) (string, error) {
	sp := inst.Model.SpecialTokens()
	bos, eos := inst.specialText(sp.BOS), inst.specialText(sp.EOS)
	tmpl := inst.template(len(tools) > 0)
	out, err := tmpl.Render(chat.TemplateInput{
		Messages: msgs, Tools: tools, AddGenerationPrompt: addGen,
		BOSToken: bos, EOSToken: eos, Extra: inst.templateKwargs(tmpl, extra),
	})
	if err != nil {
		return "", badRequest("cannot apply the chat template: %v", err)
	}
	if sp.AddBOS && bos != "" {
		out = strings.TrimPrefix(out, bos)
	}
	return out, nil
}

// templateKwargs returns extra with enable_thinking set as llama.cpp sets
// it when the request does not: true with --reasoning on, false with off,
// and with auto (the default) whether the template reacts to it.
func (inst *instance) templateKwargs(tmpl promptRenderer, extra map[string]any) map[string]any {
	if _, ok := extra["enable_thinking"]; ok {
		return extra
	}
	out := make(map[string]any, len(extra)+1)
	for k, v := range extra {
		out[k] = v
	}
	switch inst.Opts.Reasoning {
	case "on":
		out["enable_thinking"] = true
	case "off":
		out["enable_thinking"] = false
	default:
		out["enable_thinking"] = tmpl.Caps().SupportsThinking
	}
	return out
}

// slotContext is the context size one task can use.
func (inst *instance) slotContext() int {
	if slots := inst.Engine.SlotsInfo(); len(slots) > 0 && slots[0].NCtx > 0 {
		return slots[0].NCtx
	}
	if o := inst.Opts.Engine; o.CtxSize > 0 {
		{
			if o.Parallel > 1 && !o.KVUnified {
				return o.CtxSize / o.Parallel
			}
			return o.CtxSize
		}
	}
	return inst.Model.TrainContext()
}

// exceedContext is llama.cpp's error for a prompt that does not fit.
func exceedContext(nPrompt, nCtx int) *httpError {
	return &httpError{
		Status: http.StatusBadRequest, Type: "exceed_context_size_error",
		Msg:   fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", nPrompt, nCtx),
		Extra: map[string]any{"n_prompt_tokens": nPrompt, "n_ctx": nCtx},
	}
}

// runTask checks t's prompt against the context and submits it. Cancelling
// ctx (the request's context) cancels the task.
func (s *Server) runTask(ctx context.Context, inst *instance, t *engine.Request) (<-chan engine.Event, error) {
	if t.Kind == engine.KindCompletion {
		if err := inst.limitTask(t); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err // the client left while the request was prepared
		}
		if len(t.Prompt) == 0 {
			return nil, badRequest("the prompt is empty")
		}
		if n := inst.slotContext(); len(t.Prompt) >= n {
			return nil, exceedContext(len(t.Prompt), n)
		}
	}
	ch, err := inst.Engine.Submit(ctx, t)
	if err != nil {
		if errors.Is(err, engine.ErrBusy) {
			return nil, &httpError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Msg: err.Error(), Err: err}
		}
		return nil, err
	}
	return ch, nil
}

// sseWriter writes Server-Sent Events.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// sseStart sends the event-stream headers.
func sseStart(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// data sends one "data:" event with v as JSON (a string is sent as is).
func (s *sseWriter) data(v any) error { return s.event("data", v) }

// event sends "field: payload".
func (s *sseWriter) event(field string, v any) error {
	var payload []byte
	if str, ok := v.(string); ok {
		payload = []byte(str)
	} else {
		var err error
		payload, err = json.Marshal(v)
		if err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "%s: %s\n\n", field, payload); err != nil {
		return err
	}
	return s.rc.Flush()
}

// sendError sends an error in a stream the way llama.cpp does: a data
// event holding {"error": {...}}.
func (s *sseWriter) sendError(err error) {
	_, body := errorObject(err)
	_ = s.data(body)
}

// peekEvents waits for a task's first event, so that a task failing at
// once is answered with an HTTP error status rather than inside a stream
// already started. It returns the events, the first one included.
func peekEvents(ctx context.Context, ch <-chan engine.Event) (<-chan engine.Event, error) {
	var first engine.Event
	select {
	case ev, ok := <-ch:
		if !ok {
			return nil, errors.New("the engine ended the task without a result")
		}
		first = ev
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if first.Err != nil {
		return nil, first.Err
	}
	out := make(chan engine.Event, 1)
	out <- first
	go func() {
		defer close(out)
		for ev := range ch {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// step is one generated token and its probabilities.
type step struct {
	Token   llama.Token
	Text    string
	Sampled *engine.TokenProb
	Probs   []engine.TokenProb
}

// completionResult is a finished task's output.
type completionResult struct {
	Text   string
	Tokens []llama.Token
	Steps  []step       // only with n_probs
	Final  engine.Event // the Done event
}

// collect reads events until the task ends; end-of-generation tokens of m
// are left out of Tokens. An engine.Event.Err, or ctx ending first, is returned
// as the error.
func collect(ctx context.Context, m *llama.Model, events <-chan engine.Event) (*completionResult, error) {
	var res completionResult
	var sb strings.Builder
	for ev := range events {
		if ev.Err != nil {
			return nil, ev.Err
		}
		if ev.Progress != nil {
			continue
		}
		if ev.Done {
			res.Final = ev
			break
		}
		sb.WriteString(ev.Text)
		if m == nil || !m.IsEOG(ev.Token) {
			res.Tokens = append(res.Tokens, ev.Token)
		}
		if ev.Sampled != nil || len(ev.Probs) > 0 {
			res.Steps = append(res.Steps, step{Token: ev.Token, Text: ev.Text, Sampled: ev.Sampled, Probs: ev.Probs})
		}
	}
	res.Text = sb.String()
	if !res.Final.Done {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("the engine ended the task without a result")
	}
	return &res, nil
}

// probJSON is one token probability in llama.cpp's shape: logprob and
// top_logprobs, or with post_sampling_probs prob and top_probs.
type probJSON struct {
	ID          llama.Token `json:"id"`
	Token       string      `json:"token"`
	Bytes       []int       `json:"bytes"`
	Logprob     *float64    `json:"logprob,omitempty"`
	Prob        *float64    `json:"prob,omitempty"`
	TopLogprobs []probJSON  `json:"top_logprobs,omitempty"`
	TopProbs    []probJSON  `json:"top_probs,omitempty"`
}

// safeLog is log(x) with log(0) as the lowest float32 (JSON has no -inf).
func safeLog(x float32) float64 {
	if x <= 0 {
		return -math.MaxFloat32
	}
	return math.Log(float64(x))
}

func finiteLog(l float32) float64 {
	if math.IsInf(float64(l), 0) || math.IsNaN(float64(l)) {
		return -math.MaxFloat32
	}
	return float64(l)
}

func tokenProbJSON(m *llama.Model, tp engine.TokenProb, post bool) probJSON {
	text := tp.Text
	if text == "" {
		text, _ = m.TokenPiece(tp.Token, true)
	}
	pj := probJSON{ID: tp.Token, Token: validPrefix(text), Bytes: byteInts(text)}
	if post {
		v := float64(tp.Prob)
		pj.Prob = &v
	} else {
		v := finiteLog(tp.Logprob)
		if tp.Logprob == 0 && tp.Prob != 0 && tp.Prob != 1 {
			v = safeLog(tp.Prob)
		}
		pj.Logprob = &v
	}
	return pj
}

// probsJSON converts steps to llama.cpp's completion_probabilities.
func probsJSON(m *llama.Model, steps []step, post bool) []probJSON {
	out := make([]probJSON, 0, len(steps))
	for _, s := range steps {
		sampled := engine.TokenProb{Token: s.Token}
		if s.Sampled != nil {
			sampled = *s.Sampled
		}
		sampled.Text = ""
		pj := tokenProbJSON(m, sampled, post)
		top := make([]probJSON, 0, len(s.Probs))
		for _, p := range s.Probs {
			top = append(top, tokenProbJSON(m, p, post))
		}
		if post {
			pj.TopProbs = top
		} else {
			pj.TopLogprobs = top
		}
		out = append(out, pj)
	}
	return out
}

func byteInts(s string) []int {
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	return b
}

// validPrefix cuts s to its longest valid UTF-8 prefix.
func validPrefix(s string) string {
	for !utf8.ValidString(s) && s != "" {
		s = s[:len(s)-1]
	}
	return s
}
