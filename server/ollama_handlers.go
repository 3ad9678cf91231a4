package server

// Ollama's API: POST /api/chat, /api/generate, /api/embed and
// /api/embeddings, GET /api/tags, /api/ps and /api/version, POST
// /api/show. The dialect (its wire types and the translation to the
// internal request and back) is package server/internal/ollama; these
// handlers decode a body, run it with the chat, completion, infill and
// embedding machinery and write the answer, or a stream of JSON lines
// (application/x-ndjson); errors take Ollama's shape {"error": "..."}.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/ollama"
	"github.com/x/llama/server/internal/router"
	"github.com/x/llama/server/internal/wire"
)

// ollamaModel resolves an Ollama model name: in router mode a name
// without its tag ("stories" for "stories:latest") when only that one
// is known, as Ollama's clients add ":latest".
func (s *Server) ollamaModel(name string) string {
	if !s.router {
		return name
	}
	if e, _ := s.models.Lookup(name); e == nil {
		if base, ok := strings.CutSuffix(name, ":latest"); ok {
			return base
		}
	}
	return name
}

// decodeOllama decodes the body of an Ollama request that runs a model
// and reads its keep_alive: zero asks to unload the model once the request
// is answered, which in router mode the returned function does (defer it
// before the request acquires the model, so that it runs after the
// release); in single-model mode the model stays.
func (s *Server) decodeOllama(r *http.Request, req interface{ Head() *ollama.Base }) (after func(), err error) {
	if err := decodeJSON(r, req); err != nil {
		return nil, err
	}
	b := req.Head()
	unload, err := ollama.UnloadAfter(b.KeepAlive)
	if err != nil || !unload || !s.router {
		return func() {}, err
	}
	return func() {
		if e, _ := s.models.Lookup(s.ollamaModel(b.Model)); e != nil {
			_ = s.models.Unload(context.Background(), e) // "not loaded" is as good
		}
	}, nil
}

// ollamaLoad answers Ollama's request to load a model (a chat without
// messages, a generate without a prompt) or, with keep_alive 0, to unload
// it, and returns the model's name and the answer's done_reason. A load
// loads the model as any request would. An unload in router mode unloads
// the model when it is loaded, never loading it first; in single-model
// mode the server's model stays, as it does after any request with
// keep_alive 0.
func (s *Server) ollamaLoad(r *http.Request, model string, keepAlive json.RawMessage) (name, reason string, err error) {
	unload, err := ollama.UnloadAfter(keepAlive)
	if err != nil {
		return "", "", err
	}
	if unload {
		e, msg := s.lookup(r, s.ollamaModel(model))
		if e == nil {
			return "", "", badRequest("%s", msg)
		}
		if s.router {
			_ = s.models.Unload(r.Context(), e) // "not loaded" is as good
		}
		return cmp.Or(model, s.models.View(e).Name), "unload", nil
	}
	inst, release, err := s.instanceFor(r, s.ollamaModel(model))
	if err != nil {
		return "", "", err
	}
	release()
	return cmp.Or(model, inst.Name), "load", nil
}

// writeOllama answers v alone: as a stream's one line when the request's
// stream field asks for a stream (Ollama's default), else as JSON.
func writeOllama(w http.ResponseWriter, stream *bool, v any) {
	if ollama.Streams(stream) {
		(&ndjson{w: w}).send(v)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// ndjson writes a stream of JSON lines, each flushed.
type ndjson struct {
	w       http.ResponseWriter
	started bool
}

// send writes v as a line; false when the client is gone.
func (n *ndjson) send(v any) bool {
	b, err := marshalJSON(v)
	if err != nil {
		b, _ = marshalJSON(ollama.ErrorLine{Error: err.Error()})
	}
	if !n.started {
		n.started = true
		jsonHeaders(n.w.Header(), "application/x-ndjson")
		n.w.WriteHeader(http.StatusOK)
	}
	if _, err := n.w.Write(append(b, '\n')); err != nil {
		return false
	}
	return http.NewResponseController(n.w).Flush() == nil
}

// fail ends the stream with an error line.
func (n *ndjson) fail(err error) {
	_, body := ollamaErrors.render(err)
	n.send(body)
}

// ollamaContext checks the tokens of a request's "context" against the
// model's vocabulary.
func ollamaContext(m *llama.Model, ids []int) ([]llama.Token, error) {
	out := make([]llama.Token, len(ids))
	n := m.VocabSize()
	for i, id := range ids {
		if id < 0 || id >= n {
			return nil, badRequest(`"context"[%d]: token %d is not in the vocabulary`, i, id)
		}
		out[i] = llama.Token(id)
	}
	return out, nil
}

func handleOllamaChat(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := time.Now()
		var req ollama.ChatRequest
		after, err := s.decodeOllama(r, &req)
		if err != nil {
			return err
		}
		defer after()
		if len(req.Messages) == 0 {
			model, reason, err := s.ollamaLoad(r, req.Model, req.KeepAlive)
			if err != nil {
				return err
			}
			writeOllama(w, req.Stream, ollama.ChatResponse{Model: model, CreatedAt: time.Now().UTC(), Message: ollama.Message{Role: "assistant"},
				Done: true, DoneReason: reason})
			return nil
		}
		creq, err := ollama.ToChat(&req, s.mediaMarker)
		if err != nil {
			return err
		}
		return s.runOllamaChat(w, r, creq, start, nil, req.Logprobs, false)
	}
}

// runOllamaChat runs a chat of /api/chat, or of /api/generate (isGenerate:
// its answer's shape); ctxIDs are the tokens of a generate request's
// "context", put before the prompt; lp asks for logprobs.
func (s *Server) runOllamaChat(w http.ResponseWriter, r *http.Request, creq *wire.Chat, start time.Time, ctxIDs []int, lp ollama.Logprobs, isGenerate bool) error {
	inst, release, err := s.instanceFor(r, s.ollamaModel(creq.Model))
	if err != nil {
		return err
	}
	defer release()
	arrived := inst.Engine.Expect()
	defer arrived()
	g, plan, co, err := inst.startChat(creq)
	if err != nil {
		return err
	}
	if len(ctxIDs) > 0 {
		toks, err := ollamaContext(inst.Model, ctxIDs)
		if err != nil {
			return err
		}
		g.task.Prompt = slices.Concat(toks, g.task.Prompt)
		g.prompts[0] = g.task.Prompt
		for i := range g.task.UserStarts {
			g.task.UserStarts[i] += len(toks) // the positions moved with the prompt
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events, err := s.startTasks(ctx, inst, arrived, g.tasks(), nil)
	if err != nil {
		return err
	}
	run := &ollamaRun{inst: inst, events: events, model: co.Model, start: start, prompt: g.task.Prompt, lp: lp,
		chat: !isGenerate, stream: g.opt.Stream, parse: plan.ParseResult, parser: plan.NewStream()}
	return run.answer(ctx, w)
}

// deltaParser reads a streamed output: a chat's (chat.Stream) or a raw
// prompt's, all content (rawText).
type deltaParser interface {
	Push(piece string) chat.Delta
	Finish(limited bool) chat.Delta
}

// rawText reads an output as content, whole or streamed.
type rawText struct{}

func (rawText) Push(piece string) chat.Delta { return chat.Delta{Content: piece} }
func (rawText) Finish(bool) chat.Delta       { return chat.Delta{} }
func (rawText) Message(text string, _ bool) chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Content: text}
}

// ollamaRun is a started generation of /api/chat or /api/generate, and
// how to answer it.
type ollamaRun struct {
	inst   *instance
	events eventStream
	model  string
	start  time.Time
	prompt []llama.Token // the tokens a generate answer's "context" starts with
	lp     ollama.Logprobs
	chat   bool // /api/chat's shape, else /api/generate's
	stream bool
	parse  func(output string, limited bool) chat.Message // the whole output; limited: cut at the token limit
	parser deltaParser                                    // the output streamed
}

// answer writes the answer, whole or as a stream of lines (ctx is the
// generation's).
func (o *ollamaRun) answer(ctx context.Context, w http.ResponseWriter) error {
	m := o.inst.Model
	if !o.stream {
		res, err := collect(ctx, m, o.events, 1)
		if err != nil {
			return err
		}
		r := res[0]
		msg := o.parse(r.Text, r.Final.Stop == engine.StopTypeLimit)
		var probs []wire.Prob
		if o.lp.Logprobs {
			probs = o.lp.Trim(wire.Probs(m, r.Steps, false))
		}
		if o.chat {
			out := ollama.NewChatResponse(o.model, msg, r.Final, o.start)
			out.Logprobs = probs
			writeJSON(w, http.StatusOK, out)
			return nil
		}
		writeJSON(w, http.StatusOK, o.generateLine(chat.Delta{Content: msg.Content, ReasoningContent: msg.ReasoningContent}, &r.Final, r.Tokens, probs))
		return nil
	}
	nd := &ndjson{w: w}
	var st *ollama.Stream
	if o.chat {
		st = ollama.NewStream(o.model, o.start, nd.send)
	}
	var tr tokenRecord
	for o.events.Next() {
		ev := o.events.Event()
		if ev.Err != nil {
			nd.fail(ev.Err)
			return nil
		}
		if ev.Progress != nil {
			continue
		}
		var d chat.Delta
		if !ev.Done {
			tr.add(m, ev, o.lp)
			d = o.parser.Push(ev.Text)
		}
		if ev.Done {
			d = joinDeltas(d, o.parser.Finish(ev.Stop == engine.StopTypeLimit))
			if st != nil {
				st.AddLogprobs(tr.take())
				st.Finish(ev, d)
			} else {
				nd.send(o.generateLine(d, &ev, tr.tokens, tr.take()))
			}
			return nil
		}
		ok := true
		switch {
		case st != nil:
			st.AddLogprobs(tr.take())
			ok = d.Empty() || st.Delta(d)
		case d.Content != "" || d.ReasoningContent != "":
			ok = nd.send(o.generateLine(d, nil, nil, tr.take()))
		}
		if !ok {
			return nil
		}
	}
	if err := o.events.Err(); err != nil {
		nd.fail(err)
	}
	return nil
}

// generateLine is a line (or the whole answer) of /api/generate: d's
// text, and when final is the last event, the reason, the metrics and
// the context of the prompt's tokens and out's.
func (o *ollamaRun) generateLine(d chat.Delta, final *engine.Event, out []llama.Token, probs []wire.Prob) ollama.GenerateResponse {
	line := ollama.GenerateResponse{Model: o.model, CreatedAt: time.Now().UTC(), Response: d.Content, Thinking: d.ReasoningContent, Logprobs: probs}
	if final != nil {
		line.Done, line.DoneReason = true, ollama.DoneReason(*final)
		line.Metrics, line.Context = ollama.MetricsOf(*final, o.start), tokenInts(o.prompt, out)
	}
	return line
}

// tokenRecord keeps what a generate stream returns of its tokens: the
// tokens ("context") and, when asked for, the logprobs not yet sent.
type tokenRecord struct {
	tokens []llama.Token
	probs  []wire.Prob
}

// add records the token event ev, as collect does.
func (tr *tokenRecord) add(m *llama.Model, ev engine.Event, lp ollama.Logprobs) {
	if !m.IsEOG(ev.Token) {
		tr.tokens = append(tr.tokens, ev.Token)
	}
	if lp.Logprobs && (ev.Sampled != nil || len(ev.Probs) > 0) {
		tr.probs = append(tr.probs, lp.Trim(wire.Probs(m, []wire.Step{wire.StepOf(ev)}, false))...)
	}
}

// take returns the logprobs not yet sent.
func (tr *tokenRecord) take() []wire.Prob {
	p := tr.probs
	tr.probs = nil
	return p
}

// joinDeltas is a followed by b.
func joinDeltas(a, b chat.Delta) chat.Delta {
	a.Content += b.Content
	a.ReasoningContent += b.ReasoningContent
	a.ToolCalls = append(a.ToolCalls, b.ToolCalls...)
	return a
}

// tokenInts is a generate answer's "context": its prompt's tokens and
// those it generated.
func tokenInts(prompt, out []llama.Token) []int {
	ids := make([]int, 0, len(prompt)+len(out))
	for _, t := range prompt {
		if t >= 0 {
			ids = append(ids, int(t)) // media positions are left out
		}
	}
	for _, t := range out {
		ids = append(ids, int(t))
	}
	return ids
}

func handleOllamaGenerate(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := time.Now()
		var req ollama.GenerateRequest
		after, err := s.decodeOllama(r, &req)
		if err != nil {
			return err
		}
		defer after()
		if req.Prompt == "" && req.Suffix == "" && len(req.Images) == 0 && len(req.Context) == 0 {
			model, reason, err := s.ollamaLoad(r, req.Model, req.KeepAlive)
			if err != nil {
				return err
			}
			writeOllama(w, req.Stream, ollama.GenerateResponse{Model: model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: reason})
			return nil
		}
		if !req.Raw && req.Suffix == "" {
			creq, err := ollama.GenerateChat(&req, s.mediaMarker)
			if err != nil {
				return err
			}
			return s.runOllamaChat(w, r, creq, start, req.Context, req.Logprobs, true)
		}
		gen, err := ollama.GenerateGen(&req)
		if err != nil {
			return err
		}
		inst, release, err := s.instanceFor(r, s.ollamaModel(req.Model))
		if err != nil {
			return err
		}
		defer release()
		arrived := inst.Engine.Expect()
		defer arrived()
		t, opt, err := inst.generation(gen, inst.Opts.NPredict)
		if err != nil {
			return err
		}
		var prompt []llama.Token
		if req.Suffix != "" {
			prompt, err = inst.ollamaInfill(req.Prompt, req.Suffix)
		} else if len(req.Context) > 0 {
			// A continuation: the context has the BOS already.
			if err = inst.checkPromptText(req.Prompt); err == nil {
				prompt, err = tokenizeText(inst.Model, req.Prompt, llama.TokenizeOptions{ParseSpecial: true})
			}
		} else {
			prompt, err = inst.tokenizePrompt(req.Prompt)
		}
		if err != nil {
			return err
		}
		if len(req.Context) > 0 {
			toks, err := ollamaContext(inst.Model, req.Context)
			if err != nil {
				return err
			}
			prompt = slices.Concat(toks, prompt)
		}
		g := &genRequest{inst: inst, prompts: [][]llama.Token{prompt}, task: t, opt: opt}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		events, err := s.startTasks(ctx, inst, arrived, g.tasks(), nil)
		if err != nil {
			return err
		}
		run := &ollamaRun{inst: inst, events: events, model: cmp.Or(req.Model, inst.Name), start: start, prompt: prompt, lp: req.Logprobs,
			stream: opt.Stream, parse: rawText{}.Message, parser: rawText{}}
		return run.answer(ctx, w)
	}
}

// ollamaInfill is the fill-in-the-middle prompt of /api/generate's
// prompt (the code before the cursor) and suffix (after it), as /infill
// builds it.
func (inst *instance) ollamaInfill(prefix, suffix string) ([]llama.Token, error) {
	if msg := infillSupport(inst.Model.SpecialTokens()); msg != "" {
		// A 400, as Ollama answers a model without the "insert" capability.
		return nil, badRequest("Infill is not supported by this model: %s", msg)
	}
	if err := inst.checkPromptText(prefix + suffix); err != nil {
		return nil, err
	}
	in := &infillInput{Prefix: embdPrompt{{Text: prefix}}, Suffix: embdPrompt{{Text: suffix}}}
	return infillPrompt(inst.Model, in, inst.infillLimits())
}

// ollamaEmbed runs embeddings of inputs for /api/embed and
// /api/embeddings, normalized as normalize says (2: Euclidean, -1:
// none); with truncate, an input longer than one batch is cut to it.
func (s *Server) ollamaEmbed(r *http.Request, model string, inputs []string, normalize int, truncate bool) ([][]float32, int, error) {
	inst, release, err := s.instanceFor(r, s.ollamaModel(model))
	if err != nil {
		return nil, 0, err
	}
	defer release()
	eo := inst.Opts.Engine
	if !eo.Embedding && !eo.Reranking {
		return nil, 0, notSupported("This server does not support embeddings. Start it with `--embeddings` (Options.Engine.Embedding)")
	}
	if serverPooling(eo, inst.Model) == llama.PoolingNone {
		return nil, 0, badRequest("the model's pooling type 'none' gives no embedding per input: start the server with --pooling mean, cls or last (Options.Engine.Context.Pooling)")
	}
	if err := inst.checkTaskCount(len(inputs), "inputs"); err != nil {
		return nil, 0, err
	}
	if err := inst.checkEncoderText(inputs...); err != nil {
		return nil, 0, err
	}
	tasks := make([]*engine.Request, len(inputs))
	count := 0
	for i, in := range inputs {
		toks, err := tokenizeText(inst.Model, in, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
		if err != nil {
			return nil, 0, badRequest("%v", err)
		}
		if len(toks) == 0 {
			return nil, 0, badRequest("input %d is empty", i)
		}
		if truncate {
			toks = toks[:min(len(toks), encoderLimit(eo))] // Ollama keeps the start too
		}
		if err := checkEncoderInput(len(toks), eo); err != nil {
			return nil, 0, err
		}
		count += len(toks)
		tasks[i] = embeddingTask(toks, normalize, false)
	}
	results, err := submitAll(r, inst.embedder(), tasks)
	if err != nil {
		return nil, 0, err
	}
	out := make([][]float32, len(results))
	for i, ev := range results {
		out[i] = []float32{}
		if len(ev.Embedding) > 0 {
			out[i] = ev.Embedding[0]
		}
	}
	return out, count, nil
}

func handleOllamaEmbed(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := time.Now()
		var req ollama.EmbedRequest
		after, err := s.decodeOllama(r, &req)
		if err != nil {
			return err
		}
		defer after()
		var inputs []string
		switch wire.Kind(req.Input) {
		case 's':
			var one string
			_ = json.Unmarshal(req.Input, &one)
			inputs = []string{one}
		case 'a':
			if json.Unmarshal(req.Input, &inputs) != nil {
				return badRequest(`"input" must be a string or an array of strings`)
			}
		case 0:
			return badRequest(`"input" is required`)
		default:
			return badRequest(`"input" must be a string or an array of strings`)
		}
		if err := checkDimensions(req.Dimensions); err != nil {
			return err
		}
		if len(inputs) == 0 {
			writeJSON(w, http.StatusOK, ollama.EmbedResponse{Model: req.Model, Embeddings: [][]float32{}})
			return nil
		}
		vecs, n, err := s.ollamaEmbed(r, req.Model, inputs, 2, req.Truncate == nil || *req.Truncate)
		if err != nil {
			return err
		}
		if err := truncateEmbeddings(vecs, req.Dimensions, 2); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, ollama.EmbedResponse{Model: req.Model, Embeddings: vecs,
			TotalDuration: int64(time.Since(start)), PromptEvalCount: n})
		return nil
	}
}

func handleOllamaEmbeddings(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req ollama.EmbeddingsRequest
		after, err := s.decodeOllama(r, &req)
		if err != nil {
			return err
		}
		defer after()
		if req.Prompt == "" {
			writeJSON(w, http.StatusOK, ollama.EmbeddingsResponse{Embedding: []float32{}})
			return nil
		}
		// The older endpoint's vectors are not normalized, as Ollama's.
		vecs, _, err := s.ollamaEmbed(r, req.Model, []string{req.Prompt}, -1, true)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, ollama.EmbeddingsResponse{Embedding: vecs[0]})
		return nil
	}
}

// ollamaDetails are the details of a model known to the server (what is
// known before its first load is its name).
func ollamaDetails(info *router.Info) ollama.Details {
	d := ollama.Details{Format: "gguf", Families: []string{}}
	if info == nil {
		return d
	}
	in := info.Info
	d.Family, d.QuantizationLevel, d.ParameterSize = in.Architecture, in.FileType, parameterSize(in.Params)
	if in.Architecture != "" {
		d.Families = []string{in.Architecture}
	}
	return d
}

// parameterSize writes a parameter count as Ollama does: "270.4M", "8.0B".
func parameterSize(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// ollamaList lists the models, only the loaded ones for /api/ps.
func (s *Server) ollamaList(loaded bool) ollama.ListResponse {
	out := ollama.ListResponse{Models: []ollama.ListModel{}}
	for _, c := range s.models.List().Data {
		e, _ := s.models.Lookup(c.ID)
		if e == nil {
			continue
		}
		v := s.models.View(e)
		if loaded && v.State != router.Loaded {
			continue
		}
		m := ollama.ListModel{Name: c.ID, Model: c.ID, ModifiedAt: time.Unix(c.Created, 0).UTC(), Details: ollamaDetails(v.Info)}
		if v.Info != nil {
			m.Size = int64(v.Info.Info.Size)
		}
		if loaded {
			far := time.Now().Add(24 * 365 * time.Hour).UTC().Truncate(time.Second) // kept until the server unloads it
			vram := int64(0)
			m.ExpiresAt, m.SizeVRAM = &far, &vram
			if v.Info != nil {
				m.ContextLength = v.Info.NCtxSlot
			}
		}
		out.Models = append(out.Models, m)
	}
	return out
}

func handleOllamaTags(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, s.ollamaList(false))
		return nil
	}
}

func handleOllamaPs(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, s.ollamaList(true))
		return nil
	}
}

func handleOllamaVersion(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, ollama.VersionResponse{Version: ollama.APIVersion})
		return nil
	}
}

// handleOllamaShow answers what Ollama's clients read of a model: its
// details, its architecture's lengths in model_info, its chat template and
// its capabilities. A model never loaded yet is loaded first.
func handleOllamaShow(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req ollama.ShowRequest
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
		name := req.Model
		if name == "" {
			name = req.Name
		}
		if name == "" {
			return badRequest(`"model" is required`) // as Ollama's
		}
		inst, release, err := s.instanceFor(r, s.ollamaModel(name))
		if err != nil {
			return err
		}
		release()
		e, _ := s.models.Lookup(s.ollamaModel(name))
		v := s.models.View(e)
		info := v.Info
		if info == nil {
			info = &router.Info{}
		}
		in := info.Info
		arch := in.Architecture
		mi := map[string]any{"general.architecture": arch, "general.parameter_count": in.Params, "general.name": in.Name}
		if arch != "" {
			mi[arch+".context_length"] = in.TrainContext
			mi[arch+".embedding_length"] = in.EmbeddingSize
			mi[arch+".block_count"] = in.Layers
			mi[arch+".attention.head_count"] = in.Heads
			mi[arch+".attention.head_count_kv"] = in.HeadsKV
		}
		caps := []string{}
		eo := inst.Opts.Engine
		if eo.Embedding {
			caps = append(caps, "embedding")
		} else {
			caps = append(caps, "completion")
			if info.Caps.SupportsTools {
				caps = append(caps, "tools")
			}
			if infillSupport(inst.Model.SpecialTokens()) == "" {
				caps = append(caps, "insert")
			}
			if info.Vision {
				caps = append(caps, "vision")
			}
			if info.Audio {
				caps = append(caps, "audio")
			}
			if info.Caps.SupportsThinking {
				caps = append(caps, "thinking")
			}
		}
		writeJSON(w, http.StatusOK, ollama.ShowResponse{
			Template: info.TemplateSource, Details: ollamaDetails(info), ModelInfo: mi, Capabilities: caps,
			Parameters: fmt.Sprintf("num_ctx %d", info.NCtxSlot),
		})
		return nil
	}
}

// handleOllamaPull answers Ollama's pull of a model this server lists
// (/api/tags; a missing ":latest" tag is added): it is here, so, as
// Ollama's pull of a model it has, the answer is {"status": "success"},
// one line whether streamed or not. Front ends pull a model before they
// use it (Open WebUI's model manager). Any other model is refused, as all
// of Ollama's model management (handleOllamaManage).
func handleOllamaPull(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req struct {
			Model string `json:"model"`
			Name  string `json:"name"`
		}
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
		name := cmp.Or(req.Model, req.Name)
		if name == "" {
			return badRequest(`"model" is required`)
		}
		tagged := func(n string) string {
			if strings.Contains(n, ":") {
				return n
			}
			return n + ":latest"
		}
		for _, m := range s.ollamaList(false).Models {
			if tagged(m.Name) == tagged(name) {
				writeJSON(w, http.StatusOK, map[string]string{"status": "success"})
				return nil
			}
		}
		return notSupported("/api/pull of %q is not supported: this server serves the models it was started with (-m, -hf, --models-dir, --models-preset), and %q is not one of them", name, name)
	}
}

// handleOllamaManage answers Ollama's model management (pull, push,
// create, copy, delete, blobs), which this server does not do: its models
// are the ones it was started with, or those of --models-dir and
// --models-preset (-hf pulls at start).
func handleOllamaManage(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return notSupported("%s is not supported: this server serves the models it was started with (-m, -hf, --models-dir, --models-preset)", r.URL.Path)
	}
}
