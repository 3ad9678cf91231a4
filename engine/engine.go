package engine

// The loop: one goroutine (run) owns the Context, the Batch, the slots and
// their samplers, after llama.cpp's server (tools/server/server-context.cpp);
// other goroutines talk to it through the queue and control functions
// under e.mu, and read events through their Stream's outbox.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/seqstate"
)

// ErrQueueFull is returned by Submit when Options.QueueSize requests
// already wait. It is a *llama.Error of code llama.CodeBusy, so it also
// matches llama.ErrBusy; errors.Is(err, ErrQueueFull) tells it from a
// busy Context.
var ErrQueueFull = &llama.Error{Code: llama.CodeBusy, Op: "engine", Msg: "too many requests queued"}

// ErrBusy is ErrQueueFull.
//
// Deprecated: use ErrQueueFull; llama.ErrBusy is a Context used by two
// goroutines at once.
var ErrBusy = ErrQueueFull

// ErrClosed is the error of Submit (and of the last event of running
// requests) once the engine is closed: a *llama.Error of code
// llama.CodeClosed, which matches llama.ErrClosed.
var ErrClosed = &llama.Error{Code: llama.CodeClosed, Op: "engine", Msg: "the engine is closed"}

// ContextSizeError is the error event of a request whose prompt does not fit
// its slot's context (llama.cpp's exceed_context_size_error). It matches
// llama.ErrNoKVSlot with errors.Is.
type ContextSizeError struct {
	PromptTokens int // tokens of the prompt
	CtxSize      int // tokens of the slot's context
}

// Error says how many tokens the prompt has and how many the context holds.
func (e *ContextSizeError) Error() string {
	return fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it",
		e.PromptTokens, e.CtxSize)
}

// Is makes errors.Is(err, llama.ErrNoKVSlot) true.
func (e *ContextSizeError) Is(target error) bool { return target == llama.ErrNoKVSlot }

// DefaultPrefillChunk is Options.PrefillChunk's default: prompts of at
// most 32 tokens (at the start of a sequence; fewer deeper in one) go
// whole into a step beside generating slots, and a long prompt's first
// chunk is that size.
const DefaultPrefillChunk = 32

// DefaultPrefillSlowdown is Options.PrefillSlowdown's default: a step
// that prefills a chunk of a long prompt beside generating slots takes
// about twice a step of theirs before the prefill began: their streams
// keep at least half their speed. Measured on the 125M benchmark model,
// 2 threads, 7 streams beside a 4,000-token prompt (BenchmarkLimitPrefillGap
// and real streaming clients): at 2 the gaps during the prefill were
// 1.9-2.2x the median gap before it (p50) and 2.6-3.2x (p99), the prompt's
// first token after 65-98 s (the machine's speed varied by a third); at
// 2.5, 2.2-2.6x and 2.8-3.3x after 30-37 s; at 3, 3.0-3.1x and 3.8-4.0x
// after 26-31 s; in whole batches (as llama-server, PrefillChunk -1), 80x
// and 128x after 5 s.
const DefaultPrefillSlowdown = 2.0

// Options configure New. The zero value is a completion engine
// with one slot and llama.cpp's defaults.
type Options struct {
	// Context configures the llama.Context the engine runs on, as
	// llama.Model.NewContext takes it, with these fields set by the engine:
	//   - Sequences is Parallel: each slot is a sequence.
	//   - ContextSize 0 is NewContext's: the model's training context
	//     for each slot (for the one buffer with KVUnified), lowered to
	//     fit the memory as llama.Model.FitContext says (llama-server's
	//     --fit). The
	//     context is shared by the slots: each gets ContextSize/Parallel
	//     positions, or with KVUnified, one KV buffer of ContextSize
	//     positions shared by all slots, each using what the others leave
	//     free up to the whole context (see KVUnifiedPerSlot); when it is
	//     full, the idle slots' memory is freed and the decode tried
	//     again, and failing that one request is preempted (see
	//     preempt.go): its memory is decoded again once it fits. No
	//     slot gets more positions than the model's training context.
	//   - BatchSize 0 is 2048 and UBatchSize 0 is 512, at most BatchSize;
	//     the engine's batches are BatchSize tokens.
	//   - Embeddings is set for embedding engines (Embedding, Reranking)
	//     and unset otherwise. An embedding engine also uses KVUnified,
	//     BatchSize UBatchSize (each input must fit in one micro-batch)
	//     and Pooling as given (PoolingRank with Reranking); a completion
	//     engine uses the model's Pooling.
	// The others (threads, thread pools, KV cache types, flash attention,
	// Attention, RoPE and YaRN, offloading, SWAFull, OutputsMax,
	// RecurrentSnapshots, Perf) are passed as they are.
	Context llama.ContextOptions
	// Parallel is the number of slots, each a sequence of the one context
	// (default 1).
	Parallel int
	// PrefillChunk and PrefillSlowdown say how prompts are decoded while
	// other slots generate, so that a long prompt is prefilled in chunks
	// between their steps and their streams never stall for the whole
	// prefill (on a CPU, a decode's time grows with its tokens, and a
	// prompt token deep in a long prompt costs several times one at its
	// start). The engine measures its steps and sizes each chunk so that
	// a step with prompt tokens takes about PrefillSlowdown times a step
	// of the generating slots alone when the prefill began (default
	// DefaultPrefillSlowdown; negative: chunks of PrefillChunk tokens;
	// see prefill.go for how the steps are measured). A prompt that costs at most
	// PrefillChunk tokens (a token at position p counting 1+p/1024) goes
	// whole, and so does the first chunk of a long one until the costs are
	// measured (default DefaultPrefillChunk). At least one prompt token
	// goes in each step. When no slot is generating, prompts fill the
	// batch (BatchSize) as before, so a lone request's time to first token
	// does not change. A negative PrefillChunk turns all this off: a prompt
	// fills whatever room the batch has, as in llama-server.
	PrefillChunk    int
	PrefillSlowdown float64
	// SampleThreads is how many goroutines sample the rows of one step's
	// slots at once (llama.Context.SampleParallel), the engine's loop
	// included: 1, one after another; negative, GOMAXPROCS; 0, chosen by
	// where the model runs (see DefaultSampleThreads): GOMAXPROCS where
	// it runs on a GPU (llama.Model.OnGPU), one after another elsewhere.
	// Sampling at once pays where the decode leaves the cores free (on a
	// GPU the rows' sampling is CPU work between two decodes, on the
	// critical path); on a CPU the compute threads hold the cores, and a
	// helper's wake-up lands in the next decode, which costs more than the
	// sampling saves. Steps of one row, and slots with a grammar, sample
	// one after another in any case; each slot's chain samples its own
	// row, so the tokens are the same whatever the count.
	SampleThreads int
	// BackendSampling says which requests sample inside the decode's
	// graph (llama.cpp's backend sampling: no row of logits is copied to
	// the host) when their chain allows it (no grammar, no n_probs, no
	// media, no drafts, samplers llama.cpp can run there). The default,
	// BackendSamplingAuto, does so for every such request where the model
	// runs on a GPU and for those that ask elsewhere. A seeded request
	// draws from the backend's generator then, so its tokens differ from
	// the ones CPU sampling gives (greedy ones do not).
	BackendSampling BackendSamplingMode
	// NoWarmup skips llama-server's warm-up: by default the engine
	// decodes (or encodes) the model's BOS and EOS once before it starts
	// (and its draft model's, with Speculative), then clears the memory, so
	// that the first request does not pay for what a first decode sets
	// up: a GPU's kernels and library handles, Vulkan's pipelines, the
	// pages of weights mapped from the file.
	NoWarmup bool
	// Embedding makes an embedding engine: it runs KindEmbedding (and, with
	// Reranking, KindRerank) requests instead of completions.
	Embedding bool
	// Reranking makes an embedding engine with PoolingRank for KindRerank.
	Reranking bool
	// ContextShift, when a slot's context is full, drops half of the tokens
	// after NKeep and goes on (and truncates too long prompts); without it
	// generation stops with StopTypeLimit and too long prompts are errors.
	// A memory that cannot shift positions (llama.Memory.CanShift; a
	// windowed cache cannot) turns it off, as llama-server does.
	ContextShift bool
	// CacheReuse is llama.cpp's --cache-reuse: with a request's CachePrompt,
	// after the common prefix of the prompt and the slot's cached tokens,
	// every further run of at least CacheReuse tokens that the prompt
	// continues with and that still sits later in the cache is moved to
	// its new position (ShiftTokens) instead of being decoded again; the
	// cached tokens skipped over are dropped. Like llama.cpp, it only
	// closes gaps (tokens the new prompt no longer has); tokens inserted in
	// the new prompt end the reuse. The moved entries were computed in
	// their old context, so results are close to, not always the same as,
	// decoding the prompt afresh. 0 (the default) turns it off, as does a
	// memory that cannot shift, and a recurrent or hybrid model (unlike
	// llama-server: a recurrent state cannot forget the skipped tokens). A request's CacheReuse overrides it.
	CacheReuse int
	// SlotSimilarity is the share of a prompt's tokens that a free slot's
	// cache must hold as its prefix (more than it) for a CachePrompt
	// completion to pick that slot for its cache (llama-server's
	// --slot-prompt-similarity). Among the slots above it the one
	// sharing the most wins; with none, the least recently used, so that
	// a new conversation leaves a recent one's cache alone over a few
	// common tokens. 0: 0.1, llama-server's default; negative: never by
	// the cache, always the least recently used.
	SlotSimilarity float64
	// QueueSize is the most requests that may wait for a slot before Submit
	// returns ErrQueueFull (0: 4*Parallel+16).
	QueueSize int
	// Adapters are LoRA adapters loaded at start, each with its default scale.
	Adapters []AdapterSpec
	// ControlVectors are control vector files applied at start, as
	// llama.cpp's --control-vector and --control-vector-scaled: summed with
	// their scales (llama.LoadControlVectors) and added to the output of
	// layers ControlVectorStart to ControlVectorEnd, both included (0 or
	// less: layer 1 and the model's last layer). Directions for layers the
	// model does not have are ignored, as llama.cpp does.
	ControlVectors                       []llama.ControlVectorFile
	ControlVectorStart, ControlVectorEnd int
	// PromptCacheMiB bounds the host-RAM prompt cache (llama-server's
	// --cache-ram): a completion request that makes its slot drop more than
	// half of its cached prompt first saves that prompt's KV state there
	// (with or without its CachePrompt, as llama-server), and with
	// CachePrompt restores the cached prompt that best continues its own. 0: 8192
	// MiB (llama-server's default); negative: no limit. NoPromptCache
	// turns the cache off (--cache-ram 0).
	PromptCacheMiB int
	NoPromptCache  bool
	// NoCacheIdleSlots stops saving the idle slots' prompts to the prompt
	// cache whenever a request starts (llama-server's --no-cache-idle-slots);
	// by default they are saved, and with KVUnified their memory is then
	// freed for the busy slots.
	NoCacheIdleSlots bool
	// Special outputs special tokens (control tokens) as their text
	// (llama-server's -sp); by default they render as nothing, except a
	// request's preserved tokens.
	Special bool
	// Logger receives the engine's debug logs, and at Error level the
	// panics it recovers with their stacks (nil: no debug logs, and the
	// panics go to slog.Default()).
	Logger *slog.Logger
	// KVUnifiedPerSlot caps the positions one slot may use with
	// Context.KVUnified (llama-server's --kv-unified-per-slot; 0: the whole
	// context).
	KVUnifiedPerSlot int
	// Speculative configures speculative decoding (zero value: off).
	Speculative SpeculativeOptions
	// ContextCheckpoints is the most context checkpoints a slot keeps with
	// a windowed KV cache (llama-server's --ctx-checkpoints; see
	// checkpoint.go): 0, DefaultContextCheckpoints; negative, none (a
	// prompt that keeps only a part of what its slot holds is then decoded
	// again from its start); at most MaxContextCheckpoints. Each holds a
	// window's KV entries in host memory. CheckpointMinStep is the
	// spacing in tokens below which a new request drops the previous
	// requests' checkpoints (--checkpoint-min-step): 0,
	// DefaultCheckpointMinStep; negative, none. Recurrent and hybrid
	// models (llama.ModelInfo.Recurrent, Hybrid) take them too, of their
	// recurrent state. Without a windowed cache (Context.SWAFull, or a
	// model without sliding-window layers) or a recurrent state they have
	// no effect.
	ContextCheckpoints int
	CheckpointMinStep  int
	// TrimIdle is how long the engine waits, idle after work, before it
	// returns the C heap's free memory to the system (llama.TrimMemory):
	// what llama.cpp allocates and frees while decoding and sampling stays
	// in the process, counted in its resident size, until then. The
	// engine trims once per idle spell, on a goroutine of its own (it
	// takes milliseconds, growing with the memory held); a request
	// arriving meanwhile starts at once, its C allocations waiting only
	// while the trim holds their arena. 0: DefaultTrimIdle; negative:
	// never.
	TrimIdle time.Duration
}

// DefaultTrimIdle is Options.TrimIdle's default.
const DefaultTrimIdle = time.Second

// BackendSamplingMode is Options.BackendSampling: which requests sample
// inside the decode (see sampling.Params.BackendSampling).
type BackendSamplingMode int

const (
	// BackendSamplingAuto: where the model runs on a GPU
	// (llama.Model.OnGPU), every request whose chain the backend can run;
	// elsewhere, the requests that ask (sampling.Params.BackendSampling).
	BackendSamplingAuto BackendSamplingMode = iota
	// BackendSamplingAsked: only the requests that ask, wherever the
	// model runs (llama-server's default).
	BackendSamplingAsked
	// BackendSamplingAlways: every request whose chain the backend can
	// run, wherever the model runs.
	BackendSamplingAlways
)

// DefaultSampleThreads is the number of goroutines that sample a step's
// rows for Options.SampleThreads n on a model that runs on a GPU or not
// (llama.Model.OnGPU), with procs the GOMAXPROCS: n when above 0, procs
// when negative; for 0, procs on a GPU and 1 (one after another)
// elsewhere, so that a CPU run never shares its compute threads' cores.
func DefaultSampleThreads(n int, onGPU bool, procs int) int {
	switch {
	case n > 0:
		return n
	case n < 0 || onGPU:
		return max(procs, 1)
	}
	return 1
}

// backendForAll reports whether mode m samples every request the backend
// can run there, on a model that runs on a GPU or not.
func (m BackendSamplingMode) backendForAll(onGPU bool) bool {
	return m == BackendSamplingAlways || (m == BackendSamplingAuto && onGPU)
}

// AdapterSpec is a LoRA adapter file and its default scale.
type AdapterSpec struct {
	Path  string
	Scale float32
}

type engSlotState int

const (
	stIdle engSlotState = iota
	stPrompt
	stGen
	// stWait: preempted (see preempt), its memory given up; it waits
	// for free memory (wakePreempted).
	stWait
	// stRecompute: decoding its tokens (engSlot.resume) again after a
	// preemption, then back to engSlot.resumeTo.
	stRecompute
)

// request is a submitted Request with its plumbing.
type engTask struct {
	id     int64
	t      *Request
	ctx    context.Context
	ob     *outbox
	scales []float32 // effective LoRA scales
	stop   func() bool
	// smpl is the completion's sampler chains, built by Submit on the
	// caller's goroutine rather than by the loop when the request starts
	// (see prebuild); nil once the slot took them, or for other kinds.
	smpl *taskSampler
}

// taskSampler is a request's sampler chains as newSampler returns them,
// or the error building them gave.
type taskSampler struct {
	chain, gram  *llama.SamplerChain
	acceptPrompt bool
	err          error
}

// close frees chains no slot took.
func (ts *taskSampler) close() {
	if ts.chain != nil {
		ts.chain.Close()
	}
	if ts.gram != nil {
		ts.gram.Close()
	}
}

// prebuild builds the sampler chains of completion request t for Submit.
// Building them (a grammar's parse above all, which can take
// milliseconds) on the loop when the request starts held back every
// other slot's step and the request's own first token; on the caller's
// goroutine it overlaps the requests already running. A panic there is
// the request's error, as it was in the loop's start.
func (e *Engine) prebuild(ctx context.Context, t *Request) (ts *taskSampler) {
	ts = &taskSampler{}
	defer func() {
		if v := recover(); v != nil {
			pe := llama.NewPanicError("engine: start", v)
			e.logPanic(pe, -1)
			ts.close()
			*ts = taskSampler{err: pe}
		}
	}()
	ts.chain, ts.gram, ts.acceptPrompt, ts.err = e.newSampler(ctx, &t.Params, t.Samplers)
	return ts
}

// takeSampler returns slot s's request's sampler chains, built by Submit,
// or builds them now for a request submitted without them. The slot owns
// them from then on.
func (e *Engine) takeSampler(s *engSlot) (chain, gram *llama.SamplerChain, acceptPrompt bool, err error) {
	ts := s.tk.smpl
	if ts == nil {
		return e.newSampler(e.baseCtx, &s.tk.t.Params, s.tk.t.Samplers)
	}
	s.tk.smpl = nil
	return ts.chain, ts.gram, ts.acceptPrompt, ts.err
}

type Engine struct {
	// loopG is the loop goroutine's id (see curGoroutine): Close and the
	// slot actions called from code the loop runs (a request's Go
	// samplers, its drafters) must not wait for the loop.
	loopG atomic.Uint64

	// slotLayout is the layout of the slots' sequence states (see
	// readSlotFile).
	slotLayout seqstate.Layout
	// slotHeaded: the library's sequence states start with their buffer
	// header, which a slot file leaves out.
	slotHeaded bool

	gens []*engSlot // the generating slots of a step (scratch)
	// toSample and sampleJobs are the step's slots to sample and their
	// jobs for presample, kept between steps.
	toSample      []*engSlot
	sampleJobs    []llama.SampleJob
	sampleWorkers int
	presampled    int // steps presample sampled (for tests)
	// coresTaken: the decode's threads take every core (see
	// handOffFirst); firstOut: the outboxes whose first token the last
	// step pushed, waking their readers.
	coresTaken bool
	firstOut   []*outbox

	model    *llama.Model
	opts     Options
	lctx     *llama.Context
	nCtxSlot int
	// kvCells is the KV memory in tokens, all slots together.
	kvCells int
	// preemptSeq numbers the preemptions (engSlot.waitSeq).
	preemptSeq int64
	nBatch     int
	batch      *llama.Batch
	slots      []*engSlot
	adapters   []*llama.Adapter
	applied    []float32 // scales active on lctx
	eog        []llama.Token
	isEOG      []bool   // by token
	pieces     []string // token texts, filled on first use by the loop
	havePiece  []bool
	addBOS     bool
	embedding  bool
	canReuse   bool         // cache reuse is possible: a completion engine whose memory can shift
	canCopy    bool         // prompts may be copied from slot to slot (see copyPrefix)
	pcache     *promptCache // nil: off
	// The loop's time in the iterations that decoded, and in Decode
	// itself (the loop goroutine's; the benchmarks read them through do).
	busyTime, decodeTime time.Duration
	pacer                *prefillPacer // sizes prompt chunks beside generating slots (loop only)
	nBackend             int           // requests that sampled on the backend (loop only)
	backendAll           bool          // every request the backend can run samples there (Options.BackendSampling)
	queueSize            int
	spec                 *engSpec // speculative decoding (nil: off)

	// The LoRA sets /metrics last reported, and when they changed.
	loraRunning, loraWaiting []string
	loraChanged              time.Time

	baseCtx context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	wake    chan struct{}
	// expected counts the requests announced by Expect and not yet
	// submitted (see gather).
	expected atomic.Int64
	// The loop's: the longest gather holds back for expected requests
	// and for a burst.
	gatherWait, burstWait time.Duration
	// The loop's record of its busy periods, each from a wake to going
	// idle (see gather): the worked turns of this one and the requests
	// its first turn started; the decode time of the last period's first
	// step, and the burst that began it (the requests its first two turns
	// started, 0 if fewer than two).
	period   int
	started1 int
	lead     time.Duration
	burstN   int
	parked   atomic.Bool  // the loop waits for a wake (for tests)
	parks    atomic.Int64 // the times it began to (for tests)
	trims    atomic.Int64 // the C heap trims it made (for tests)

	// trimDue: the engine has worked since its last trim; trimIdle is
	// Options.TrimIdle resolved.
	trimDue  bool
	trimIdle time.Duration
	// cthread runs the grammars' whole-row passes (see cThread), started
	// by the first.
	cthread *cThread
	// clock is the loop's time by phase; metrics.Steps its copy as of
	// the last publish, and idleSince when the loop's current idle wait
	// began (zero while it works).
	clock stepClock

	mu      sync.Mutex
	closed  bool
	queue   []*engTask
	ctrl    []func()
	scales  []float32 // server-wide default adapter scales
	busy    int       // slots with a request
	nextID  int64
	metrics Metrics
	busySum int64         // busy slots summed over decodes
	idleCh  chan struct{} // closed when a slot goes idle (see slotReleased)
	snap    []engSlotSnap
	// idleSince is when the loop's current idle wait began (zero while
	// it works); Metrics adds the wait so far to metrics.Steps.
	idleSince time.Time
	// Sliding window (see checkpoint.go): the model's window without
	// SWAFull (0: none), the micro-batch, the checkpoint settings, the
	// hash seed.
	nSwa, nUBatch, nCkpt, ckptStep int
	ckptSeed                       maphash.Seed
	modelSwa                       int  // with SWAFull, the model's sliding window (0: none)
	recurrent                      bool // a recurrent or hybrid model's memory: checkpoints too
}

type engSlotSnap struct {
	processing bool
	prompt     []llama.Token
	nPast      int
	nDecoded   int
	taskID     int64
	used       bool // has run a request (taskID is the current or last one)
	// The prompt tokens decoded and reused from the cache (while
	// processing), and the current or last request.
	promptProcessed, promptCached int
	req                           *Request
}

// New starts an engine on m; the caller keeps ownership of m and
// must Close the engine before the model.
func New(m *llama.Model, o Options) (*Engine, error) {
	if m == nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "engine", Msg: "nil model"}
	}
	if o.Parallel <= 0 {
		o.Parallel = 1
	}
	if o.Context.BatchSize <= 0 {
		o.Context.BatchSize = 2048
	}
	if o.Context.UBatchSize <= 0 {
		o.Context.UBatchSize = 512
	}
	if o.Context.UBatchSize > o.Context.BatchSize {
		o.Context.UBatchSize = o.Context.BatchSize
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 4*o.Parallel + 16
	}
	if o.PrefillChunk == 0 {
		o.PrefillChunk = DefaultPrefillChunk
	}
	if o.PrefillSlowdown == 0 {
		o.PrefillSlowdown = DefaultPrefillSlowdown
	}
	if math.IsNaN(o.PrefillSlowdown) || math.IsInf(o.PrefillSlowdown, 0) {
		return nil, fmt.Errorf("engine: PrefillSlowdown %v is not a finite number: %w", o.PrefillSlowdown, llama.ErrInvalid)
	}
	nCkpt, ckptStep, err := ckptSettings(o)
	if err != nil {
		return nil, err
	}
	embedding := o.Embedding || o.Reranking
	copts := o.Context
	copts.Sequences = o.Parallel
	copts.Embeddings = embedding
	switch {
	case !embedding:
		copts.Pooling = llama.PoolingDefault
	case o.Reranking:
		copts.Pooling = llama.PoolingRank
	}
	if embedding {
		// One decode of at most UBatchSize tokens, so that each sequence is
		// pooled from one micro-batch; unified KV for simple splitting.
		copts.KVUnified = true
		copts.BatchSize = copts.UBatchSize
	}
	if !embedding {
		// An MTP head file named without types turns draft-mtp on, once
		// for the context's snapshots and the drafters below.
		o.Speculative.InferTypes()
		copts.RecurrentSnapshots = max(copts.RecurrentSnapshots, o.Speculative.recurrentSnapshots(m))
	}
	lctx, err := m.NewContext(copts)
	if err != nil {
		return nil, err
	}
	if copts.ContextSize == 0 && o.Logger != nil {
		full := copts
		full.Fit.Off = true
		if f, err := m.FitContext(full); err == nil && lctx.Size() < f.Wanted {
			o.Logger.Warn(fmt.Sprintf("context size lowered from %d (the training context for each KV stream) to %d to fit the free memory; -c sets it, --fit off keeps it", f.Wanted, lctx.Size()))
		}
	}
	// The size chosen, for what sizes itself after it (a draft model's
	// context, as llama-server's, is the main context's size).
	o.Context.ContextSize = lctx.Size()
	if err := applyControlVectors(m, lctx, o); err != nil {
		lctx.Close()
		return nil, err
	}
	e := &Engine{
		model: m, opts: o, lctx: lctx, embedding: embedding, queueSize: o.QueueSize,
		pacer: newPrefillPacer(o.PrefillChunk, o.PrefillSlowdown),
		done:  make(chan struct{}), wake: make(chan struct{}, 1), gatherWait: gatherWait, burstWait: burstWait,
		addBOS: m.SpecialTokens().AddBOS,
	}
	e.sampleWorkers = DefaultSampleThreads(o.SampleThreads, m.OnGPU(), runtime.GOMAXPROCS(0))
	switch e.trimIdle = o.TrimIdle; {
	case e.trimIdle == 0:
		e.trimIdle = DefaultTrimIdle
	case e.trimIdle < 0:
		e.trimIdle = 0
	}
	e.backendAll = o.BackendSampling.backendForAll(m.OnGPU())
	nThreads, _ := lctx.Threads()
	// The cores: those this process may run on, or fewer where its CPU
	// quota (which Go's GOMAXPROCS follows) allows less.
	e.coresTaken = coresTaken(m.OnGPU(), nThreads, min(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	// With a unified KV buffer each slot may use the whole context, as in
	// llama-server (llama_n_ctx_seq); slots then share its cells.
	e.nCtxSlot = lctx.SeqSize()
	switch {
	case embedding:
		e.nCtxSlot = lctx.Size() / o.Parallel
	case copts.KVUnified:
		// As llama-server: with a unified KV cache a slot may use the
		// whole context (what the others leave free), capped by
		// KVUnifiedPerSlot (and by the model's training context, below).
		e.nCtxSlot = lctx.Size()
		if o.KVUnifiedPerSlot > 0 {
			e.nCtxSlot = min(e.nCtxSlot, o.KVUnifiedPerSlot)
		}
	}
	// As llama-server: no slot gets more than the model was trained on,
	// whatever the context size (with a warning when that caps it).
	if train := m.TrainContext(); train > 0 && e.nCtxSlot > train {
		if o.Logger != nil {
			o.Logger.Warn(fmt.Sprintf("the slot context (%d) exceeds the training context of the model (%d) - capping", e.nCtxSlot, train))
		}
		e.nCtxSlot = train
	}
	e.kvCells = e.nCtxSlot * o.Parallel
	if copts.KVUnified {
		e.kvCells = lctx.Size() // one buffer the slots share
	}
	// A recurrent state (recurrent and hybrid models) cannot drop a
	// sequence's tail: prefix reuse goes through context checkpoints (see
	// checkpoint.go).
	if info, err := m.Info(); err == nil && !embedding && (info.Recurrent || info.Hybrid) {
		e.recurrent = true
		if o.CacheReuse > 0 && o.Logger != nil {
			o.Logger.Warn("cache_reuse is not supported by a recurrent state, it will be disabled")
		}
	}
	canShift := lctx.Memory().CanShift()
	e.canReuse = !embedding && canShift && !e.recurrent
	if o.ContextShift && !canShift {
		// As llama-server: a memory that cannot shift positions (a
		// windowed sliding-window cache, ...) turns context shift off.
		if o.Logger != nil {
			o.Logger.Warn("ctx_shift is not supported by this context, it will be disabled")
		}
		e.opts.ContextShift = false
	}
	e.nUBatch, e.ckptSeed = lctx.UBatchSize(), maphash.MakeSeed()
	e.nCkpt, e.ckptStep = nCkpt, ckptStep
	if info, err := m.Info(); err == nil && !embedding && info.SlidingWindow > 0 {
		// As llama-server, the window's rules (checkpoints, the check of a
		// kept prefix) follow the model's window without SWAFull, even
		// when the context is small enough for llama.cpp to give the
		// window's layers the whole context anyway.
		if copts.SWAFull {
			e.modelSwa = info.SlidingWindow
		} else {
			e.nSwa = info.SlidingWindow
		}
	}
	// Copying a prefix between slots needs separate KV streams (a unified
	// cache would share cells, which a later shift of one sequence would
	// move for both) and a memory that can drop a sequence's tail.
	// With a sliding window the copy's window could not be checked before
	// the decode that makes it.
	if info, err := m.Info(); err == nil && !embedding && !copts.KVUnified && o.Parallel > 1 && e.nSwa == 0 {
		e.canCopy = !info.Recurrent && !info.Hybrid
	}
	if !embedding {
		log := o.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		if e.pcache = newPromptCache(o, log); e.pcache != nil && !o.NoCacheIdleSlots {
			// llama-server's debug marker, which its test suite looks for.
			log.Debug("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__ idle slots go to the prompt cache when a request starts")
		}
	}
	e.nBatch = lctx.BatchSize()
	if embedding {
		e.nBatch = min(e.nBatch, lctx.UBatchSize())
	}
	if embedding && lctx.Pooling() == llama.PoolingRank && !o.Reranking {
		o.Reranking = true
		e.opts.Reranking = true
	}
	e.batch = llama.NewBatch(e.nBatch, 1)
	e.isEOG = make([]bool, m.VocabSize())
	e.pieces = make([]string, m.VocabSize())
	e.havePiece = make([]bool, m.VocabSize())
	for t := range e.isEOG {
		if m.IsEOG(llama.Token(t)) {
			e.eog = append(e.eog, llama.Token(t))
			e.isEOG[t] = true
		}
	}
	// fail frees what New made so far.
	fail := func(err error) (*Engine, error) {
		e.spec.close()
		for _, x := range e.adapters {
			x.Close()
		}
		lctx.Close()
		return nil, err
	}
	for _, a := range o.Adapters {
		ad, err := m.LoadAdapter(a.Path)
		if err != nil {
			return fail(err)
		}
		e.adapters = append(e.adapters, ad)
		e.scales = append(e.scales, a.Scale)
	}
	if err := e.applyScales(e.scales); err != nil {
		return fail(err)
	}
	if e.spec, err = newEngSpec(m, lctx, o); err != nil {
		return fail(err)
	}
	if !o.NoWarmup {
		err := warmUp(m, lctx)
		if dc := e.spec.draftContext(); err == nil && dc != nil {
			err = warmUp(e.spec.draftModel(), dc)
		}
		if err != nil {
			return fail(fmt.Errorf("engine: warm-up: %w", err))
		}
	}
	// The layout of a slot's state, read from an empty sequence (the
	// warm-up cleared the memory): RestoreSlot walks a file's state with
	// it before reading it whole.
	if !embedding {
		if empty, err := lctx.SeqState(0); err == nil {
			e.slotLayout = seqstate.ParseLayout(empty)
			_, e.slotHeaded = seqstate.CutHeader(empty)
		}
	}
	e.slots = make([]*engSlot, o.Parallel)
	e.snap = make([]engSlotSnap, o.Parallel)
	for i := range e.slots {
		e.slots[i] = &engSlot{id: i, iBatch: -1}
	}
	e.baseCtx, e.cancel = context.WithCancel(context.Background())
	e.clock.last = time.Now()
	go e.run()
	return e, nil
}

// warmUp is llama-server's warm-up run on c, a context of m: one decode
// of the model's BOS and EOS (token 0 where it has neither) in sequence
// 0, waited for, then the memory is cleared.
func warmUp(m *llama.Model, c *llama.Context) error {
	st := m.SpecialTokens()
	var toks []llama.Token
	for _, t := range []llama.Token{st.BOS, st.EOS} {
		if t != llama.NoToken {
			toks = append(toks, t)
		}
	}
	if len(toks) == 0 {
		toks = []llama.Token{0}
	}
	toks = toks[:min(len(toks), c.BatchSize())]
	b := llama.NewBatch(len(toks), 1)
	if err := b.AddSequence(toks, 0, 0, true); err != nil {
		return err
	}
	if err := c.Decode(context.Background(), b); err != nil {
		return err
	}
	// Wait for the decode's work (a GPU's decode only queues it).
	if err := c.Synchronize(); err != nil {
		return err
	}
	return c.Memory().Clear()
}

// applyControlVectors loads and applies o.ControlVectors to lctx.
func applyControlVectors(m *llama.Model, lctx *llama.Context, o Options) error {
	if len(o.ControlVectors) == 0 {
		return nil
	}
	data, nEmbd, err := llama.LoadControlVectors(o.ControlVectors...)
	if err != nil {
		return err
	}
	info, err := m.Info()
	if err != nil {
		return err
	}
	if nEmbd != info.EmbeddingSize {
		return &llama.Error{Code: llama.CodeInvalid, Op: "control vector",
			Msg: fmt.Sprintf("directions of %d values, the model's embeddings have %d", nEmbd, info.EmbeddingSize)}
	}
	data = data[:min(len(data), info.Layers*nEmbd)]
	start, end := o.ControlVectorStart, o.ControlVectorEnd
	if start <= 0 {
		start = 1
	}
	if end <= 0 || end > info.Layers {
		end = info.Layers
	}
	return lctx.SetControlVector(data, start, end)
}

func (e *Engine) applyScales(sc []float32) error {
	if len(e.adapters) == 0 {
		e.applied = slices.Clone(sc)
		return nil
	}
	var as []llama.AdapterScale
	for i, a := range e.adapters {
		if sc[i] != 0 {
			as = append(as, llama.AdapterScale{Adapter: a, Scale: sc[i]})
		}
	}
	if err := e.lctx.SetAdapters(as); err != nil {
		return err
	}
	e.applied = slices.Clone(sc)
	return nil
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Model returns the engine's model.
func (e *Engine) Model() *llama.Model { return e.model }

// Submit queues req and returns the Stream of its events. Cancelling ctx,
// or closing the Stream, stops the request and frees its slot at once.
// Submit fails with ErrQueueFull when Options.QueueSize requests already wait,
// with ErrClosed once the engine is closed, and with an error matching
// llama.ErrInvalid or llama.ErrUnsupported for a request this engine
// cannot run. The engine keeps req until the request ends; the caller must
// not change it meanwhile. A completion's sampler chains (its grammar's
// parse included) are built by Submit, on the caller's goroutine, so that
// the loop's steps never wait for them; an error building them is the
// request's last event, not Submit's error.
func (e *Engine) Submit(ctx context.Context, t *Request) (*Stream, error) {
	if t == nil {
		return nil, fmt.Errorf("engine: nil request: %w", llama.ErrInvalid)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	switch t.Kind {
	case KindCompletion:
		if e.embedding {
			return nil, fmt.Errorf("engine: this server is for embeddings, not completions: %w", llama.ErrUnsupported)
		}
	case KindEmbedding:
		if !e.embedding {
			return nil, fmt.Errorf("engine: embeddings need an engine started with Embedding: %w", llama.ErrUnsupported)
		}
		if e.opts.Reranking {
			return nil, fmt.Errorf("engine: this engine is for reranking: %w", llama.ErrUnsupported)
		}
	case KindRerank:
		if !e.embedding || !e.opts.Reranking {
			return nil, fmt.Errorf("engine: reranking needs an engine started with Reranking: %w", llama.ErrUnsupported)
		}
	default:
		return nil, fmt.Errorf("engine: unknown request kind %d: %w", t.Kind, llama.ErrInvalid)
	}
	if t.Kind == KindCompletion {
		// The limits apply to the engine's own copy: the caller's
		// request may be submitted again, even from several goroutines
		// at once, and is never written.
		cp := *t
		cp.Params = t.Params.Clone()
		t = &cp
		if err := t.Params.Limit(e.nCtxSlot, e.model.VocabSize()); err != nil {
			return nil, err
		}
		if t.PromptProbs {
			if t.Media != nil {
				return nil, fmt.Errorf("engine: prompt probabilities of a prompt with media: %w", llama.ErrUnsupported)
			}
			t.CachePrompt = false // every position decoded, for its logits
		}
	}
	if t.Kind != KindCompletion && len(t.Prompt) == 0 {
		return nil, fmt.Errorf("engine: empty input: %w", llama.ErrInvalid)
	}
	for _, tok := range t.Prompt {
		if tok == MediaPlaceholder && t.Media != nil {
			continue
		}
		if err := e.model.CheckToken(tok); err != nil {
			return nil, err
		}
	}
	if t.SlotID >= len(e.slots) {
		return nil, fmt.Errorf("engine: slot %d out of range [0, %d): %w", t.SlotID, len(e.slots), llama.ErrInvalid)
	}
	// Stop strings are matched on the loop at every token, every slot
	// waiting: 20,000 of them made a neighbour's tokens 12 times slower.
	if len(t.Stop) > MaxStopStrings {
		return nil, fmt.Errorf("engine: %d stop strings; at most %d are allowed: %w", len(t.Stop), MaxStopStrings, llama.ErrInvalid)
	}
	for _, s := range t.Stop {
		if len(s) > MaxStopBytes {
			return nil, fmt.Errorf("engine: a stop string of %d bytes; at most %d are allowed: %w", len(s), MaxStopBytes, llama.ErrInvalid)
		}
	}
	var smpl *taskSampler
	if t.Kind == KindCompletion {
		// A request the engine refuses anyway builds nothing (a full
		// queue must not cost a grammar's parse per refused request);
		// enqueue checks again once the chains are built.
		if err := e.refusal(); err != nil {
			return nil, err
		}
		smpl = e.prebuild(ctx, t)
	}
	st, err := e.enqueue(ctx, t, smpl)
	if err != nil && smpl != nil {
		smpl.close()
	}
	return st, err
}

// refusal returns the error Submit would give now for the engine's state
// (closed, or the queue full of tasks whose clients are still there), or
// nil.
func (e *Engine) refusal() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.admitLocked()
}

// admitLocked drops the queued tasks whose client left and returns
// ErrClosed or ErrQueueFull where a new task cannot be queued now. e.mu is
// held.
func (e *Engine) admitLocked() error {
	if e.closed {
		return ErrClosed
	}
	// Tasks whose client left no longer count.
	e.queue = slices.DeleteFunc(e.queue, func(q *engTask) bool {
		if q.ctx.Err() != nil {
			q.ob.push(nil, true)
			q.stop()
			return true
		}
		return false
	})
	if len(e.queue)+1-(len(e.slots)-e.busy) > e.queueSize {
		return ErrQueueFull
	}
	return nil
}

// enqueue queues t, whose sampler chains smpl are (nil for other kinds):
// the rest of Submit.
func (e *Engine) enqueue(ctx context.Context, t *Request, smpl *taskSampler) (*Stream, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	scales := slices.Clone(e.scales)
	for _, l := range t.LoRA {
		if l.ID < 0 || l.ID >= len(scales) {
			return nil, fmt.Errorf("engine: invalid adapter id %d: %w", l.ID, llama.ErrInvalid)
		}
		scales[l.ID] = l.Scale
	}
	if err := e.admitLocked(); err != nil {
		return nil, err
	}
	e.nextID++
	ctx, cancel := context.WithCancel(ctx)
	tk := &engTask{id: e.nextID, t: t, ctx: ctx, ob: newOutbox(), scales: scales, smpl: smpl}
	tk.ob.quiet = t.WakeAtEnd
	// Stopping a task also frees the chains its slot never took (a task
	// dropped from the queue, or one whose start failed before); the
	// queue's owner, or the loop once a slot has it, is the only caller.
	unhook := context.AfterFunc(ctx, e.poke)
	tk.stop = func() bool {
		if tk.smpl != nil {
			tk.smpl.close()
			tk.smpl = nil
		}
		return unhook()
	}
	e.queue = append(e.queue, tk)
	e.poke()
	return &Stream{ctx: ctx, cancel: cancel, ob: tk.ob}, nil
}

// do runs f on the loop goroutine and waits for it. A panic of f is
// recovered and returned (a *llama.PanicError), the loop going on.
func (e *Engine) do(f func()) error {
	if e.onLoop() {
		return errOnLoop
	}
	ran := make(chan struct{})
	var perr error
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.ctrl = append(e.ctrl, func() {
		defer close(ran)
		defer func() {
			if v := recover(); v != nil {
				pe := llama.NewPanicError("engine: control", v)
				e.logPanic(pe, -1)
				perr = pe
			}
		}()
		f()
	})
	e.mu.Unlock()
	e.poke()
	select {
	case <-ran:
		return perr
	case <-e.done:
		select {
		case <-ran:
			return perr
		default:
			return ErrClosed
		}
	}
}

// Adapters lists the loaded LoRA adapters with their server-wide scales.
func (e *Engine) Adapters() []AdapterInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]AdapterInfo, len(e.adapters))
	for i, a := range e.adapters {
		out[i] = AdapterInfo{ID: i, Path: a.Path(), Scale: e.scales[i]}
	}
	return out
}

// SetAdapterScales changes the server-wide scales (adapters not listed
// keep theirs); requests submitted afterwards use them.
func (e *Engine) SetAdapterScales(sc []LoRAScale) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range sc {
		if l.ID < 0 || l.ID >= len(e.scales) {
			return fmt.Errorf("engine: invalid adapter id %d: %w", l.ID, llama.ErrInvalid)
		}
	}
	for _, l := range sc {
		e.scales[l.ID] = l.Scale
	}
	return nil
}

// Slots returns the number of slots.
func (e *Engine) Slots() int { return len(e.slots) }

// SlotContext returns the context size of one slot, which is fixed when
// the engine starts. It is SlotsInfo's NCtx without the snapshot (and
// the prompts detokenized for it).
func (e *Engine) SlotContext() int { return e.nCtxSlot }

// SlotsInfo describes the slots as of the last loop step.
func (e *Engine) SlotsInfo() []SlotInfo {
	e.mu.Lock()
	snap := slices.Clone(e.snap)
	e.mu.Unlock()
	out := make([]SlotInfo, len(snap))
	for i, s := range snap {
		out[i] = SlotInfo{ID: i, NCtx: e.nCtxSlot, IsProcessing: s.processing, NPast: s.nPast,
			NDecoded: s.nDecoded, TaskID: s.taskID, HasTask: s.used, Speculative: e.spec != nil,
			PromptProcessed: s.promptProcessed, PromptCached: s.promptCached, Request: s.req}
		if len(s.prompt) > 0 {
			out[i].Prompt, _ = e.model.Detokenize(WithoutMedia(s.prompt), llama.DetokenizeOptions{})
		}
	}
	return out
}

// Metrics returns the counters.
func (e *Engine) Metrics() Metrics {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.metrics
	m.BusySlotsTotal = e.busySum
	m.DraftAcceptedPerPos = slices.Clone(m.DraftAcceptedPerPos)
	if m.DecodeTotal > 0 {
		m.BusySlotsPerDecode = float64(e.busySum) / float64(m.DecodeTotal)
	}
	starting, deferred := e.queuedLocked()
	m.RequestsProcessing = e.busy + starting
	m.RequestsDeferred = deferred
	m.KVCacheCapacity = int64(e.kvCells)
	m.MaxAdapters = len(e.adapters)
	if len(e.adapters) > 0 {
		running := make([]bool, len(e.adapters))
		if e.busy > 0 {
			for i, sc := range e.applied {
				running[i] = sc != 0
			}
		}
		waiting := make([]bool, len(e.adapters))
		for _, tk := range e.queue {
			for i, sc := range tk.scales {
				waiting[i] = waiting[i] || (sc != 0 && !running[i])
			}
		}
		for i, a := range e.adapters {
			name := strings.TrimSuffix(filepath.Base(a.Path()), ".gguf")
			if running[i] {
				m.RunningAdapters = append(m.RunningAdapters, name)
			}
			if waiting[i] {
				m.WaitingAdapters = append(m.WaitingAdapters, name)
			}
		}
	}
	if e.loraChanged.IsZero() || !slices.Equal(e.loraRunning, m.RunningAdapters) || !slices.Equal(e.loraWaiting, m.WaitingAdapters) {
		e.loraChanged = time.Now()
		e.loraRunning, e.loraWaiting = m.RunningAdapters, m.WaitingAdapters
	}
	m.AdaptersChanged = e.loraChanged
	if !e.idleSince.IsZero() {
		m.Steps.Waiting = time.Since(e.idleSince)
		m.Steps.Phase[PhaseIdle] += m.Steps.Waiting
	}
	return m
}

// Close stops the engine: queued and running requests end with an
// ErrClosed event, the loop stops, the context, samplers and
// adapters are freed. The model stays open.
//
// Called from code the engine's loop runs (a Go sampler of
// Request.Samplers, a drafter of SpeculativeOptions.NewDrafters), Close
// does not wait for the loop: it stops once that code returns.
func (e *Engine) Close() error {
	onLoop := e.onLoop()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		if !onLoop {
			<-e.done
		}
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	if !onLoop {
		<-e.done
	}
	return nil
}

// errOnLoop is the error of a slot action (SaveSlot, RestoreSlot,
// EraseSlot) called from code the engine's loop runs, which would wait for
// the loop, and so for itself, forever.
var errOnLoop = fmt.Errorf("engine: a slot action called from the engine's loop (a request's sampler or drafter) would wait for itself: %w", llama.ErrInvalid)

// onLoop reports whether the calling goroutine is the engine's loop.
func (e *Engine) onLoop() bool {
	id := e.loopG.Load()
	return id != 0 && id == curGoroutine()
}

// curGoroutine returns the calling goroutine's id, read from the header
// of its stack trace ("goroutine 42 [running]:"); 0 if it cannot be read.
func curGoroutine() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return 0
	}
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// run is the loop: it owns lctx, the batch and the slots.
func (e *Engine) run() {
	e.loopG.Store(curGoroutine())
	defer close(e.done)
	defer e.shutdown()
	for {
		e.mu.Lock()
		ctrl, closed := e.ctrl, e.closed
		e.ctrl = nil
		e.mu.Unlock()
		if closed {
			return
		}
		for _, f := range ctrl {
			f()
		}
		if len(ctrl) > 0 {
			e.clock.mark(PhaseOther)
		}
		t0, d0 := time.Now(), e.decodeTime
		worked := e.turn()
		if worked {
			e.trimDue = true
			e.busyTime += time.Since(t0)
			if e.period++; e.period == 1 {
				e.lead = e.decodeTime - d0
			}
		}
		if !worked {
			e.period = 0
			// Nothing to decode: the compute threads sleep now rather than
			// poll for a decode that is not coming, which would take the
			// cores from the handlers preparing the next requests.
			e.lctx.Idle()
			if e.spec != nil && e.spec.draftC != nil {
				e.spec.draftC.Idle()
			}
			e.clock.mark(PhaseOther)
			e.mu.Lock()
			e.metrics.Steps, e.idleSince = e.clock.t, e.clock.last
			e.mu.Unlock()
			e.parks.Add(1)
			e.parked.Store(true)
			e.park()
		}
	}
}

// park waits for work, returning the C heap's free memory to the system
// once the engine has been idle for TrimIdle after work.
func (e *Engine) park() {
	var trim <-chan time.Time
	if e.trimDue && e.trimIdle > 0 {
		trim = time.After(e.trimIdle)
	}
	for {
		select {
		case <-e.wake:
			e.parked.Store(false)
			e.clock.mark(PhaseIdle)
			e.mu.Lock()
			e.metrics.Steps, e.idleSince = e.clock.t, time.Time{}
			e.mu.Unlock()
			e.gather()
			e.clock.mark(PhaseGather)
			return
		case <-trim:
			trim, e.trimDue = nil, false
			go e.trimMemory()
		case <-e.baseCtx.Done():
			return
		}
	}
}

// trimMemory returns the C heap's free memory to the system, off the
// loop: a request arriving meanwhile starts at once, its allocations
// waiting only while the trim holds their arena.
func (e *Engine) trimMemory() {
	defer func() {
		if v := recover(); v != nil {
			e.logPanic(llama.NewPanicError("engine: trim", v), -1)
		}
	}()
	t := time.Now()
	if llama.TrimMemory() {
		e.trims.Add(1)
		if l := e.opts.Logger; l != nil {
			l.Debug("returned the C heap's free memory to the system", "took", time.Since(t))
		}
	}
}

// gatherWait is the longest an idle engine holds back its first step for
// the requests Expect announced.
const gatherWait = 5 * time.Millisecond

// burstWait is the longest an idle engine holds back its first step for a
// burst like the last one (see Expect).
const burstWait = 10 * time.Millisecond

// Expect tells the engine that a request is on its way: its caller is
// reading or preparing one and will Submit it soon. Clients often come
// together (a page opening several conversations, a batch job, an agent's
// parallel calls), and their requests reach Submit a few milliseconds
// apart: an engine with nothing to decode would start the first alone and
// make the others wait out that whole step. So an idle engine waking for
// a request gathers the others first:
//
//   - while requests are expected, it waits for them, at most 5 ms;
//   - when its last busy period began with a burst (its first two steps
//     started two requests or more, the second step's having come while
//     the first ran), it waits until as many requests are queued, at most
//     10 ms and at most a quarter of that period's first step: a burst's
//     stragglers start with it, and a small model, whose steps are short,
//     hardly waits.
//
// A lone client never waits, and after a burst at most once. An engine
// already decoding never waits: new requests join its next step, and
// those that reach the queue while it starts others join the step being
// prepared. Requests submitted without Expect count for bursts once
// queued.
//
// The returned function ends the expectation: call it once the request
// is submitted, or will not be (calling it again does nothing). Expect is
// safe for concurrent use. The server calls it for completion, chat,
// infill and Anthropic messages requests once it has chosen the model,
// before parsing and tokenizing the rest.
func (e *Engine) Expect() (arrived func()) {
	e.expected.Add(1)
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) && e.expected.Add(-1) == 0 {
			e.poke()
		}
	}
}

// queued returns the number of queued requests.
func (e *Engine) queued() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue)
}

// gather holds an engine that was idle back for the requests on their way
// (see Expect). It runs on the loop after a wake.
func (e *Engine) gather() {
	if e.queued() == 0 && e.expected.Load() <= 0 {
		return // a control call's wake
	}
	start := time.Now()
	expectEnd, burstEnd := start.Add(e.gatherWait), start
	if e.burstN > 1 {
		burstEnd = start.Add(min(e.burstWait, e.lead/4))
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		var until time.Time
		switch {
		case e.expected.Load() > 0 && now.Before(expectEnd):
			until = expectEnd
		case now.Before(burstEnd) && e.queued() < e.burstN:
			until = burstEnd
		default:
			return
		}
		t.Reset(until.Sub(now))
		select {
		case <-e.wake: // a request queued or arrived: look again
		case <-t.C:
		case <-e.baseCtx.Done():
			return
		}
	}
}

// learnBurst records the burst that began this busy period (see Expect),
// its second turn having started n requests.
func (e *Engine) learnBurst(n int) {
	e.burstN = 0
	if n += e.started1; n >= 2 {
		e.burstN = n
	}
}

// turn is one round of the loop's work: free the slots of clients that
// left, start queued requests, run a step, publish the slots' state. It
// reports whether it decoded. Panics of the code a slot runs on its own
// (its start, sampling, drafting, a draft's check) end that slot's request
// where they happen (see recoverSlot); a panic that escapes them, in the
// building or decoding of the shared batch say, cannot be laid at one
// slot's door: it is recovered here and ends every running request, and
// the loop goes on with the slots reset.
func (e *Engine) turn() (worked bool) {
	defer func() {
		if v := recover(); v != nil {
			e.turnPanic(llama.NewPanicError("engine", v))
			worked = true
		}
	}()
	e.reap()
	switch n := e.assign(); e.period {
	case 0:
		e.started1 = n
	case 1:
		e.learnBurst(n)
	}
	e.clock.mark(PhaseStart)
	worked = e.step()
	e.publish()
	e.clock.mark(PhaseOther)
	return worked
}

// turnPanic fails the requests of every busy slot with err, a panic turn
// recovered, and resets the slots and the step's state.
func (e *Engine) turnPanic(err *llama.PanicError) {
	e.logPanic(err, -1)
	clear(e.toSample)
	e.toSample = e.toSample[:0]
	clear(e.sampleJobs)
	e.sampleJobs = e.sampleJobs[:0]
	e.batch.Clear()
	for _, s := range e.slots {
		if s.tk != nil {
			e.abort(s, err)
		}
		s.pre, s.iBatch = false, -1
	}
	e.publish()
}

// recoverSlot, deferred around code that works for slot s alone, turns a
// panic there into the end of s's request (see abort); the other slots
// and the loop go on. op names the work in the error.
func (e *Engine) recoverSlot(s *engSlot, op string) {
	if v := recover(); v != nil {
		e.slotPanic(s, llama.NewPanicError(op, v))
	}
}

// slotPanic logs err, a panic of slot s's work, and ends s's request with it.
func (e *Engine) slotPanic(s *engSlot, err *llama.PanicError) {
	e.logPanic(err, s.id)
	e.abort(s, err)
}

// failSlot ends s's request with err: as a panic when err is one (a Go
// sampler's, returned by its chain), else as fail does.
func (e *Engine) failSlot(s *engSlot, err error) {
	var pe *llama.PanicError
	if errors.As(err, &pe) {
		e.slotPanic(s, pe)
		return
	}
	e.fail(s, err)
}

// abort ends slot s's request, if any, with err after a panic and resets
// the slot, whose state the panic may have left half changed: its
// sequence's memory and cached tokens, its draft model's sequence, its
// drafts and its n-gram drafters' statistics are forgotten and its
// samplers closed, so that the next request
// there starts clean. Should the reset itself panic, the slot is freed by
// force.
func (e *Engine) abort(s *engSlot, err error) {
	defer func() {
		if v := recover(); v != nil {
			e.logPanic(llama.NewPanicError("engine: slot reset", v), s.id)
			if tk := s.tk; tk != nil {
				s.tk = nil
				tk.stop()
				tk.ob.push(&Event{Done: true, Err: err, SlotID: s.id}, true)
				e.mu.Lock()
				e.busy--
				e.mu.Unlock()
			}
			s.smpl, s.gram, s.state, s.cache = nil, nil, stIdle, s.cache[:0]
		}
	}()
	s.pre, s.iBatch = false, -1
	ss := &s.spec
	ss.draft, ss.drafter, ss.fault, ss.spec = ss.draft[:0], nil, nil, llama.Speculative{}
	e.spec.resetSlot(s.id)
	e.lctx.Memory().Remove(s.id, 0, -1)
	s.cache = s.cache[:0]
	s.copyPending = false
	if s.tk != nil {
		e.fail(s, err)
	}
}

// logPanic logs a recovered panic with its stack, at Error level, to
// Options.Logger or, without one, to slog's default logger: a panic is a
// bug to fix, which an operator must see. slot is -1 when the panic was
// not one slot's.
func (e *Engine) logPanic(err *llama.PanicError, slot int) {
	log := e.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Error("engine: recovered a panic", "slot", slot, "err", err.Error(), "stack", string(err.Stack))
}

// shutdown ends every request and frees what the engine owns.
func (e *Engine) shutdown() {
	for _, s := range e.slots {
		if s.tk != nil {
			e.fail(s, ErrClosed)
		}
	}
	e.mu.Lock()
	q := e.queue
	e.queue = nil
	e.ctrl = nil
	e.mu.Unlock()
	for _, tk := range q {
		tk.ob.push(&Event{Done: true, Err: ErrClosed, SlotID: -1}, true)
		tk.stop()
	}
	e.lctx.Close()
	if e.spec != nil {
		e.spec.close()
	}
	for _, a := range e.adapters {
		a.Close()
	}
	if e.cthread != nil {
		e.cthread.close()
	}
}

// reap frees the slots of requests whose client went away.
func (e *Engine) reap() {
	for _, s := range e.slots {
		if s.tk != nil && s.tk.ctx.Err() != nil {
			s.tk.ob.push(nil, true)
			e.release(s)
		}
	}
}

// queuedLocked splits the queued requests by assign's rules: those the
// loop starts at its next turn (a slot is free for them and their LoRA
// scales can apply) and those deferred (waiting for a slot, or behind a
// request whose scales wait for the running ones to end). Counting the
// first as processing keeps the figures whole between a submission, or
// the end of a request, and the loop's next turn: requests never show as
// waiting beside an idle engine. e.mu must be held.
func (e *Engine) queuedLocked() (starting, deferred int) {
	free := len(e.slots) - e.busy
	scales := e.applied
	for i, tk := range e.queue {
		if free > 0 && e.busy+starting == 0 {
			scales = tk.scales // an idle engine applies the first request's scales
		}
		if free == 0 || !slices.Equal(tk.scales, scales) {
			return starting, len(e.queue) - i
		}
		free--
		starting++
	}
	return starting, 0
}

// assign moves queued requests to free slots and returns how many. Tasks
// whose LoRA scales differ from the running ones wait (in order) until the
// running ones are done. Requests queued while it starts others (starting
// one may save the idle slots to the prompt cache, tens of milliseconds)
// are taken too, so they join the coming step rather than wait out
// another.
func (e *Engine) assign() (n int) {
	for {
		started := e.take()
		if len(started) == 0 {
			return n
		}
		for _, s := range started {
			e.startSlot(s)
		}
		if e.pcache != nil && !e.opts.NoCacheIdleSlots {
			e.pcache.cacheIdleSlots(e)
		}
		n += len(started)
	}
}

// startSlot starts slot s's new request; a panic there ends the request.
func (e *Engine) startSlot(s *engSlot) {
	defer e.recoverSlot(s, "engine: start")
	e.start(s)
}

// take gives queued requests the free slots they may have (see assign)
// and returns those slots.
func (e *Engine) take() (started []*engSlot) {
	e.mu.Lock()
	defer e.mu.Unlock() // a panic here must not leave the engine locked
	for i := 0; i < len(e.queue); {
		tk := e.queue[i]
		if tk.ctx.Err() != nil {
			tk.ob.push(nil, true)
			tk.stop()
			e.queue = slices.Delete(e.queue, i, i+1)
			continue
		}
		if e.busy == len(e.slots) {
			break
		}
		if !slices.Equal(tk.scales, e.applied) {
			if e.busy > 0 {
				break
			}
			if err := e.applyScales(tk.scales); err != nil {
				tk.ob.push(&Event{Done: true, Err: err, SlotID: -1}, true)
				tk.stop()
				e.queue = slices.Delete(e.queue, i, i+1)
				continue
			}
		}
		s := e.pickSlot(tk)
		if s == nil { // its slot is busy: let others pass
			i++
			continue
		}
		e.queue = slices.Delete(e.queue, i, i+1)
		s.tk = tk
		e.busy++
		started = append(started, s)
	}
	return started
}

// pickSlot returns the slot for a request: the one it asks for, else with
// CachePrompt the free slot sharing the longest prefix with its prompt
// when that is more than Options.SlotSimilarity of it, else the least
// recently used free slot, as llama.cpp; without CachePrompt the free
// slot of lowest id: llama.cpp's split of a batch over separate KV
// streams puts only consecutive sequences in one micro-batch, so packed
// slots decode faster.
func (e *Engine) pickSlot(tk *engTask) *engSlot {
	if id := tk.t.SlotID; id >= 0 {
		if e.slots[id].tk == nil {
			return e.slots[id]
		}
		return nil
	}
	sim := e.opts.SlotSimilarity
	if sim == 0 {
		sim = 0.1
	}
	byCache := tk.t.CachePrompt && tk.t.Kind == KindCompletion && sim >= 0 && len(tk.t.Prompt) > 0
	var best *engSlot
	bestLCP := -1
	for _, s := range e.slots {
		if s.tk != nil {
			continue
		}
		l := 0
		if byCache {
			if l = engCommonPrefix(s.cache, tk.t.Prompt); float64(l) <= sim*float64(len(tk.t.Prompt)) {
				l = 0
			}
		}
		if best == nil || l > bestLCP || (l == bestLCP && tk.t.CachePrompt && s.lastUsed.Before(best.lastUsed)) {
			best, bestLCP = s, l
		}
	}
	return best
}

func engCommonPrefix(a, b []llama.Token) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// slotRequestView is what SlotsInfo shows of a request: its settings,
// without its prompt and media (which the slot's snapshot does not keep
// past the request).
func slotRequestView(t *Request) *Request {
	return &Request{Kind: t.Kind, Params: t.Params, NPredict: t.NPredict, NKeep: t.NKeep, Stop: t.Stop, LoRA: t.LoRA, SlotID: t.SlotID}
}

// publish updates the snapshot read by SlotsInfo and Metrics.
func (e *Engine) publish() {
	e.mu.Lock()
	defer e.mu.Unlock()
	var kv int64
	e.metrics.RequestsPreempted = 0
	for i, s := range e.slots {
		if s.tk != nil && s.state == stWait {
			e.metrics.RequestsPreempted++
		}
		// An idle slot still reports its last request, as llama-server's.
		sn := engSlotSnap{nPast: len(s.cache), used: e.snap[i].used, taskID: e.snap[i].taskID, req: e.snap[i].req, prompt: e.snap[i].prompt}
		if s.tk != nil {
			sn.processing, sn.prompt, sn.nDecoded, sn.taskID, sn.used = true, s.tk.t.Prompt, s.generated, s.tk.id, true
			sn.promptProcessed, sn.promptCached = max(0, min(s.promptIdx, len(s.prompt))-s.nCached), s.nCached
			if sn.req == nil || e.snap[i].taskID != s.tk.id || !e.snap[i].processing {
				sn.req = slotRequestView(s.tk.t)
			}
		}
		e.snap[i] = sn
		kv += int64(len(s.cache))
		e.metrics.NTokensMax = max(e.metrics.NTokensMax, int64(len(s.cache)))
	}
	e.metrics.KVCacheTokens = kv
	e.metrics.Steps = e.clock.t
	if n := e.lctx.Size(); n > 0 {
		e.metrics.KVCacheUsageRatio = float64(kv) / float64(n)
	}
}

// release frees a slot (its memory keeps the tokens for the prompt cache).
func (e *Engine) release(s *engSlot) {
	if s.tk != nil {
		s.tk.stop()
	}
	if s.smpl != nil {
		s.smpl.Close()
		s.smpl = nil
	}
	if s.gram != nil {
		s.gram.Close()
		s.gram = nil
	}
	if s.copyPending {
		// Its memory was copied from another slot and no decode has run
		// since: llama.cpp copies the KV data only then, so what the slot
		// would keep for the next request (or the prompt cache) is not there.
		e.lctx.Memory().Remove(s.id, 0, -1)
		s.cache = s.cache[:0]
		s.copyPending = false
	}
	s.tk = nil
	s.state = stIdle
	s.iBatch = -1
	s.lastUsed = time.Now()
	e.wakePreempted()
	e.mu.Lock()
	e.busy--
	if e.idleCh != nil {
		close(e.idleCh) // slot actions waiting for an idle slot try again
		e.idleCh = nil
	}
	e.mu.Unlock()
	e.poke() // queued requests may start
}

// fail ends a slot's request with an error event.
func (e *Engine) fail(s *engSlot, err error) {
	ev := &Event{Done: true, Err: err, SlotID: s.id, PromptTokens: len(s.tk.t.Prompt)}
	ob := s.tk.ob
	e.release(s)
	ob.push(ev, true)
}
