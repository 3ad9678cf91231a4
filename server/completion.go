package server

// llama.cpp's native completion endpoint: POST /completion (and
// /completions). The prompt is a string, token ids, a mix of both, or an
// array of prompts (answered with an array of results); with "stream" the
// tokens are sent as Server-Sent Events.

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama"
)

// genRequest is a parsed generation request: n tasks per prompt.
type genRequest struct {
	inst    *instance
	prompts [][]llama.Token
	task    *engine.Request
	opt     genOptions
	// echo puts each prompt before its answer (OpenAI's completions).
	echo bool
	// n is the number of completions of each prompt (n_cmpl, a chat's
	// n; 0: one).
	n int
}

// perPrompt is the number of completions of each prompt.
func (g *genRequest) perPrompt() int { return max(g.n, 1) }

// count is the number of tasks, and of answers.
func (g *genRequest) count() int { return len(g.prompts) * g.perPrompt() }

// prompt is the prompt of task (and answer) i.
func (g *genRequest) prompt(i int) []llama.Token { return g.prompts[i/g.perPrompt()] }

// tasks returns the tasks: n per prompt, in the order of the prompts, the
// completions of one prompt together, each with the seed of its choice
// (choiceSeed), as llama-server numbers a prompt's child tasks.
func (g *genRequest) tasks() []*engine.Request {
	out := make([]*engine.Request, g.count())
	for i := range out {
		t := *g.task
		t.Prompt = g.prompt(i)
		t.Params.Seed = choiceSeed(t.Params.Seed, i%g.perPrompt())
		out[i] = &t
	}
	return out
}

// choiceSeed is the seed of choice i of a chat with n choices: a seed
// given is choice 0's, and choice i draws with the i-th seed after it
// (passing over llama.DefaultSeed), so that the choices differ and each
// repeats, as llama-server's do; without one every choice draws at random.
func choiceSeed(seed uint32, i int) uint32 {
	if seed == llama.DefaultSeed {
		return seed
	}
	for range i {
		if seed++; seed == llama.DefaultSeed {
			seed++
		}
	}
	return seed
}

// completionsPerPrompt reads n_cmpl, or n when n_cmpl is not given (as
// llama-server, whose n is n_cmpl's fallback): 1 to the number of slots.
func completionsPerPrompt(nCmpl, n *wire.Num, slots int) (int, error) {
	out := 1
	if nCmpl.Set {
		return out, nCmpl.Int(&out, 1, int64(max(1, slots)))
	}
	return out, n.Int(&out, 1, int64(max(1, slots)))
}

// startTasks submits tasks (runTask) and waits for the first event of
// each, so that a failure is answered with its HTTP status. For a
// streaming response (sw: the response it streams to; nil for others)
// it waits no longer than the stream's ping interval (Options.SSEPing):
// past it (a long prompt), it opens the stream, whose pings keep the
// client, and a failure is then sent in the stream, the error being
// errStreamed. On failure the tasks end when the caller cancels ctx.
func (s *Server) startTasks(ctx context.Context, inst *instance, arrived func(), tasks []*engine.Request, sw http.ResponseWriter) (eventStream, error) {
	st, err := s.runTask(ctx, inst, arrived, tasks...)
	if err != nil {
		return nil, err
	}
	return peekOrOpen(ctx, sw, st, len(tasks))
}

// peekOrOpen is peekEvents for startTasks: for a streaming response (sw
// not nil) it waits no longer than the ping interval before it opens the
// stream, and sends a failure that comes later in the stream
// (errStreamed).
func peekOrOpen(ctx context.Context, sw http.ResponseWriter, st eventStream, n int) (eventStream, error) {
	every := sseEvery(ctx)
	if sw == nil || every <= 0 {
		return peekEvents(ctx, st, n)
	}
	type peeked struct {
		st  eventStream
		err error
	}
	done := make(chan peeked, 1)
	go func() {
		var p peeked
		defer func() {
			if v := recover(); v != nil {
				p = peeked{nil, llama.NewPanicError("server: first events", v)}
			}
			done <- p
		}()
		p.st, p.err = peekEvents(ctx, st, n)
	}()
	t := time.NewTimer(every)
	defer t.Stop()
	select {
	case p := <-done:
		return p.st, p.err
	case <-t.C:
	}
	sse := sseOpen(ctx, sw)
	sse.comment() // the headers, now
	p := <-done
	if p.err != nil {
		sse.fail(p.err)
		return nil, errStreamed
	}
	return p.st, nil
}

// namedModel is a typed request body naming its model.
type namedModel interface{ ModelName() (string, error) }

// decodeAndAcquire decodes the body into req and acquires the instance
// that *model (a field of req) names. Unless it fails, release must be
// called.
func (s *Server) decodeAndAcquire(r *http.Request, req any, model *string) (inst *instance, release func(), err error) {
	if err := decodeJSON(r, req); err != nil {
		return nil, nil, err
	}
	return s.instanceFor(r, *model)
}

// requestInstance decodes the body into req, a typed request (see
// wire.Decode), and acquires the instance its optional "model" field
// names. Unless it fails, release must be called.
func (s *Server) requestInstance(r *http.Request, req namedModel) (inst *instance, release func(), err error) {
	if err := decodeBody(r, req); err != nil {
		return nil, nil, err
	}
	model, err := req.ModelName()
	if err != nil {
		return nil, nil, err
	}
	return s.instanceFor(r, model)
}

// decodeBody decodes r's body into req, a pointer to a typed request (see
// wire.Decode), within the server's bounds of a body (decodeJSON).
func decodeBody(r *http.Request, req any) error {
	var f wire.Fields
	if err := decodeJSON(r, &f); err != nil {
		return err
	}
	wire.DecodeFields(f, req)
	return nil
}

// generationHandler serves a text generation endpoint whose body is an R:
// parse reads it, the tasks are started, and answer writes the response
// from their events (ctx ends with the request). Errors before answer, and
// answer's own before it writes, are answered with their status.
func generationHandler[R any, P interface {
	*R
	namedModel
}](parse func(P, *instance) (*genRequest, error),
	answer func(ctx context.Context, w http.ResponseWriter, req P, g *genRequest, st eventStream) error) func(*Server) handlerFunc {
	return func(s *Server) handlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			req := P(new(R))
			inst, release, err := s.requestInstance(r, req)
			if err != nil {
				return err
			}
			defer release()
			arrived := inst.Engine.Expect()
			defer arrived()
			g, err := parse(req, inst)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			st, err := s.startTasks(ctx, inst, arrived, g.tasks(), streamTo(w, g.opt.Stream))
			if err != nil {
				return err
			}
			return answer(ctx, w, req, g, st)
		}
	}
}

// answerCompletion writes /completion's response.
func answerCompletion(ctx context.Context, w http.ResponseWriter, _ *completionBody, g *genRequest, st eventStream) error {
	if g.opt.Stream {
		streamNative(ctx, w, g, st)
		return nil
	}
	res, err := collect(ctx, g.inst.Model, st, g.count())
	if err != nil {
		return err
	}
	results := make([]any, len(res)) // nativeResult, or maps of response_fields
	for i, r := range res {
		results[i] = nativeFinal(g, i, r, false)
	}
	if len(results) == 1 {
		writeJSON(w, http.StatusOK, results[0])
		return nil
	}
	writeJSON(w, http.StatusOK, results)
	return nil
}

// completionBody is a /completion body.
type completionBody struct {
	wire.ModelField
	wire.Gen
	// Prompt is a string, token ids, a mix of both, an object with a
	// prompt_string, or an array of those (see parsePrompts).
	Prompt json.RawMessage `json:"prompt"`
	// NCmpl, or N without it, is the number of completions of each
	// prompt (completionsPerPrompt).
	NCmpl wire.Num `json:"n_cmpl"`
	N     wire.Num `json:"n"`
}

// parseCompletionRequest reads a /completion body.
func parseCompletionRequest(b *completionBody, inst *instance) (*genRequest, error) {
	if len(b.Prompt) == 0 {
		return nil, badRequest(`"prompt" is required`)
	}
	t, opt, err := inst.generation(&b.Gen, inst.Opts.NPredict)
	if err != nil {
		return nil, err
	}
	n, err := completionsPerPrompt(&b.NCmpl, &b.N, inst.Engine.Slots())
	if err != nil {
		return nil, err
	}
	if wire.Kind(b.Prompt) == 'o' {
		// {"prompt_string", "multimodal_data"}: see multimodal.go.
		toks, err := inst.completionMediaPrompt(b.Prompt, t)
		if err != nil {
			return nil, err
		}
		return &genRequest{inst: inst, prompts: [][]llama.Token{toks}, task: t, opt: opt, n: n}, nil
	}
	prompts, err := parsePrompts(b.Prompt, "prompt", inst)
	if err != nil {
		return nil, err
	}
	return &genRequest{inst: inst, prompts: prompts, task: t, opt: opt, n: n}, nil
}

// promptText is the prompt as text, special tokens included, and media
// (runs of engine.MediaPlaceholder) as media: "" leaves them out, as
// llama-server's prompt text does.
func promptText(m *llama.Model, toks []llama.Token, media string) string {
	var b strings.Builder
	for part := range splitMedia(toks) {
		if part == nil {
			b.WriteString(media)
			continue
		}
		s, err := m.Detokenize(part, llama.DetokenizeOptions{UnparseSpecial: true})
		if err != nil {
			return ""
		}
		b.WriteString(s)
	}
	return b.String()
}

// nativeResult is a native completion's answer, and the last event of
// its stream. Its fields are in the order of their names, as
// llama-server's JSON objects are.
type nativeResult struct {
	CompletionProbabilities []wire.Prob    `json:"completion_probabilities,omitzero"`
	Content                 string         `json:"content"`
	GenerationSettings      map[string]any `json:"generation_settings"`
	HasNewLine              bool           `json:"has_new_line"`
	IDSlot                  int            `json:"id_slot"`
	Index                   int            `json:"index"`
	Model                   string         `json:"model"`
	Prompt                  string         `json:"prompt"`
	Stop                    bool           `json:"stop"`
	StopType                string         `json:"stop_type"`
	StoppingWord            string         `json:"stopping_word"`
	Timings                 *wire.Timings  `json:"timings"`
	Tokens                  []llama.Token  `json:"tokens"`
	TokensCached            int            `json:"tokens_cached"`
	TokensEvaluated         int            `json:"tokens_evaluated"`
	TokensPredicted         int            `json:"tokens_predicted"`
	Truncated               bool           `json:"truncated"`
}

// nativeChunk is an event of a native completion's stream: a piece of
// text, or the prompt's progress.
type nativeChunk struct {
	CompletionProbabilities []wire.Prob    `json:"completion_probabilities,omitzero"`
	Content                 string         `json:"content"`
	IDSlot                  int            `json:"id_slot"`
	Index                   int            `json:"index"`
	PromptProgress          *wire.Progress `json:"prompt_progress,omitempty"`
	Stop                    bool           `json:"stop"`
	Timings                 *wire.Timings  `json:"timings,omitempty"`
	Tokens                  []llama.Token  `json:"tokens"`
	TokensEvaluated         int            `json:"tokens_evaluated"`
	TokensPredicted         int            `json:"tokens_predicted"`
}

// nativeFinal is the last object of a native completion: a nativeResult,
// or the fields of it response_fields names.
func nativeFinal(g *genRequest, idx int, res *completionResult, stream bool) any {
	ev := res.Final
	content, tokens := res.Text, res.Tokens
	if stream {
		content, tokens = "", nil
	}
	if !g.opt.ReturnTokens && !stream {
		tokens = nil
	}
	out := nativeResult{
		Index:              idx,
		Content:            content,
		Tokens:             nonNilTokens(tokens),
		IDSlot:             ev.SlotID,
		Stop:               true,
		Model:              g.inst.Name,
		TokensPredicted:    ev.Generated,
		TokensEvaluated:    ev.PromptTokens,
		GenerationSettings: g.opt.Settings,
		Prompt:             promptText(g.inst.Model, g.prompt(idx), ""),
		HasNewLine:         strings.Contains(res.Text, "\n"),
		Truncated:          ev.Truncated,
		StopType:           stopType(ev.Stop),
		StoppingWord:       ev.StoppingWord,
		TokensCached:       ev.SlotTokens,
		Timings:            wire.NewTimings(ev.Timings),
	}
	if !stream && g.task.Params.NProbs > 0 {
		out.CompletionProbabilities = wire.CharProbs(res.Steps, g.opt.PostSamplingProbs)
	}
	if len(g.opt.ResponseFields) > 0 {
		return pickFields(out, g.opt.ResponseFields)
	}
	return out
}

func stopType(r engine.StopType) string {
	if r == engine.StopTypeNone {
		return "none"
	}
	return string(r)
}

// pickFields keeps the members of v that fields name, as llama-server's
// response_fields: "a/b" takes member b of the object a and names it
// "a/b". Missing members are left out.
func pickFields(v any, fields []string) map[string]any {
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		cur, found := reflect.ValueOf(v), true
		for part := range strings.SplitSeq(f, "/") {
			if cur, found = jsonMember(cur, part); !found {
				break
			}
		}
		if found {
			out[f] = cur.Interface()
		}
	}
	return out
}

// jsonMember returns the member name of the object v is in JSON: the
// field of a struct of that JSON name (unless left out for being empty),
// or the entry of a map.
func jsonMember(v reflect.Value, name string) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}, false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return reflect.Value{}, false
		}
		e := v.MapIndex(reflect.ValueOf(name).Convert(v.Type().Key()))
		return e, e.IsValid()
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			tag, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if tag != name || !sf.IsExported() {
				continue
			}
			fv := v.Field(i)
			omit := strings.Contains(","+opts+",", ",omitzero,") && fv.IsZero()
			if strings.Contains(","+opts+",", ",omitempty,") {
				switch fv.Kind() {
				case reflect.Slice, reflect.Map, reflect.String, reflect.Array:
					omit = omit || fv.Len() == 0
				default:
					omit = omit || fv.IsZero()
				}
			}
			return fv, !omit
		}
	}
	return reflect.Value{}, false
}

// streamNative sends a native completion as Server-Sent Events: one chunk
// per piece of text, then the final object of each prompt.
func streamNative(ctx context.Context, w http.ResponseWriter, g *genRequest, events eventStream) {
	sse := sseOpen(ctx, w) // the first event is at hand: the headers go with it
	type state struct {
		tokens []llama.Token
		text   strings.Builder
		n      int
		held   string // text of tokens without an entry, sent with the next
	}
	states := make([]state, g.count())
	nProbs := g.task.Params.NProbs
	for events.Next() {
		ev, idx := events.Event(), events.Index()
		st := &states[idx]
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Done {
			res := &completionResult{Text: st.text.String(), Final: ev}
			if err := sse.data(nativeFinal(g, idx, res, true)); err != nil {
				return
			}
			continue
		}
		if ev.Progress != nil {
			chunk := nativeChunk{
				Index: idx, Tokens: []llama.Token{}, IDSlot: ev.SlotID,
				TokensEvaluated: len(g.prompt(idx)), PromptProgress: wire.NewProgress(ev.Progress),
			}
			if g.opt.TimingsPerToken {
				chunk.Timings = wire.NewTimings(ev.Timings)
			}
			if err := sse.data(chunk); err != nil {
				return
			}
			continue
		}
		st.n++
		if !g.inst.Model.IsEOG(ev.Token) {
			st.tokens = append(st.tokens, ev.Token)
		}
		st.text.WriteString(ev.Text)
		var prob wire.Prob
		if nProbs > 0 {
			// As llama-server: no event for a token that leaves a
			// character incomplete; the one that completes it carries it.
			var whole bool
			if prob, whole = wire.CharProb(wire.StepOf(ev), st.held, g.opt.PostSamplingProbs); !whole {
				st.held += ev.Text
				continue
			}
		} else if ev.Text == "" {
			continue // held back: sent with the next text
		}
		chunk := nativeChunk{
			Index:           idx,
			Content:         st.held + ev.Text,
			Tokens:          nonNilTokens(st.tokens),
			IDSlot:          ev.SlotID,
			TokensPredicted: st.n,
			TokensEvaluated: len(g.prompt(idx)),
		}
		st.tokens, st.held = nil, ""
		if g.opt.TimingsPerToken {
			chunk.Timings = wire.NewTimings(ev.Timings)
		}
		if nProbs > 0 {
			chunk.CompletionProbabilities = []wire.Prob{prob}
		}
		if err := sse.data(chunk); err != nil {
			return
		}
	}
}

func nonNilTokens(t []llama.Token) []llama.Token {
	if t == nil {
		return []llama.Token{}
	}
	return t
}
