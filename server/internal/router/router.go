package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/hub"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/mtmd"
)

// instance is one loaded model with its engine and chat template. Handlers
// get one from Server.instanceFor and must call the release function when
// done with it.
type instance struct {
	// Name is the model's name: the alias, the model path (single-model
	// mode) or its name in the models folder or preset (router mode).
	Name string
	// Path is the GGUF file.
	Path   string
	Model  *llama.Model
	Engine engineAPI
	// EmbedEngine runs the embeddings of a generative model served with
	// Embedding (llama-server's --embedding keeps completions on), in a
	// second context beside Engine; nil otherwise (Engine does both or
	// only embeddings).
	EmbedEngine engineAPI
	// Projector encodes media for Model (nil: text only); Model's Close
	// closes it.
	Projector *mtmd.Projector
	// Template renders chat prompts; never nil (falls back to "chatml").
	Template promptRenderer
	// templates are Template and ToolTemplate for package chat, made
	// once by chatTemplates.
	templatesOnce sync.Once
	templates     *chat.Templates
	// ToolTemplate renders prompts that offer tools when the model carries
	// a separate "tool_use" template (and no template was given in the
	// options); nil otherwise.
	ToolTemplate promptRenderer
	Server       *Server
	// Opts are the options this instance runs with (the server's, with the
	// preset's overrides in router mode).
	Opts Options

	eogOnce sync.Once
	eog     []llama.Token // end-of-generation tokens, see eogTokens

	maxPieceOnce sync.Once
	maxPiece     int // bytes of the longest token text, see maxPieceBytes

	entry   *modelEntry
	refs    int  // requests using it, guarded by Server.mu
	retired bool // unloaded: close when refs drops to 0
	once    sync.Once
}

// eogTokens returns the model's end-of-generation tokens.
func (inst *instance) eogTokens() []llama.Token {
	inst.eogOnce.Do(func() {
		for t := range inst.Model.VocabSize() {
			if inst.Model.IsEOG(llama.Token(t)) {
				inst.eog = append(inst.eog, llama.Token(t))
			}
		}
	})
	return inst.eog
}

// embedder returns the engine that runs embedding and rerank tasks.
func (inst *instance) embedder() engineAPI {
	if inst.EmbedEngine != nil {
		return inst.EmbedEngine
	}
	return inst.Engine
}

// close frees the engine and the model.
func (inst *instance) close() {
	inst.once.Do(func() {
		if inst.Engine != nil {
			_ = inst.Engine.Close()
		}
		if inst.EmbedEngine != nil {
			_ = inst.EmbedEngine.Close()
		}
		if inst.Model != nil {
			_ = inst.Model.Close()
		}
	})
}

// modelState is a model's status in GET /models.
type modelState string

// Model states.
const (
	stateUnloaded modelState = "unloaded"
	stateLoading  modelState = "loading"
	stateLoaded   modelState = "loaded"
	stateSleeping modelState = "sleeping"
)

// modelInfo is what is known of a model once loaded; it is kept while the
// model sleeps or is unloaded so that /props and /v1/models still answer.
type modelInfo struct {
	Info           llama.Info
	NCtxSlot       int
	TemplateSource string
	ToolUseSource  string
	Caps           chat.TemplateCaps
	BOS, EOS       string
	Vision, Audio  bool           // the projector's input modalities
	RPCDevices     []llama.Device // the devices of the model's RPC workers (--rpc)
}

// modelEntry is one model the server can run.
type modelEntry struct {
	name          string
	path          string // set at the first load when the model comes from hfRepo (written under Server.mu)
	hfRepo        string // a preset's hf-repo, pulled when path is empty
	hf            *hub.Options
	opts          Options
	loadOnStartup bool
	created       int64
	aliases       []string // other names (single-model mode)
	downloaded    bool     // added by POST /models: DELETE /models may remove it

	state    modelState
	inst     *instance
	loading  chan struct{} // closed when the current load ends
	loadErr  error
	failed   bool
	lastUsed time.Time
	idle     *time.Timer
	info     *modelInfo
	metrics  engine.Metrics // counters of the instances unloaded so far
	scraped  engine.Metrics // counters at the last GET /metrics (the gauges' window)
}

// addMetrics returns the counters of a and b summed (the gauges of b).
func addMetrics(a, b engine.Metrics) engine.Metrics {
	b.PromptTokensTotal += a.PromptTokensTotal
	b.PromptTokensCachedTotal += a.PromptTokensCachedTotal
	b.PromptSecondsTotal += a.PromptSecondsTotal
	b.TokensPredictedTotal += a.TokensPredictedTotal
	b.TokensPredictedSteps += a.TokensPredictedSteps
	b.TokensPredictedSeconds += a.TokensPredictedSeconds
	b.DecodeTotal += a.DecodeTotal
	b.BusySlotsTotal += a.BusySlotsTotal
	b.NTokensMax = max(a.NTokensMax, b.NTokensMax)
	b.Steps = b.Steps.Add(a.Steps)
	b.BusySlotsPerDecode = 0
	if b.DecodeTotal > 0 {
		b.BusySlotsPerDecode = float64(b.BusySlotsTotal) / float64(b.DecodeTotal)
	}
	return b
}

// metricsLocked returns e's counters since the server started, across
// sleeps and unloads. s.mu must be held.
func (e *modelEntry) metricsLocked() engine.Metrics {
	m := e.metrics
	if e.inst != nil {
		m = addMetrics(e.metrics, e.inst.Engine.Metrics())
	}
	return m
}

// modelEvent is one event of GET /models/sse.
type modelEvent struct {
	Model string `json:"model"`
	Event string `json:"event"`
	Data  any    `json:"data,omitempty"`
}

// errServerClosed is returned for requests that arrive after Close.
var errServerClosed = errors.New("server: closed")

// notifyLocked broadcasts a status change to /models/sse listeners. s.mu
// must be held.
func (s *Server) notifyLocked(e *modelEntry, extra map[string]any) {
	data := map[string]any{"status": string(e.state)}
	for k, v := range extra {
		data[k] = v
	}
	ev := modelEvent{Model: e.name, Event: "model_status", Data: data}
	for ch := range s.subs {
		select {
		case ch <- ev:
		default: // a slow listener misses events rather than blocking loads
		}
	}
}

// subscribe registers a /models/sse listener.
func (s *Server) subscribe() (<-chan modelEvent, func()) {
	ch := make(chan modelEvent, 64)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}
}

// lookup finds the model a request names. In single-model mode every name
// maps to the one model. In router mode an empty name is taken from the
// "model" query parameter, and may be omitted only when there is one model.
func (s *Server) lookup(r *http.Request, model string) (*modelEntry, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.router {
		return s.models[0], ""
	}
	if model == "" && r != nil {
		model = r.URL.Query().Get("model")
	}
	if model == "" {
		if len(s.models) == 1 {
			return s.models[0], ""
		}
		return nil, "model name is missing from the request"
	}
	if e, ok := s.byName[model]; ok {
		return e, ""
	}
	return nil, fmt.Sprintf("model '%s' not found", model)
}

// peek finds the model a GET request names without loading or waking it.
// It fails with a 400.
func (s *Server) peek(r *http.Request) (*modelEntry, error) {
	e, msg := s.lookup(r, "")
	if e == nil {
		return nil, badRequest("%s", msg)
	}
	return e, nil
}

// instanceFor returns the instance that serves model (the request's "model"
// field; "" for the default), loading or waking it when needed. On failure
// it returns the error to answer. Otherwise release must be called once
// the request no longer uses inst.
func (s *Server) instanceFor(r *http.Request, model string) (inst *instance, release func(), err error) {
	e, msg := s.lookup(r, model)
	if e == nil {
		return nil, nil, badRequest("%s", msg)
	}
	if s.router {
		autoload := !s.opts.NoModelsAutoload
		switch r.URL.Query().Get("autoload") {
		case "false", "0":
			autoload = false
		case "true", "1":
			autoload = true
		}
		if !autoload {
			s.mu.Lock()
			st := e.state
			s.mu.Unlock()
			if st != stateLoaded {
				return nil, nil, badRequest("model is not loaded")
			}
		}
	}
	inst, release, err = s.acquire(r.Context(), e)
	if err != nil {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil, nil, unavailable("request ended while the model was loading")
		case errors.Is(err, errServerClosed):
			return nil, nil, unavailable("server is shutting down")
		case errors.Is(err, llama.ErrRPC):
			return nil, nil, unavailable("failed to load model: %v", err)
		}
		return nil, nil, serverError("failed to load model: %v", err)
	}
	return inst, release, nil
}

// acquire returns e's instance, loading it first when unloaded or
// sleeping, and counts the caller as a user until release.
func (s *Server) acquire(ctx context.Context, e *modelEntry) (*instance, func(), error) {
	s.mu.Lock()
	waited := false
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, nil, errServerClosed
		}
		switch e.state {
		case stateLoaded:
			inst := e.inst
			if err := inst.Model.RPCErr(); err != nil {
				// A worker of the model's RPC devices failed: the model
				// answers nothing more, so it is loaded again (which fails
				// while the worker is away, and works once it is back).
				// Once a request: a model that this request's own load
				// brought up and that failed already is its answer.
				if waited {
					s.mu.Unlock()
					return nil, nil, err
				}
				s.log.Warn("reloading the model after an RPC worker failed", "model", e.name, "err", err)
				if s.retireLocked(e, stateUnloaded) {
					go inst.close()
				}
				continue
			}
			inst.refs++
			e.lastUsed = time.Now()
			if e.idle != nil {
				e.idle.Stop()
				e.idle = nil
			}
			s.mu.Unlock()
			var once sync.Once
			return inst, func() { once.Do(func() { s.release(inst) }) }, nil
		case stateLoading:
			if waited && e.loadErr != nil {
				err := e.loadErr
				s.mu.Unlock()
				return nil, nil, err
			}
			ch := e.loading
			s.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			s.mu.Lock()
			waited = true
		default:
			if waited && e.loadErr != nil {
				err := e.loadErr
				s.mu.Unlock()
				return nil, nil, err
			}
			s.startLoadLocked(e)
		}
	}
}

// release ends one use of inst.
func (s *Server) release(inst *instance) {
	s.mu.Lock()
	inst.refs--
	e := inst.entry
	e.lastUsed = time.Now()
	closeNow := inst.retired && inst.refs == 0
	if !inst.retired && inst.refs == 0 && e.inst == inst {
		s.armIdleLocked(e)
	}
	s.mu.Unlock()
	if closeNow {
		inst.close()
	}
}

// armIdleLocked starts e's sleep timer (when sleeping on idle is on).
func (s *Server) armIdleLocked(e *modelEntry) {
	d := time.Duration(e.opts.SleepIdleSeconds) * time.Second
	if d <= 0 || s.closed {
		return
	}
	if e.idle != nil {
		e.idle.Stop()
	}
	inst := e.inst
	e.idle = time.AfterFunc(d, func() { s.sleepIfIdle(e, inst, d) })
}

// sleepIfIdle unloads e's instance when it has had no request for d.
func (s *Server) sleepIfIdle(e *modelEntry, inst *instance, d time.Duration) {
	s.mu.Lock()
	if s.closed || e.inst != inst || e.state != stateLoaded || inst.refs > 0 {
		s.mu.Unlock()
		return
	}
	if left := d - time.Since(e.lastUsed); left > 0 {
		e.idle = time.AfterFunc(left, func() { s.sleepIfIdle(e, inst, d) })
		s.mu.Unlock()
		return
	}
	s.retireLocked(e, stateSleeping)
	s.mu.Unlock()
	s.log.Info("model sleeping after idle", "model", e.name, "idle", d)
	inst.close()
}

// retireLocked detaches e's loaded instance, marking e with state. The
// instance is closed by the caller when it has no users, else by the last
// release. It returns whether the caller must close it now.
func (s *Server) retireLocked(e *modelEntry, state modelState) bool {
	inst := e.inst
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	e.inst = nil
	e.state = state
	if inst == nil {
		return false
	}
	// The snapshot /metrics shows while the model sleeps.
	e.metrics = addMetrics(e.metrics, inst.Engine.Metrics())
	inst.retired = true
	s.notifyLocked(e, nil)
	return inst.refs == 0
}

// startLoadLocked begins loading e in the background, first unloading the
// least recently used idle models if ModelsMax would be exceeded.
func (s *Server) startLoadLocked(e *modelEntry) {
	var evicted []*instance
	if s.router && s.opts.ModelsMax > 0 {
		for {
			n := 0
			for _, o := range s.models {
				if o != e && (o.state == stateLoaded || o.state == stateLoading) {
					n++
				}
			}
			if n < s.opts.ModelsMax {
				break
			}
			var lru *modelEntry
			for _, o := range s.models {
				if o != e && o.state == stateLoaded && o.inst.refs == 0 && (lru == nil || o.lastUsed.Before(lru.lastUsed)) {
					lru = o
				}
			}
			if lru == nil {
				s.log.Warn("models_max reached and every loaded model is busy; loading anyway", "model", e.name)
				break
			}
			inst := lru.inst
			s.log.Info("unloading least recently used model", "model", lru.name, "for", e.name)
			if s.retireLocked(lru, stateUnloaded) {
				evicted = append(evicted, inst)
			}
		}
	}
	ch := make(chan struct{})
	e.state = stateLoading
	e.loading = ch
	e.loadErr = nil
	s.notifyLocked(e, nil)
	s.loads.Add(1)
	go func() {
		defer s.loads.Done()
		for _, inst := range evicted {
			inst.close()
		}
		start := time.Now()
		inst, info, err := s.openInstance(e)
		s.mu.Lock()
		defer s.mu.Unlock()
		defer close(ch)
		if s.closed {
			if inst != nil {
				go inst.close()
			}
			e.state, e.loadErr = stateUnloaded, errServerClosed
			return
		}
		if err != nil {
			s.log.Error("load model failed", "model", e.name, "err", err)
			e.state, e.loadErr, e.failed = stateUnloaded, err, true
			s.notifyLocked(e, map[string]any{"failed": true})
			return
		}
		s.log.Info("model loaded", "model", e.name, "seconds", time.Since(start).Seconds())
		first := e.info == nil
		e.info = info
		e.inst, e.state, e.failed = inst, stateLoaded, false
		e.lastUsed = time.Now()
		if first {
			s.notifyLocked(e, map[string]any{"info": s.modelCard(e)})
		} else {
			s.notifyLocked(e, nil)
		}
		s.armIdleLocked(e)
	}()
}

// unload unloads e (waiting for a load in progress to end first).
func (s *Server) unload(ctx context.Context, e *modelEntry) error {
	s.mu.Lock()
	for e.state == stateLoading {
		ch := e.loading
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
	}
	inst := e.inst
	var closeNow bool
	switch e.state {
	case stateLoaded:
		closeNow = s.retireLocked(e, stateUnloaded)
	case stateSleeping:
		e.state = stateUnloaded
		s.notifyLocked(e, nil)
	default:
		s.mu.Unlock()
		return errors.New("model is not loaded")
	}
	s.mu.Unlock()
	if closeNow {
		inst.close()
	}
	return nil
}

// openInstance loads e's model, engine and chat template.
func (s *Server) openInstance(e *modelEntry) (*instance, *modelInfo, error) {
	path := e.path // only this entry's load writes it, and loads of an entry do not overlap
	if path == "" && e.hfRepo != "" {
		s.log.Info("pulling model", "model", e.name, "hf_repo", e.hfRepo)
		p, err := hub.Pull(s.ctx, e.hfRepo, *e.hf)
		if err != nil {
			return nil, nil, err
		}
		path = p
		s.mu.Lock()
		e.path = p
		s.mu.Unlock()
	}
	m, err := llama.LoadModel(s.ctx, path, e.opts.ModelOptions)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := resolveTemplate(e.opts, m, s.log)
	if err != nil {
		_ = m.Close()
		return nil, nil, err
	}
	toolTmpl := toolUseRenderer(e.opts, m, s.log)
	proj, err := loadProjector(s.ctx, m, e.opts.Multimodal, s.mediaMarker)
	if err != nil {
		_ = m.Close()
		return nil, nil, err
	}
	mi, _ := m.Info()
	eo := e.opts.Engine
	if eo.Logger == nil {
		eo.Logger = s.log
	}
	var embedEng engineAPI
	if eo.Embedding && !eo.Reranking && mi.HasDecoder {
		// A generative model with --embedding serves completions too, as
		// llama-server does: embeddings get a context of their own.
		emb := eo
		emb.Parallel = 1
		if embedEng, err = newEngine(m, emb); err != nil {
			_ = m.Close()
			return nil, nil, fmt.Errorf("start embedding engine: %w", err)
		}
		eo.Embedding = false
	}
	eng, err := newEngine(m, eo)
	if err != nil {
		if embedEng != nil {
			_ = embedEng.Close()
		}
		_ = m.Close()
		return nil, nil, fmt.Errorf("start engine: %w", err)
	}
	inst := &instance{
		Name: e.name, Path: path, Model: m, Engine: eng, EmbedEngine: embedEng, Template: tmpl, ToolTemplate: toolTmpl,
		Server: s, Opts: e.opts, entry: e, Projector: proj,
	}
	info := &modelInfo{TemplateSource: tmpl.Source(), Caps: tmpl.Caps(), RPCDevices: m.RPCDevices()}
	for _, d := range info.RPCDevices {
		s.log.Info("RPC device", "model", e.name, "device", d.Name, "worker", d.Description,
			"total_mib", d.TotalMemory>>20, "free_mib", d.FreeMemory>>20)
	}
	if toolTmpl != nil {
		// As llama.cpp reports them: the tool_use template's, the more
		// expressive one, when the model has it.
		info.Caps = toolTmpl.Caps()
	}
	if proj != nil {
		info.Vision, info.Audio = proj.SupportsVision(), proj.SupportsAudio()
	}
	info.Info = mi
	if tu, ok := m.ChatTemplate("tool_use"); ok {
		info.ToolUseSource = tu
	}
	sp := m.SpecialTokens()
	if sp.BOS != llama.NoToken {
		info.BOS, _ = m.TokenPiece(sp.BOS, true)
	}
	if sp.EOS != llama.NoToken {
		info.EOS, _ = m.TokenPiece(sp.EOS, true)
	}
	info.NCtxSlot = slotContext(e.opts.Engine, info.Info.TrainContext)
	if n := eng.SlotContext(); n > 0 {
		info.NCtxSlot = n
	}
	return inst, info, nil
}

// slotContext is each slot's context size under o.
func slotContext(o engine.Options, train int) int {
	n := o.Context.ContextSize
	if n <= 0 {
		n = train
	}
	p := o.Parallel
	if p <= 0 {
		p = 1
	}
	return n / p
}
