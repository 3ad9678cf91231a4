// Package router is the server's list of models and their lifecycle: which
// models it can serve (one, or in router mode those of a models folder and
// an INI preset, plus downloads from the Hugging Face hub), loading them on
// demand, putting them to sleep when idle, unloading the least recently
// used one when too many are loaded, and the events GET /models/sse
// relays.
//
// It knows nothing of HTTP nor of what a loaded model runs: the server
// opens instances through Config.Open and answers requests from what the
// router reports (View, List). One mutex guards the list and every model's
// state; Open and Instance.Close run without it.
package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/hub"
)

// Instance is a loaded model as the router handles it.
type Instance interface {
	// Close frees the instance. The router calls it once, when the
	// instance is unloaded and its last user released it.
	Close()
	// Metrics returns the instance's counters; the router adds them to
	// the model's total when the instance is unloaded.
	Metrics() engine.Metrics
	// RPCErr is not nil once a worker of the model's RPC devices failed:
	// the instance then answers nothing more and the next Acquire loads
	// the model again.
	RPCErr() error
}

// Info is what is known of a model once loaded. It is kept while the model
// sleeps or is unloaded, so that its card and properties still answer.
type Info struct {
	Info           llama.Info
	NCtxSlot       int
	TemplateSource string
	ToolUseSource  string
	Caps           chat.TemplateCaps
	BOS, EOS       string
	Vision, Audio  bool           // the projector's input modalities
	RPCDevices     []llama.Device // the devices of the model's RPC workers (--rpc)
}

// Spec names the model Config.Open loads.
type Spec struct {
	Name string
	// Path is the GGUF file (pulled from the hub first for a preset's
	// hf-repo).
	Path string
	// Settings are the model's own options, from its preset section.
	Settings Settings
}

// Config is what the router needs of the server. Open is required.
type Config[I Instance] struct {
	// Model is the one model served (single-model mode), with its
	// Aliases; "" is router mode, where Dir and Preset list the models
	// (see Options.ModelsDir and ModelsPreset of package server).
	Model   string
	Aliases []string
	Dir     string
	Preset  string
	// Max is the most models loaded at once in router mode (0: no limit).
	Max int
	// SleepIdleSeconds unloads a model idle that long (0: never); a
	// preset's sleep-idle-seconds overrides it per model.
	SleepIdleSeconds int
	// Offline keeps Download off the network (the hub's cache only).
	Offline bool
	// Jinja is how a preset's chat-template is checked (see
	// engine.ChatResolver).
	Jinja bool
	// Tags are listed in every model's card.
	Tags []string
	// Open loads a model. ctx is cancelled when the router drains.
	Open func(ctx context.Context, s Spec) (I, *Info, error)
	// Log receives the lifecycle's logs; not nil.
	Log *slog.Logger
}

// State is a model's status in GET /models.
type State string

// Model states.
const (
	Unloaded State = "unloaded"
	Loading  State = "loading"
	Loaded   State = "loaded"
	Sleeping State = "sleeping"
)

// ErrClosed is returned for requests that arrive once the router stopped.
var ErrClosed = errors.New("server: closed")

// Model is one model the router can run. Its fields are guarded by the
// router's mutex: read them through Router.View.
type Model[I Instance] struct {
	name          string
	path          string // set at the first load when the model comes from hfRepo
	hfRepo        string // a preset's hf-repo, pulled when path is empty
	hf            *hub.Options
	settings      Settings
	loadOnStartup bool
	created       int64
	aliases       []string // other names (single-model mode)
	downloaded    bool     // added by Download: Remove may remove it

	state    State
	cur      *loaded[I]
	loading  chan struct{} // closed when the current load ends
	loadErr  error
	failed   bool
	lastUsed time.Time
	idle     *time.Timer
	info     *Info
	metrics  engine.Metrics // counters of the instances unloaded so far
	scraped  engine.Metrics // counters at the last Scrape (the gauges' window)
}

// loaded is a model's instance with its users.
type loaded[I Instance] struct {
	inst    I
	model   *Model[I]
	refs    int  // requests using it
	retired bool // unloaded: close when refs drops to 0
	once    sync.Once
}

func (l *loaded[I]) close() { l.once.Do(l.inst.Close) }

// View is a model as it is at one moment.
type View[I Instance] struct {
	Name string
	Path string
	// State is the model's status; Inst is its instance while loaded
	// (the zero I otherwise). A caller that uses Inst beyond a glance
	// holds it with Acquire instead.
	State State
	Inst  I
	// Info is nil until the model was first loaded.
	Info *Info
	// LoadErr is the last load's error.
	LoadErr  error
	Settings Settings
}

// Router is the model list. Create it with New and stop it with Stop then
// Drain.
type Router[I Instance] struct {
	cfg    Config[I]
	ctx    context.Context // cancelled by Drain: aborts loads and downloads
	cancel context.CancelFunc
	loads  sync.WaitGroup

	mu     sync.Mutex
	closed bool
	models []*Model[I]
	byName map[string]*Model[I]
	subs   map[chan Event]struct{}
	// downloading are the models Download is fetching.
	downloading map[string]bool
	// stopped are the instances Stop detached, closed by Drain.
	stopped []*loaded[I]
}

// New lists the models: cfg.Model, or in router mode those of cfg.Dir and
// cfg.Preset. It loads nothing: see Load and Start. ctx's values reach
// Open; its cancellation does not (Drain cancels loads).
func New[I Instance](ctx context.Context, cfg Config[I]) (*Router[I], error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Router[I]{cfg: cfg, ctx: rctx, cancel: cancel, byName: map[string]*Model[I]{}, subs: map[chan Event]struct{}{}}
	now := time.Now().Unix()
	if cfg.Model != "" {
		name := cfg.Model
		if len(cfg.Aliases) > 0 {
			name = cfg.Aliases[0]
		}
		r.addLocked(&Model[I]{name: name, path: cfg.Model, created: now, aliases: cfg.Aliases})
		return r, nil
	}
	entries, err := r.scan(now)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, e := range entries {
		r.addLocked(e)
	}
	return r, nil
}

// Multi reports router mode (several models, chosen by name).
func (r *Router[I]) Multi() bool { return r.cfg.Model == "" }

func (r *Router[I]) addLocked(e *Model[I]) {
	e.state = Unloaded
	r.models = append(r.models, e)
	r.byName[e.name] = e
}

// Start begins loading the models marked load-on-startup.
func (r *Router[I]) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.models {
		if e.loadOnStartup {
			r.startLoadLocked(e)
		}
	}
}

// Load loads e and waits for the load to end, returning its error (or
// ctx's, the load going on).
func (r *Router[I]) Load(ctx context.Context, e *Model[I]) error {
	r.mu.Lock()
	r.startLoadLocked(e)
	ch := e.loading
	r.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return e.loadErr
}

// Lookup finds the model named model. In single-model mode every name maps
// to the one model; in router mode "" may name the only model. On failure
// it returns the message to answer.
func (r *Router[I]) Lookup(model string) (*Model[I], string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.Multi() {
		return r.models[0], ""
	}
	if model == "" {
		if len(r.models) == 1 {
			return r.models[0], ""
		}
		return nil, "model name is missing from the request"
	}
	if e, ok := r.byName[model]; ok {
		return e, ""
	}
	return nil, fmt.Sprintf("model '%s' not found", model)
}

// View returns e as it is now.
func (r *Router[I]) View(e *Model[I]) View[I] {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := View[I]{Name: e.name, Path: e.path, State: e.state, Info: e.info, LoadErr: e.loadErr, Settings: e.settings}
	if e.cur != nil {
		v.Inst = e.cur.inst
	}
	return v
}

// Scrape returns e's counters since the router started, across sleeps and
// unloads, and those of the previous Scrape (the window of the throughput
// gauges).
func (r *Router[I]) Scrape(e *Model[I]) (now, prev engine.Metrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now = e.metrics
	if e.cur != nil {
		now = addMetrics(e.metrics, e.cur.inst.Metrics())
	}
	prev, e.scraped = e.scraped, now
	return now, prev
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

// Acquire returns e's instance, loading it first when unloaded or
// sleeping, and counts the caller as a user until release, which must be
// called once the caller no longer uses the instance (more calls do
// nothing). A load's failure is its error; after Stop it is ErrClosed.
func (r *Router[I]) Acquire(ctx context.Context, e *Model[I]) (inst I, release func(), err error) {
	return r.acquire(ctx, e, true)
}

// ErrNotLoaded is AcquireLoaded's error for a model that is not loaded.
var ErrNotLoaded = errors.New("model is not loaded")

// AcquireLoaded is Acquire for a model that is loaded now: one unloaded,
// sleeping or loading is ErrNotLoaded and stays as it is (a request with
// autoload off). The check and the acquire are one step, so an idle
// sleep or an unload between them cannot make the request load it.
func (r *Router[I]) AcquireLoaded(e *Model[I]) (inst I, release func(), err error) {
	return r.acquire(context.Background(), e, false)
}

func (r *Router[I]) acquire(ctx context.Context, e *Model[I], load bool) (inst I, release func(), err error) {
	r.mu.Lock()
	waited := false
	for {
		if r.closed {
			r.mu.Unlock()
			return inst, nil, ErrClosed
		}
		if !load && e.state != Loaded {
			r.mu.Unlock()
			return inst, nil, ErrNotLoaded
		}
		switch e.state {
		case Loaded:
			l := e.cur
			if err := l.inst.RPCErr(); err != nil {
				// A worker of the model's RPC devices failed: the model
				// answers nothing more, so it is unloaded, and loaded again
				// unless the caller asked for a loaded model only (that
				// load fails while the worker is away, and works once it
				// is back).
				// Once a request: a model that this request's own load
				// brought up and that failed already is its answer.
				if waited {
					r.mu.Unlock()
					return inst, nil, err
				}
				what := "reloading"
				if !load {
					what = "unloading"
				}
				r.cfg.Log.Warn(what+" the model after an RPC worker failed", "model", e.name, "err", err)
				if r.retireLocked(e, Unloaded) {
					go l.close()
				}
				continue
			}
			l.refs++
			e.lastUsed = time.Now()
			if e.idle != nil {
				e.idle.Stop()
				e.idle = nil
			}
			r.mu.Unlock()
			var once sync.Once
			return l.inst, func() { once.Do(func() { r.release(l) }) }, nil
		case Loading:
			if waited && e.loadErr != nil {
				err := e.loadErr
				r.mu.Unlock()
				return inst, nil, err
			}
			ch := e.loading
			r.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return inst, nil, ctx.Err()
			}
			r.mu.Lock()
			waited = true
		default:
			if waited && e.loadErr != nil {
				err := e.loadErr
				r.mu.Unlock()
				return inst, nil, err
			}
			r.startLoadLocked(e)
		}
	}
}

// release ends one use of l.
func (r *Router[I]) release(l *loaded[I]) {
	r.mu.Lock()
	l.refs--
	e := l.model
	e.lastUsed = time.Now()
	closeNow := l.retired && l.refs == 0
	if !l.retired && l.refs == 0 && e.cur == l {
		r.armIdleLocked(e)
	}
	r.mu.Unlock()
	if closeNow {
		l.close()
	}
}

// idleAfter is how long e may go without requests before it sleeps (0:
// forever).
func (r *Router[I]) idleAfter(e *Model[I]) time.Duration {
	n := r.cfg.SleepIdleSeconds
	if e.settings.SleepIdleSeconds != nil {
		n = *e.settings.SleepIdleSeconds
	}
	return time.Duration(n) * time.Second
}

// armIdleLocked starts e's sleep timer (when sleeping on idle is on).
func (r *Router[I]) armIdleLocked(e *Model[I]) {
	d := r.idleAfter(e)
	if d <= 0 || r.closed {
		return
	}
	if e.idle != nil {
		e.idle.Stop()
	}
	l := e.cur
	e.idle = time.AfterFunc(d, func() { r.sleepIfIdle(e, l, d) })
}

// sleepIfIdle unloads e's instance when it has had no request for d.
func (r *Router[I]) sleepIfIdle(e *Model[I], l *loaded[I], d time.Duration) {
	r.mu.Lock()
	if r.closed || e.cur != l || e.state != Loaded || l.refs > 0 {
		r.mu.Unlock()
		return
	}
	if left := d - time.Since(e.lastUsed); left > 0 {
		e.idle = time.AfterFunc(left, func() { r.sleepIfIdle(e, l, d) })
		r.mu.Unlock()
		return
	}
	r.retireLocked(e, Sleeping)
	r.mu.Unlock()
	r.cfg.Log.Info("model sleeping after idle", "model", e.name, "idle", d)
	l.close()
}

// retireLocked detaches e's loaded instance, marking e with state. The
// instance is closed by the caller when it has no users, else by the last
// release. It returns whether the caller must close it now.
func (r *Router[I]) retireLocked(e *Model[I], state State) bool {
	l := e.cur
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
	e.cur = nil
	e.state = state
	if l == nil {
		return false
	}
	// The snapshot /metrics shows while the model sleeps.
	e.metrics = addMetrics(e.metrics, l.inst.Metrics())
	l.retired = true
	r.notifyLocked(e, nil)
	return l.refs == 0
}

// startLoadLocked begins loading e in the background, first unloading the
// least recently used idle models if Config.Max would be exceeded.
func (r *Router[I]) startLoadLocked(e *Model[I]) {
	var evicted []*loaded[I]
	if r.Multi() && r.cfg.Max > 0 {
		for {
			n := 0
			for _, o := range r.models {
				if o != e && (o.state == Loaded || o.state == Loading) {
					n++
				}
			}
			if n < r.cfg.Max {
				break
			}
			var lru *Model[I]
			for _, o := range r.models {
				if o != e && o.state == Loaded && o.cur.refs == 0 && (lru == nil || o.lastUsed.Before(lru.lastUsed)) {
					lru = o
				}
			}
			if lru == nil {
				r.cfg.Log.Warn("models_max reached and every loaded model is busy; loading anyway", "model", e.name)
				break
			}
			l := lru.cur
			r.cfg.Log.Info("unloading least recently used model", "model", lru.name, "for", e.name)
			if r.retireLocked(lru, Unloaded) {
				evicted = append(evicted, l)
			}
		}
	}
	ch := make(chan struct{})
	e.state = Loading
	e.loading = ch
	e.loadErr = nil
	r.notifyLocked(e, nil)
	r.loads.Add(1)
	go func() {
		defer r.loads.Done()
		for _, l := range evicted {
			l.close()
		}
		start := time.Now()
		inst, info, err := r.open(e)
		r.mu.Lock()
		defer r.mu.Unlock()
		defer close(ch)
		if r.closed {
			if err == nil {
				go inst.Close()
			}
			e.state, e.loadErr = Unloaded, ErrClosed
			return
		}
		if err != nil {
			r.cfg.Log.Error("load model failed", "model", e.name, "err", err)
			e.state, e.loadErr, e.failed = Unloaded, err, true
			r.notifyLocked(e, map[string]any{"failed": true})
			return
		}
		r.cfg.Log.Info("model loaded", "model", e.name, "seconds", time.Since(start).Seconds())
		first := e.info == nil
		e.info = info
		e.cur, e.state, e.failed = &loaded[I]{inst: inst, model: e}, Loaded, false
		e.lastUsed = time.Now()
		if first {
			r.notifyLocked(e, map[string]any{"info": r.cardLocked(e)})
		} else {
			r.notifyLocked(e, nil)
		}
		r.armIdleLocked(e)
	}()
}

// open pulls e's model when it comes from the hub and not yet pulled, and
// opens it with Config.Open.
func (r *Router[I]) open(e *Model[I]) (inst I, info *Info, err error) {
	r.mu.Lock()
	sp := Spec{Name: e.name, Path: e.path, Settings: e.settings}
	hfRepo, hf := e.hfRepo, e.hf
	r.mu.Unlock()
	if sp.Path == "" && hfRepo != "" {
		r.cfg.Log.Info("pulling model", "model", sp.Name, "hf_repo", hfRepo)
		p, err := hub.Pull(r.ctx, hfRepo, *hf)
		if err != nil {
			return inst, nil, err
		}
		sp.Path = p
		r.mu.Lock()
		e.path = p
		r.mu.Unlock()
	}
	return r.cfg.Open(r.ctx, sp)
}

// Unload unloads e (waiting for a load in progress to end first).
func (r *Router[I]) Unload(ctx context.Context, e *Model[I]) error {
	r.mu.Lock()
	for e.state == Loading {
		ch := e.loading
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
	}
	l := e.cur
	var closeNow bool
	switch e.state {
	case Loaded:
		closeNow = r.retireLocked(e, Unloaded)
	case Sleeping:
		e.state = Unloaded
		r.notifyLocked(e, nil)
	default:
		r.mu.Unlock()
		return errors.New("model is not loaded")
	}
	r.mu.Unlock()
	if closeNow {
		l.close()
	}
	return nil
}

// Stop refuses new users (Acquire returns ErrClosed) and detaches every
// loaded instance, which its last user's release closes. It reports
// whether this call stopped the router (false: it was stopped already).
// Drain finishes the work.
func (r *Router[I]) Stop() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.closed = true
	for _, e := range r.models {
		if e.idle != nil {
			e.idle.Stop()
			e.idle = nil
		}
		if e.cur != nil {
			r.stopped = append(r.stopped, e.cur)
			e.cur.retired = true // the last release closes it
			e.cur = nil
			e.state = Unloaded
		}
	}
	return true
}

// Drain waits until the instances Stop detached have no users or ctx is
// done, then cancels loads and downloads in progress, closes every
// instance and waits for the loads to end.
func (r *Router[I]) Drain(ctx context.Context) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for r.busy() {
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	r.cancel()
	r.mu.Lock()
	stopped := r.stopped
	r.mu.Unlock()
	for _, l := range stopped {
		l.close()
	}
	r.loads.Wait()
}

// busy reports whether any instance Stop detached still has a user.
func (r *Router[I]) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.stopped {
		if l.refs > 0 {
			return true
		}
	}
	return false
}
