package server

// OpenAI's chat completions, POST /v1/chat/completions (and
// /chat/completions), and text completions, POST /v1/completions. The
// dialect (its wire types, the translation of a chat body to the internal
// request, the answer and stream shapes) is package
// server/internal/openai; these handlers decode a body, run it (chats
// with startChat, as every chat-shaped endpoint) and write the answer or
// stream.

import (
	"cmp"
	"context"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/openai"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama/chat"
)

// oaiChatRequest is the OpenAI chat dialect from body to task: b
// translated (openai.ToChat) and handed to startChat. allowEmpty accepts a
// conversation without messages (the template renders none).
func oaiChatRequest(inst *instance, b *openai.ChatBody, allowEmpty bool) (*genRequest, *chatPlan, chatOptions, error) {
	req := &wire.Chat{AllowEmpty: allowEmpty}
	if err := oaiToChat(inst, b, req); err != nil {
		return nil, nil, chatOptions{N: 1}, err
	}
	return inst.startChat(req)
}

// oaiToChat translates b into req for inst (see openai.ToChat).
func oaiToChat(inst *instance, b *openai.ChatBody, req *wire.Chat) error {
	return openai.ToChat(b, req, inst.Engine.Slots(), inst.Server.mediaMarker)
}

func handleChatCompletion(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var b openai.ChatBody
		inst, release, err := s.requestInstance(r, &b)
		if err != nil {
			return err
		}
		defer release()
		arrived := inst.Engine.Expect()
		defer arrived()
		g, plan, co, err := oaiChatRequest(inst, &b, false)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		tasks := g.tasks()
		if plan.budget != nil {
			for _, t := range tasks[1:] {
				t.Samplers = plan.samplers() // a sampler per task
			}
		}
		st, err := s.startTasks(ctx, inst, arrived, tasks, streamTo(w, g.opt.Stream))
		if err != nil {
			return err
		}
		base := openai.ChatCompletion{
			ID: wire.NewID("chatcmpl-"), Created: time.Now().Unix(), Model: co.Model,
			SystemFingerprint: openai.SystemFingerprint,
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
		var u openai.Usage
		for i, res := range results {
			msg := chatMessage(plan, res)
			out := openai.AssistantMessage(msg)
			fr := openai.FinishReason(res.Final.Stop, len(out.ToolCalls) > 0)
			choice := openai.ChatChoice{Index: i, Message: out, FinishReason: &fr}
			if co.Logprobs {
				choice.Logprobs = &openai.Logprobs{Content: wire.CharProbs(res.Steps, g.opt.PostSamplingProbs)}
			}
			resp.Choices = append(resp.Choices, choice)
			if i == 0 && g.opt.Verbose {
				resp.Verbose = nativeFinal(g, 0, res, false)
			}
			u.Add(res.Final, i == 0)
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
func streamChat(ctx context.Context, w http.ResponseWriter, g *genRequest, plan *chatPlan, co chatOptions, events eventStream, base openai.ChatCompletion) {
	// startTasks has the first event, and the first chunk (the role, or
	// a progress report) is written at once: the headers go with it.
	sse := sseOpen(ctx, w)
	base.Object = "chat.completion.chunk"
	type choiceState struct {
		parser  *chat.Stream
		deltas  openai.Deltas
		pending []wire.Prob
		held    string // text of tokens without a logprobs entry
		done    bool
	}
	states := make([]*choiceState, co.N)
	for i := range states {
		states[i] = &choiceState{parser: plan.NewStream()}
	}
	send := func(c openai.ChatChoice, tm *wire.Timings) bool {
		chunk := base
		chunk.Choices = []openai.ChatChoice{c}
		chunk.Timings = tm
		return sse.data(chunk) == nil
	}
	// The first chunk gives the role; with return_progress every progress
	// report is such a chunk carrying prompt_progress, as in llama-server.
	if !g.task.ReturnProgress {
		for i := range co.N {
			if !send(openai.ChatChoice{Index: i, Delta: openai.FirstDelta{Role: chat.RoleAssistant}}, nil) {
				return
			}
		}
	}
	emit := func(idx int, st *choiceState, d chat.Delta, tm *wire.Timings) bool {
		if d.Empty() && len(st.pending) == 0 {
			return true
		}
		c := openai.ChatChoice{Index: idx, Delta: st.deltas.Message(d)}
		if co.Logprobs && len(st.pending) > 0 {
			c.Logprobs = &openai.Logprobs{Content: st.pending}
			st.pending = nil
		}
		return send(c, tm)
	}
	var usage openai.Usage
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
			chunk.Choices = []openai.ChatChoice{{Index: idx, Delta: openai.FirstDelta{Role: chat.RoleAssistant}}}
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
			fr := openai.FinishReason(ev.Stop, st.deltas.ToolCalls())
			tm := wire.NewTimings(ev.Timings)
			var finTimings *wire.Timings
			if !co.IncludeUsage {
				finTimings = tm
			}
			if !send(openai.ChatChoice{Index: idx, Delta: &openai.ChatMessage{}, FinishReason: &fr}, finTimings) {
				return
			}
			usage.Add(ev, idx == 0)
			last = *tm
			if left--; left > 0 {
				continue
			}
			if co.IncludeUsage {
				chunk := base
				chunk.Choices = []openai.ChatChoice{}
				chunk.Usage, chunk.Timings = &usage, &last
				if sse.data(chunk) != nil {
					return
				}
			}
			_ = sse.data("[DONE]")
			return
		}
		if co.Logprobs {
			if pj, ok := wire.CharProb(wire.StepOf(ev), st.held, g.opt.PostSamplingProbs); ok {
				st.pending, st.held = append(st.pending, pj), ""
			} else {
				st.held += ev.Text
			}
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

// answerOAICompletion writes /v1/completions' response.
func answerOAICompletion(ctx context.Context, w http.ResponseWriter, b *openai.CompletionBody, g *genRequest, st eventStream) error {
	inst := g.inst
	base := openai.Completion{
		ID: wire.NewID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(),
		Model: cmp.Or(b.Model.V, inst.Name), SystemFingerprint: openai.SystemFingerprint,
	}
	// With logprobs (0 included: each token's own, no alternatives).
	logprobs := g.task.ReportsSampled()
	if g.opt.Stream {
		streamOAICompletion(ctx, w, g, st, base)
		return nil
	}
	results, err := collect(ctx, inst.Model, st, g.count())
	if err != nil {
		return err
	}
	resp := base
	var usage openai.Usage
	for i, res := range results {
		fr := openai.FinishReason(res.Final.Stop, false)
		c := openai.CompletionChoice{Text: res.Text, Index: i, FinishReason: &fr}
		var echo *openai.LegacyLogprobs
		offset := 0
		if g.echo {
			var text string
			text, echo = echoPrompt(inst.Model, g.prompt(i), res.PromptProbs)
			c.Text, offset = text+c.Text, utf8.RuneCountInString(text)
		}
		if logprobs {
			c.Logprobs, _ = openai.NewLegacyLogprobs(inst.Model, res.Steps, offset)
			if echo != nil {
				echo.Append(c.Logprobs)
				c.Logprobs = echo
			}
		}
		resp.Choices = append(resp.Choices, c)
		usage.Add(res.Final, i%g.perPrompt() == 0)
		if i == len(results)-1 {
			resp.Timings = wire.NewTimings(res.Final.Timings)
			if g.opt.Verbose {
				resp.Verbose = nativeFinal(g, i, res, false)
			}
		}
	}
	resp.Usage = &usage
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// echoPrompt is a prompt as echo puts it before its answer: its text and
// its legacy logprobs from pp (nil when the request asked for none).
func echoPrompt(m *llama.Model, prompt []llama.Token, pp []engine.PromptProb) (string, *openai.LegacyLogprobs) {
	// The text is the prompt's words without the BOS the model put before
	// them: llama.cpp's detokenizer drops the space a SentencePiece
	// vocabulary puts before the first word only when the tokens do not
	// start with a BOS, and a string prompt comes back as it was sent.
	words := prompt
	if len(words) > 0 && words[0] == m.SpecialTokens().BOS {
		words = words[1:]
	}
	text, _ := m.Detokenize(words, llama.DetokenizeOptions{})
	if pp == nil {
		return text, nil
	}
	// Each token's offset is the length of the pieces before it, less
	// what detokenizing drops at the start (the space a SentencePiece
	// vocabulary puts before the first word).
	offsets := make([]int, len(prompt))
	n := 0
	for i, tok := range prompt {
		offsets[i] = n
		piece, _ := m.TokenPiece(tok, false)
		n += utf8.RuneCountInString(piece)
	}
	if d := n - utf8.RuneCountInString(text); d > 0 {
		for i := range offsets {
			offsets[i] = max(0, offsets[i]-d)
		}
	}
	return text, openai.PromptLogprobs(m, prompt, pp, offsets)
}

// parseOAICompletion reads a /v1/completions body.
func parseOAICompletion(b *openai.CompletionBody, inst *instance) (*genRequest, error) {
	if err := b.Check(); err != nil {
		return nil, err
	}
	t, opt, err := inst.generation(&b.Gen, inst.Opts.NPredict)
	if err != nil {
		return nil, err
	}
	n, err := completionsPerPrompt(&b.NCmpl, &b.N, inst.Engine.Slots())
	if err != nil {
		return nil, err
	}
	if err := b.NProbs(&t.Params.NProbs); err != nil {
		return nil, err
	}
	// logprobs 0 asks for each token's own log probability alone.
	t.SampledProbs = b.Logprobs.Set
	if b.HasSuffix() {
		// The prompt and the suffix are the code before and after the
		// insertion point, as /infill's input_prefix and input_suffix.
		if msg := infillSupport(inst.Model.SpecialTokens()); msg != "" {
			return nil, badRequest(`"suffix" needs a model with fill-in-the-middle tokens: %s`, msg)
		}
		prefix, err := parseEmbdPrompt(b.Prompt)
		if err != nil || wire.Kind(b.Prompt) != 's' {
			return nil, badRequest(`with "suffix", "prompt" must be one string (the text before the insertion point)`)
		}
		suffix, _ := parseEmbdPrompt(b.Suffix)
		prompt, err := infillPrompt(inst.Model, &infillInput{Prefix: prefix, Suffix: suffix}, inst.infillLimits())
		if err != nil {
			return nil, err
		}
		return &genRequest{inst: inst, prompts: [][]llama.Token{prompt}, task: t, opt: opt, n: n}, nil
	}
	prompts, err := parsePrompts(b.Prompt, "prompt", inst)
	if err != nil {
		return nil, err
	}
	echo := b.Echoes()
	// Echoed with logprobs, the prompt's tokens come with theirs.
	t.PromptProbs = echo && (t.SampledProbs || t.Params.NProbs > 0)
	return &genRequest{inst: inst, prompts: prompts, task: t, opt: opt, echo: echo, n: n}, nil
}

// streamOAICompletion sends text_completion chunks, a last chunk per
// prompt with its finish reason, usage and timings, then [DONE].
func streamOAICompletion(ctx context.Context, w http.ResponseWriter, g *genRequest, events eventStream, base openai.Completion) {
	sse, _ := sseStart(ctx, w)
	// With logprobs (0 included: each token's own, no alternatives).
	logprobs := g.task.ReportsSampled()
	pending := make([][]wire.Step, g.count())
	offsets := make([]int, g.count())
	echoed := make([]bool, g.count())
	for events.Next() {
		ev, idx := events.Event(), events.Index()
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Progress != nil {
			continue
		}
		if g.echo && !echoed[idx] {
			// The prompt first, in a chunk of its own.
			echoed[idx] = true
			text, lp := echoPrompt(g.inst.Model, g.prompt(idx), ev.PromptProbs)
			offsets[idx] = utf8.RuneCountInString(text)
			chunk := base
			chunk.Choices = []openai.CompletionChoice{{Text: text, Index: idx, Logprobs: lp}}
			if sse.data(chunk) != nil {
				return
			}
		}
		chunk := base
		if ev.Done {
			fr := openai.FinishReason(ev.Stop, false)
			var u openai.Usage
			u.Add(ev, true)
			chunk.Choices = []openai.CompletionChoice{{Index: idx, FinishReason: &fr}}
			chunk.Usage, chunk.Timings = &u, wire.NewTimings(ev.Timings)
			if sse.data(chunk) != nil {
				return
			}
			continue
		}
		if logprobs {
			pending[idx] = append(pending[idx], wire.StepOf(ev))
		}
		if ev.Text == "" {
			continue
		}
		c := openai.CompletionChoice{Text: ev.Text, Index: idx}
		if logprobs {
			c.Logprobs, offsets[idx] = openai.NewLegacyLogprobs(g.inst.Model, pending[idx], offsets[idx])
			pending[idx] = nil
		}
		if g.opt.TimingsPerToken {
			chunk.Timings = wire.NewTimings(ev.Timings)
		}
		chunk.Choices = []openai.CompletionChoice{c}
		if sse.data(chunk) != nil {
			return
		}
	}
	if ctx.Err() == nil {
		_ = sse.data("[DONE]")
	}
}
