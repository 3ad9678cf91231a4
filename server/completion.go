package server

// llama.cpp's native completion endpoint: POST /completion (and
// /completions). The prompt is a string, token ids, a mix of both, or an
// array of prompts (answered with an array of results); with "stream" the
// tokens are sent as Server-Sent Events.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/x/llama/engine"

	"github.com/x/llama"
)

// genRequest is a parsed generation request: one task per prompt.
type genRequest struct {
	inst    *instance
	prompts [][]llama.Token
	task    *engine.Request
	opt     genOptions
}

// tasks returns one task per prompt.
func (g *genRequest) tasks() []*engine.Request {
	out := make([]*engine.Request, len(g.prompts))
	for i, p := range g.prompts {
		t := *g.task
		t.Prompt = p
		out[i] = &t
	}
	return out
}

// startTasks submits tasks and waits for the first event of each, so
// that a failure is answered with its HTTP status. On failure the tasks
// end when the caller cancels ctx.
func (s *Server) startTasks(ctx context.Context, inst *instance, tasks []*engine.Request) (eventStream, error) {
	st, err := s.runTask(ctx, inst, tasks...)
	if err != nil {
		return nil, err
	}
	return peekEvents(ctx, st, len(tasks))
}

// readModel reads the optional "model" field.
func readModel(f reqFields) (string, error) {
	var model string
	if err := f.str("model", &model); err != nil {
		return "", err
	}
	return model, nil
}

// decodeAndAcquire decodes the body into req and acquires the instance
// that *model (a field of req) names. Unless it fails, release must be
// called.
func (s *Server) decodeAndAcquire(r *http.Request, req any, model *string) (inst *instance, release func(), err error) {
	if err := decodeJSON(r, req); err != nil {
		return nil, nil, err
	}
	return s.instanceFor(r, *model)
}

// requestInstance reads the body as reqFields and acquires the instance
// its optional "model" field names. Unless it fails, release must be
// called.
func (s *Server) requestInstance(r *http.Request) (f reqFields, inst *instance, release func(), err error) {
	if err := decodeJSON(r, &f); err != nil {
		return nil, nil, nil, err
	}
	model, err := readModel(f)
	if err != nil {
		return nil, nil, nil, err
	}
	inst, release, err = s.instanceFor(r, model)
	if err != nil {
		return nil, nil, nil, err
	}
	return f, inst, release, nil
}

// generationHandler serves a text generation endpoint: parse reads the
// body, the tasks are started, and answer writes the response from their
// events (ctx ends with the request). Errors before answer, and answer's
// own before it writes, are answered with their status.
func generationHandler(parse func(reqFields, *instance) (*genRequest, error),
	answer func(ctx context.Context, w http.ResponseWriter, f reqFields, g *genRequest, st eventStream) error) func(*Server) handlerFunc {
	return func(s *Server) handlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			f, inst, release, err := s.requestInstance(r)
			if err != nil {
				return err
			}
			defer release()
			g, err := parse(f, inst)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			st, err := s.startTasks(ctx, inst, g.tasks())
			if err != nil {
				return err
			}
			return answer(ctx, w, f, g, st)
		}
	}
}

// answerCompletion writes /completion's response.
func answerCompletion(ctx context.Context, w http.ResponseWriter, _ reqFields, g *genRequest, st eventStream) error {
	if g.opt.Stream {
		streamNative(ctx, w, g, st)
		return nil
	}
	res, err := collect(ctx, g.inst.Model, st, len(g.prompts))
	if err != nil {
		return err
	}
	results := make([]any, len(res))
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

// parseCompletionRequest reads a /completion body.
func parseCompletionRequest(f reqFields, inst *instance) (*genRequest, error) {
	if !f.has("prompt") {
		return nil, badRequest(`"prompt" is required`)
	}
	t, opt, err := parseGeneration(f, inst, inst.Opts.NPredict)
	if err != nil {
		return nil, err
	}
	// return_progress: prompt progress chunks in a stream.
	if err := f.bool("return_progress", &t.ReturnProgress); err != nil {
		return nil, err
	}
	t.ReturnProgress = t.ReturnProgress && opt.Stream
	if jsonKind(f["prompt"]) == 'o' {
		// {"prompt_string", "multimodal_data"}: see multimodal.go.
		toks, err := inst.completionMediaPrompt(f["prompt"], t)
		if err != nil {
			return nil, err
		}
		return &genRequest{inst: inst, prompts: [][]llama.Token{toks}, task: t, opt: opt}, nil
	}
	prompts, err := parsePrompts(f["prompt"], "prompt", inst)
	if err != nil {
		return nil, err
	}
	return &genRequest{inst: inst, prompts: prompts, task: t, opt: opt}, nil
}

// promptText is the prompt as text, special tokens included.
func promptText(m *llama.Model, toks []llama.Token) string {
	s, err := m.Detokenize(toks, llama.DetokenizeOptions{UnparseSpecial: true})
	if err != nil {
		return ""
	}
	return s
}

// nativeFinal is the last object of a native completion.
func nativeFinal(g *genRequest, idx int, res *completionResult, stream bool) any {
	ev := res.Final
	content, tokens := res.Text, res.Tokens
	if stream {
		content, tokens = "", nil
	}
	if !g.opt.ReturnTokens && !stream {
		tokens = nil
	}
	if tokens == nil {
		tokens = []llama.Token{}
	}
	obj := map[string]any{
		"index":               idx,
		"content":             content,
		"tokens":              tokens,
		"id_slot":             ev.SlotID,
		"stop":                true,
		"model":               g.inst.Name,
		"tokens_predicted":    ev.Generated,
		"tokens_evaluated":    ev.PromptTokens,
		"generation_settings": g.opt.Settings,
		"prompt":              promptText(g.inst.Model, g.prompts[idx]),
		"has_new_line":        strings.Contains(res.Text, "\n"),
		"truncated":           ev.Truncated,
		"stop_type":           stopType(ev.Stop),
		"stopping_word":       ev.StoppingWord,
		"tokens_cached":       ev.SlotTokens,
		"timings":             wireTimings(ev.Timings),
	}
	if !stream && g.task.Params.NProbs > 0 {
		obj["completion_probabilities"] = probsJSON(g.inst.Model, res.Steps, g.opt.PostSamplingProbs)
	}
	if len(g.opt.ResponseFields) > 0 {
		return pickFields(obj, g.opt.ResponseFields)
	}
	return obj
}

func stopType(r engine.StopReason) string {
	if r == engine.StopNone {
		return "none"
	}
	return string(r)
}

// pickFields keeps the given fields of obj; "a/b" takes field b of the
// object a and names it "a/b". Missing fields are left out.
func pickFields(obj map[string]any, fields []string) map[string]any {
	// Round-trip through JSON so nested values are plain maps.
	var plain map[string]any
	b, err := json.Marshal(obj)
	if err != nil || json.Unmarshal(b, &plain) != nil {
		return obj
	}
	out := map[string]any{}
	for _, f := range fields {
		var cur any = plain
		found := true
		for _, part := range strings.Split(f, "/") {
			m, ok := cur.(map[string]any)
			if !ok {
				found = false
				break
			}
			if cur, ok = m[part]; !ok {
				found = false
				break
			}
		}
		if found {
			out[f] = cur
		}
	}
	return out
}

// streamNative sends a native completion as Server-Sent Events: one chunk
// per piece of text, then the final object of each prompt.
func streamNative(ctx context.Context, w http.ResponseWriter, g *genRequest, events eventStream) {
	sse, _ := sseStart(ctx, w)
	type state struct {
		tokens []llama.Token
		text   strings.Builder
		steps  []step
		n      int
	}
	states := make([]state, len(g.prompts))
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
			chunk := map[string]any{
				"index": idx, "content": "", "tokens": []llama.Token{}, "stop": false, "id_slot": ev.SlotID,
				"tokens_predicted": 0, "tokens_evaluated": len(g.prompts[idx]), "prompt_progress": wireProgress(ev.Progress),
			}
			if g.opt.TimingsPerToken {
				chunk["timings"] = wireTimings(ev.Timings)
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
		if nProbs > 0 {
			st.steps = append(st.steps, step{Token: ev.Token, Text: ev.Text, Sampled: ev.Sampled, Probs: ev.Probs})
		}
		if ev.Text == "" && nProbs == 0 {
			continue // held back: sent with the next text
		}
		chunk := map[string]any{
			"index":            idx,
			"content":          ev.Text,
			"tokens":           nonNilTokens(st.tokens),
			"stop":             false,
			"id_slot":          ev.SlotID,
			"tokens_predicted": st.n,
			"tokens_evaluated": len(g.prompts[idx]),
		}
		st.tokens = nil
		if g.opt.TimingsPerToken {
			chunk["timings"] = wireTimings(ev.Timings)
		}
		if nProbs > 0 {
			chunk["completion_probabilities"] = probsJSON(g.inst.Model, st.steps, g.opt.PostSamplingProbs)
			st.steps = nil
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
