package llama

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/seqstate"
)

// PoolingType says how a context pools token embeddings per sequence.
type PoolingType int

// Pooling types. The zero value uses the model's own.
const (
	PoolingDefault PoolingType = iota // the model's pooling type
	PoolingNone                       // no pooling: per-token embeddings only
	PoolingMean                       // mean of the sequence's tokens
	PoolingCLS                        // the first token
	PoolingLast                       // the last token
	PoolingRank                       // a classification head's scores (rerankers)
)

var poolingC = [...]int32{capi.PoolingUnspecified, capi.PoolingNone, capi.PoolingMean, capi.PoolingCLS, capi.PoolingLast, capi.PoolingRank}

// String returns the pooling type's llama.cpp name.
func (p PoolingType) String() string {
	return [...]string{"default", "none", "mean", "cls", "last", "rank"}[min(max(int(p), 0), 5)]
}

// ParsePoolingType parses "none", "mean", "cls", "last", "rank" (or "").
func ParsePoolingType(s string) (PoolingType, error) {
	for i, n := range [...]string{"", "none", "mean", "cls", "last", "rank"} {
		if s == n {
			return PoolingType(i), nil
		}
	}
	return 0, errorf(CodeInvalid, "pooling", "unknown pooling type %q", s)
}

// FlashAttention says when to use flash attention.
type FlashAttention int

// Flash attention settings; the zero value lets llama.cpp decide.
const (
	FlashAttentionAuto FlashAttention = iota
	FlashAttentionOff
	FlashAttentionOn
)

// RopeScaling selects a RoPE scaling method.
type RopeScaling int

// RoPE scaling methods; the zero value uses the model's.
const (
	RopeScalingDefault RopeScaling = iota
	RopeScalingNone
	RopeScalingLinear
	RopeScalingYaRN
	RopeScalingLongRoPE
)

// Attention selects the attention type for embeddings.
type Attention int

// Attention types; the zero value uses the model's.
const (
	AttentionDefault Attention = iota
	AttentionCausal
	AttentionNonCausal
)

// KV cache data types accepted by ContextOptions.TypeK and TypeV.
var cacheTypes = map[string]int32{
	"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30,
}

// ContextOptions configures NewContext. Every field's zero value means the
// default named beside it.
type ContextOptions struct {
	ContextSize    int            // tokens of context over all sequences; 0: the model's training context for each, fitted to memory (Fit)
	BatchSize      int            // most tokens one Decode takes; 0: 2048
	UBatchSize     int            // physical batch size; 0: 512
	Sequences      int            // distinct sequences (parallel slots); 0: 1
	Threads        int            // threads for generation; 0: the number of CPUs
	ThreadsBatch   int            // threads for prompt processing; 0: Threads
	Pooling        PoolingType    // embedding pooling; default: the model's
	Attention      Attention      // attention for embeddings; default: the model's
	FlashAttention FlashAttention // default: auto
	RopeScaling    RopeScaling    // default: the model's
	RopeFreqBase   float32        // 0: from the model
	RopeFreqScale  float32        // 0: from the model
	YarnOrigCtx    int            // 0: from the model
	// YaRN factors; nil: from the model.
	YarnExtFactor, YarnAttnFactor, YarnBetaFast, YarnBetaSlow *float32
	OutputsMax                                                int    // most outputs of one decode, at least Sequences; 0: BatchSize (raised to Sequences)
	RecurrentSnapshots                                        int    // recurrent-state snapshots per sequence for rollback; 0: none
	TypeK, TypeV                                              string // KV cache types ("f16", "q8_0", ...); "": f16
	Embeddings                                                bool   // compute embeddings (with logits)
	NoOffloadKQV                                              bool   // keep the KV cache and KQV ops on the CPU
	NoOpOffload                                               bool   // do not offload host tensor operations
	SWAFull                                                   bool   // a full-context cache for sliding-window layers (default: window-sized; see SlidingWindow)
	KVUnified                                                 bool   // one KV buffer shared by all sequences
	Perf                                                      bool   // collect performance counters (Perf)
	// MTP makes a context that runs the model's multi-token-prediction
	// head instead of its trunk: a draft context for the model itself
	// (see draft.MTP). The model must carry MTP blocks (Info.MTPLayers)
	// and be loaded with ModelOptions.MTP; each entry of its batches
	// needs the target's hidden row (Batch.SetHidden).
	MTP bool
	// ThreadPool sets the compute threads' priority, polling and CPUs
	// (zero: ggml's defaults); ThreadPoolBatch the prompt batches'
	// threads' (nil: as ThreadPool).
	ThreadPool      ThreadPoolOptions
	ThreadPoolBatch *ThreadPoolOptions
	// Fit bounds the context chosen when ContextSize is 0 (see
	// Model.FitContext).
	Fit FitOptions
}

// Context is an inference context over a Model: its KV memory, batches
// and outputs.
//
// A Context is not safe for concurrent use, except Close, which may be
// called from any goroutine: it interrupts a running Decode, waits for it,
// and frees the context. Overlapping calls are detected (cheaply, with an
// atomic flag): a call made while another runs (a Decode during a
// Generate, two Generates, ...) fails with an error matching ErrBusy
// instead of silently mixing their work. Close is idempotent; Model.Close
// closes the model's contexts. Calls after Close return ErrClosed, and a
// call Close interrupts ends with ErrClosed.
type Context struct {
	contextLink // for package mtmd (bridge.go)
	model       *Model
	mu          sync.Mutex
	ptr         capi.Context
	mem         capi.Memory

	nCtx, nCtxSeq, nBatch, nUBatch, nSeqMax int
	embeddings, kvUnified                   bool
	mtp                                     bool // ContextOptions.MTP
	// SetHidden: the decodes keep the hidden rows of every entry
	// (hiddenAll) or of the outputs.
	hidden, hiddenAll bool
	nSwa              int // window of a windowed cache; 0: full-sized
	nSwaModel         int // the model's sliding window; 0: none
	nRollback         int // Memory.RollbackLimit
	pooling           PoolingType
	// causal: the attention is causal (the model's, ContextOptions.Attention,
	// SetCausalAttention). Without it, and without a KV memory (a BERT-like
	// model, whose decode is an encode), llama.cpp computes a batch in one
	// micro-batch and aborts the process on a batch past UBatchSize.
	causal bool
	// nOutMax: the most outputs one decode or encode may have (llama.cpp's
	// n_outputs_max; more aborts the process).
	nOutMax int
	// seqLayout: the sections of this context's sequence states, whole
	// and partial (read from an empty sequence's), which SetSeqState and
	// LoadSeqFile walk before llama.cpp reads a state.
	seqLayout, seqLayoutPartial seqstate.Layout

	abort    *atomic.Uint32  // in C memory: non-zero aborts; C reads its first byte (little-endian)
	setAbort func()          // sets abort: made once, as a method value passed on allocates
	busy     atomic.Bool     // a call (or a Generate, an Embed) is using the context
	closing  atomic.Bool     // Close has begun
	byModel  atomic.Bool     // closed by its Model's Close (see closedErr)
	adapters []*Adapter      // adapters set by SetAdapters, in use by this context
	tp, tpb  capi.Threadpool // attached threadpools (tpb: batches, 0 when the same)
	// The pools' options, and what they ask of a decode's calling thread
	// (nil: nothing).
	pool, poolBatch ThreadPoolOptions
	pin, pinBatch   *schedule
	idle            bool            // Idle paused them, and no decode has run since
	backend         []*SamplerChain // by sequence, the chain sampling it on the backend (SetSampler); nil: none yet
	nBackend        int             // the non-nil entries of backend
	pendSeq         []int32         // the decode's outputs sampled on the backend: their sequence, else -1 (backendOutputs)
	seenSeq         []bool          // scratch of backendOutputs
	outSeq          []int32         // the sequence of each backend-sampled output of the last decode (made with pendSeq)
	outputs         []int8          // outputs wanted by the last decode, by batch index
	nOut            int
}

// NewContext creates a context for m.
func (m *Model) NewContext(opts ContextOptions) (*Context, error) {
	done, err := m.use("new context")
	if err != nil {
		return nil, err
	}
	defer done()
	if m.vocabOnly {
		// llama.cpp makes the context and aborts the process at its first
		// decode (no backend holds weights).
		return nil, errorf(CodeUnsupported, "new context", "the model was loaded with VocabOnly: it has no weights to run")
	}
	p := capi.ContextDefaultParams()
	type lim struct {
		v    int
		name string
		dst  *uint32
	}
	for _, l := range []lim{{opts.ContextSize, "ContextSize", &p.NCtx}, {opts.BatchSize, "BatchSize", &p.NBatch},
		{opts.UBatchSize, "UBatchSize", &p.NUbatch}, {opts.Sequences, "Sequences", &p.NSeqMax}} {
		if l.v < 0 || l.v > 1<<24 {
			return nil, errorf(CodeInvalid, "new context", "%s %d out of range", l.name, l.v)
		}
		if l.v > 0 {
			*l.dst = uint32(l.v)
		}
	}
	// An unset size: the training context for each sequence, lowered to
	// fit the memory (FitContext), and halved down to the fit's minimum
	// while the allocation fails (the compute buffers, which the fit
	// leaves to its margin, can tip it over).
	var fit ContextFit
	if opts.ContextSize == 0 {
		p.NCtx = 0 // from the model, where its metadata cannot be read
		if f, err := m.fitContext(opts); err == nil {
			fit, p.NCtx = f, uint32(min(f.ContextSize, 1<<24))
		}
	}
	if max := int(capi.MaxParallelSequences()); int(p.NSeqMax) > max {
		return nil, errorf(CodeInvalid, "new context", "Sequences %d above llama.cpp's limit %d", p.NSeqMax, max)
	}
	if p.NUbatch > p.NBatch {
		p.NUbatch = p.NBatch
	}
	// llama.cpp reserves an output row per sequence at every decode (and
	// when it makes the context), and aborts the process when that is more
	// than its n_outputs_max: OutputsMax, or else the batch size, which it
	// lowers to the context size (that of the training context when
	// ContextSize is 0) for a causal model. Sequences past it raise it.
	hasEncoder := capi.ModelHasEncoder(m.ptr)
	if opts.OutputsMax > 0 && opts.OutputsMax < int(p.NSeqMax) {
		return nil, errorf(CodeInvalid, "new context", "OutputsMax %d is below Sequences %d: each sequence needs an output", opts.OutputsMax, p.NSeqMax)
	}
	if nc := p.NCtx; opts.OutputsMax == 0 {
		if nc == 0 {
			nc = uint32(max(capi.ModelNCtxTrain(m.ptr), 0))
		}
		if lo := min(nc, p.NBatch); p.NSeqMax > lo {
			if hasEncoder {
				// llama.cpp takes the batch size for an encoder's outputs.
				return nil, errorf(CodeInvalid, "new context", "Sequences %d above the batch size %d", p.NSeqMax, lo)
			}
			p.NOutputsMax = p.NSeqMax
		}
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	tb := opts.ThreadsBatch
	if tb <= 0 {
		tb = threads
	}
	p.NThreads, p.NThreadsBatch = int32(min(threads, 512)), int32(min(tb, 512))
	pool, poolBatch := opts.ThreadPool, opts.ThreadPool
	if opts.ThreadPoolBatch != nil {
		poolBatch = *opts.ThreadPoolBatch
	}
	for _, o := range []*ThreadPoolOptions{&pool, &poolBatch} {
		if err := o.check(); err != nil {
			return nil, err
		}
		o.CPUs = slices.Clone(o.CPUs)
	}
	if opts.Pooling < 0 || int(opts.Pooling) >= len(poolingC) {
		return nil, errorf(CodeInvalid, "new context", "bad pooling type %d", opts.Pooling)
	}
	p.PoolingType = poolingC[opts.Pooling]
	p.AttentionType = [...]int32{-1, 0, 1}[min(max(int(opts.Attention), 0), 2)]
	p.FlashAttnType = [...]int32{-1, 0, 1}[min(max(int(opts.FlashAttention), 0), 2)]
	p.RopeScalingType = [...]int32{-1, 0, 1, 2, 3}[min(max(int(opts.RopeScaling), 0), 4)]
	p.RopeFreqBase, p.RopeFreqScale = opts.RopeFreqBase, opts.RopeFreqScale
	p.YarnOrigCtx = uint32(max(opts.YarnOrigCtx, 0))
	for _, y := range []struct {
		v   *float32
		dst *float32
	}{{opts.YarnExtFactor, &p.YarnExtFactor}, {opts.YarnAttnFactor, &p.YarnAttnFactor},
		{opts.YarnBetaFast, &p.YarnBetaFast}, {opts.YarnBetaSlow, &p.YarnBetaSlow}} {
		if y.v != nil {
			if !finite(*y.v) {
				return nil, errorf(CodeInvalid, "new context", "YaRN factor %v is not finite", *y.v)
			}
			*y.dst = *y.v
		}
	}
	if opts.OutputsMax < 0 || opts.RecurrentSnapshots < 0 || opts.OutputsMax > 1<<24 || opts.RecurrentSnapshots > 1<<10 {
		return nil, errorf(CodeInvalid, "new context", "OutputsMax %d or RecurrentSnapshots %d out of range", opts.OutputsMax, opts.RecurrentSnapshots)
	}
	if opts.OutputsMax > 0 {
		p.NOutputsMax = uint32(opts.OutputsMax)
	}
	p.NRsSeq = uint32(opts.RecurrentSnapshots)
	if !finite(opts.RopeFreqBase, opts.RopeFreqScale) {
		return nil, errorf(CodeInvalid, "new context", "RoPE frequency settings must be finite")
	}
	for _, kv := range []struct {
		s   string
		dst *int32
	}{{opts.TypeK, &p.TypeK}, {opts.TypeV, &p.TypeV}} {
		if kv.s == "" {
			continue
		}
		t, ok := cacheTypes[kv.s]
		if !ok {
			return nil, errorf(CodeInvalid, "new context", "unknown KV cache type %q", kv.s)
		}
		*kv.dst = t
	}
	p.Embeddings = opts.Embeddings
	p.OffloadKQV = !opts.NoOffloadKQV
	p.OpOffload = !opts.NoOpOffload
	p.SwaFull = opts.SWAFull
	p.KVUnified = opts.KVUnified
	p.NoPerf = !opts.Perf
	if opts.MTP {
		switch {
		case !capi.HaveMTP():
			return nil, errorf(CodeUnsupported, "new context", "this llama.cpp library does not export the MTP calls")
		case m.mtpLayers() == 0:
			return nil, errorf(CodeUnsupported, "new context", "the model has no MTP blocks")
		case !m.mtp:
			return nil, errorf(CodeInvalid, "new context", "MTP context on a model loaded without ModelOptions.MTP")
		}
		p.CtxType = 1 // LLAMA_CONTEXT_TYPE_MTP
	}

	// The abort flag lives in C memory, since C keeps a pointer to it; it
	// is freed once the Context is unreachable (nothing can set it then).
	flag := capi.Calloc(1, 8)
	if flag == nil {
		return nil, errorf(CodeLoad, "new context", "out of memory")
	}
	c := &Context{model: m, abort: (*atomic.Uint32)(flag), pool: pool, poolBatch: poolBatch}
	c.setAbort = func() { c.abort.Store(1) }
	c.contextLink = bridge.NewContext((*contextBridge)(c))
	runtime.AddCleanup(c, func(p unsafe.Pointer) { capi.CFree(p) }, flag)
	p.AbortCallback = capi.AbortFlagFunc
	p.AbortCallbackData = uintptr(flag)
	var ptr capi.Context
	mark := logErrorMark()
	for {
		if err := m.rpcGuard("new context", func() { ptr = capi.InitFromModel(m.ptr, p) }); err != nil {
			return nil, err
		}
		if ptr != 0 || fit.ContextSize == 0 || opts.Fit.Off || !strings.Contains(llamaSaid(mark), "allocate") {
			break
		}
		n, ok := fit.lower(int(p.NCtx), opts)
		if !ok {
			break
		}
		p.NCtx, mark = uint32(n), logErrorMark()
	}
	if ptr == 0 {
		if why := llamaSaid(mark); why != "" {
			return nil, errorf(CodeLoad, "new context", "llama.cpp could not create the context: %s%s", why,
				allocHint(why, "use a smaller ContextSize (-c), fewer Sequences (-np) or a quantized KV cache, or offload fewer layers"))
		}
		return nil, errorf(CodeLoad, "new context", "llama.cpp could not create the context (out of memory, or options the model does not support)")
	}
	c.ptr = ptr
	if err := c.attachThreads(int(p.NThreads), int(p.NThreadsBatch)); err != nil {
		capi.Free(ptr)
		return nil, err
	}
	c.mem = capi.GetMemory(ptr)
	c.nCtx = int(capi.NCtx(ptr))
	c.nCtxSeq = int(capi.NCtxSeq(ptr))
	c.nBatch = int(capi.NBatch(ptr))
	c.nUBatch = int(capi.NUbatch(ptr))
	c.nSeqMax = int(capi.NSeqMax(ptr))
	c.embeddings = opts.Embeddings
	c.mtp = opts.MTP
	c.causal = m.causalAttention()
	switch opts.Attention {
	case AttentionCausal:
		c.causal = true
	case AttentionNonCausal:
		c.causal = false
	}
	c.nOutMax = c.nBatch
	if p.NOutputsMax > 0 && !hasEncoder {
		c.nOutMax = int(p.NOutputsMax)
	}
	c.kvUnified = opts.KVUnified
	c.nSwaModel = max(int(capi.ModelNSwa(m.ptr)), 0)
	c.nRollback = -1
	if capi.ModelIsRecurrent(m.ptr) || capi.ModelIsHybrid(m.ptr) {
		// llama.cpp keeps no snapshots for an architecture that cannot
		// use them, whatever RecurrentSnapshots asked.
		c.nRollback = int(capi.NRsSeq(ptr))
	}
	c.nSwa = windowedSWA(int(capi.ModelNSwa(m.ptr)), opts.SWAFull, c.nCtxSeq, c.nSeqMax, c.nUBatch, c.kvUnified)
	c.pooling = PoolingDefault
	if pt := capi.PoolingType(ptr); pt >= -1 && pt <= 4 {
		for i, v := range poolingC {
			if v == pt {
				c.pooling = PoolingType(i)
			}
		}
	}
	c.outputs = make([]int8, c.nBatch)
	c.seqLayout = seqstate.ParseLayout(emptySeqState(ptr, 0))
	c.seqLayoutPartial = seqstate.ParseLayout(emptySeqState(ptr, capi.StateSeqFlagsPartialOnly))
	if !m.addChild(c) {
		capi.Free(ptr)
		return nil, closedErr("new context", "model")
	}
	return c, nil
}

func (c *Context) closeFromParent() { c.close() }

// Close frees the context; it interrupts and waits for a running Decode.
// A Generate or Decode it interrupts ends with an error matching
// ErrClosed. Closing a nil *Context returns an error matching ErrInvalid.
func (c *Context) Close() error {
	if c == nil {
		return errorf(CodeInvalid, "close", "nil *Context")
	}
	c.close()
	c.model.removeChild(c)
	return nil
}

func (c *Context) close() {
	c.closing.Store(true)
	c.abort.Store(1)
	attachMu.Lock()
	defer attachMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.detachAll()
	if c.ptr != 0 {
		ptr := c.ptr
		// After a worker failed, the context's buffers cannot be freed: left.
		_ = c.model.rpcGuard("close", func() { capi.Free(ptr) })
		c.ptr = 0
		c.mem = 0
		c.freeThreads()
		for _, a := range c.adapters {
			a.unuse(c)
		}
		c.adapters = nil
	}
}

// attachThreads gives the context its own ggml threadpools (one for
// single-token decodes and, when the counts or the options differ, one
// for batches), as llama.cpp's tools do: without them ggml starts and
// joins its worker threads on every decode, which on a busy machine costs
// more than small models' decodes themselves.
func (c *Context) attachThreads(n, nBatch int) error {
	newPool := func(o *ThreadPoolOptions, n int, paused bool) (capi.Threadpool, error) {
		if err := o.checkThreads(n); err != nil {
			return 0, err
		}
		p := o.params(n, paused)
		var tp capi.Threadpool
		var err error
		// ggml applies the priority and placement to the thread that
		// starts the pool: one locked for it and restored after.
		perr := onScratchThread(func() {
			s := o.schedFor(n)
			if err = setSchedule(schedule{setPolicy: s.setPolicy, policy: s.policy, prio: s.prio}); err != nil {
				err = errorf(CodeInvalid, "threads", "cannot give the compute threads priority %d (above normal needs CAP_SYS_NICE): %v", o.Priority, err)
				return
			}
			if err = setSchedule(schedule{cpus: s.cpus}); err != nil {
				err = errorf(CodeInvalid, "threads", "cannot run the compute threads on CPUs %v (none of them online?): %v", o.CPUs, err)
				return
			}
			tp = capi.ThreadpoolNew(&p)
		})
		if perr != nil {
			return tp, perr
		}
		if err == nil && tp == 0 {
			err = errorf(CodeLoad, "threads", "ggml could not start %d threads", n)
		}
		return tp, err
	}
	var tp, tpb capi.Threadpool
	var err error
	separate := nBatch != n || !c.pool.equal(&c.poolBatch)
	if separate {
		if tpb, err = newPool(&c.poolBatch, nBatch, false); err != nil {
			return err
		}
	}
	// As llama.cpp does, the generation pool starts paused when a batch
	// pool exists; ggml resumes it when it is used.
	if tp, err = newPool(&c.pool, n, tpb != 0); err != nil {
		if tpb != 0 {
			capi.ThreadpoolFree(tpb)
		}
		return err
	}
	if c.tp != 0 {
		capi.DetachThreadpool(c.ptr)
		c.freeThreads()
	}
	c.tp, c.tpb, c.idle = tp, tpb, false
	c.pin = c.pool.callerSchedule(n)
	c.pinBatch = c.pin
	if separate {
		c.pinBatch = c.poolBatch.callerSchedule(nBatch)
	}
	capi.AttachThreadpool(c.ptr, tp, tpb)
	return nil
}

// pinFor places the calling thread as the pool that computes a batch of
// n tokens asks (llama.cpp uses the batch pool for more than one token),
// returning what undoes it.
func (c *Context) pinFor(op string, n int) (func(), error) {
	pin := c.pin
	if n > 1 {
		pin = c.pinBatch
	}
	if pin == nil {
		return func() {}, nil
	}
	restore, err := pinCaller(*pin)
	if err != nil {
		return nil, errorf(CodeDecode, op, "cannot place the calling thread as ThreadPool asks: %v", err)
	}
	return restore, nil
}

func (c *Context) freeThreads() {
	if c.tp != 0 {
		capi.ThreadpoolFree(c.tp)
	}
	if c.tpb != 0 {
		capi.ThreadpoolFree(c.tpb)
	}
	c.tp, c.tpb = 0, 0
}

// acquire marks the context in use by one call (or one Generate or Embed
// for its whole run); a second call meanwhile gets ErrBusy instead of
// silently interleaving with the first.
func (c *Context) acquire(op string) error {
	if c == nil {
		return errorf(CodeInvalid, op, "nil *Context")
	}
	if !c.busy.CompareAndSwap(false, true) {
		return &Error{Code: CodeBusy, Op: op, Msg: "the context is in use by another call (a Context is not safe for concurrent use)"}
	}
	return nil
}

func (c *Context) release() { c.busy.Store(false) }

// lockMu locks the context's C state; it reports ErrClosed once Close has
// begun.
func (c *Context) lockMu(op string) error {
	c.mu.Lock()
	if c.ptr == 0 || c.closing.Load() {
		c.mu.Unlock()
		return c.closedErr(op)
	}
	return nil
}

// lock is acquire and lockMu, for a single call; unlock undoes it.
func (c *Context) lock(op string) error {
	if err := c.acquire(op); err != nil {
		return err
	}
	if err := c.lockMu(op); err != nil {
		c.release()
		return err
	}
	return nil
}

func (c *Context) unlock() {
	c.mu.Unlock()
	c.release()
}

// Model returns the context's model.
func (c *Context) Model() *Model {
	if c == nil {
		return nil
	}
	return c.model
}

// Size returns the context size in tokens.
func (c *Context) Size() int { return c.get(func() int { return c.nCtx }) }

// SeqSize returns the context size available to each sequence.
func (c *Context) SeqSize() int { return c.get(func() int { return c.nCtxSeq }) }

// SlidingWindow returns the window, in positions, of the context's
// windowed KV cache, or 0 when every layer keeps the whole context: a
// model without sliding-window layers, ContextOptions.SWAFull, or a
// context no larger than the window's cache.
//
// By default, as in llama-server and llama.cpp's other tools (whose common
// parameters leave swa_full off; llama_context_default_params alone turns
// it on), the sliding-window layers of a model that has them (Gemma 2 and 3, gpt-oss, Cohere 2, ...) keep their entries for
// about the last window of each sequence plus a micro-batch: at long
// contexts that is a fraction of the memory of a full-context cache. The
// price is that the window forgets what lies before it: a sequence cannot
// go back to an earlier position, nor shift positions (Memory says what
// is refused), unless a partial state taken there is restored first
// (SeqStatePartial). ContextOptions.SWAFull gives those layers the whole
// context instead, trading the memory for that freedom.
func (c *Context) SlidingWindow() int { return c.get(func() int { return c.nSwa }) }

// windowedSWA is the window of the cache llama.cpp gives a model with
// sliding window nSwa (0: none), or 0 when it is full-sized: llama.cpp
// sizes the window's cache as nSwa positions per sequence sharing it plus
// a micro-batch, padded to 256 cells, at most the whole context's.
func windowedSWA(nSwa int, full bool, nCtxSeq, nSeq, nUBatch int, unified bool) int {
	if nSwa <= 0 || full {
		return 0
	}
	n := nSwa + nUBatch
	if unified {
		n = nSwa*nSeq + nUBatch
	}
	if n = (n + 255) / 256 * 256; n >= nCtxSeq {
		return 0
	}
	return nSwa
}

// BatchSize returns the most tokens one Decode takes.
func (c *Context) BatchSize() int { return c.get(func() int { return c.nBatch }) }

// UBatchSize returns the physical batch size.
func (c *Context) UBatchSize() int { return c.get(func() int { return c.nUBatch }) }

// Sequences returns the number of sequences the context holds.
func (c *Context) Sequences() int { return c.get(func() int { return c.nSeqMax }) }

// KVUnified reports whether the sequences share one KV buffer
// (ContextOptions.KVUnified).
func (c *Context) KVUnified() bool {
	return c.get(func() int {
		if c.kvUnified {
			return 1
		}
		return 0
	}) == 1
}

// get reads a fixed size of the context; 0 for a nil *Context.
func (c *Context) get(f func() int) int {
	if c == nil {
		return 0
	}
	return f()
}

// Pooling returns the context's pooling type.
func (c *Context) Pooling() PoolingType {
	if c == nil {
		return PoolingDefault
	}
	return c.pooling
}

// Threads.

// SetThreads sets the threads for generation and for batches; the pools
// it starts keep the context's ThreadPool options.
func (c *Context) SetThreads(n, nBatch int) error {
	if err := c.lock("set threads"); err != nil {
		return err
	}
	defer c.unlock()
	if n < 1 || nBatch < 1 || n > 512 || nBatch > 512 {
		return errorf(CodeInvalid, "set threads", "thread counts %d, %d out of range [1, 512]", n, nBatch)
	}
	if err := c.attachThreads(n, nBatch); err != nil {
		return err
	}
	capi.SetNThreads(c.ptr, int32(n), int32(nBatch))
	return nil
}

// Threads returns the threads for generation and for batches.
func (c *Context) Threads() (n, nBatch int) {
	if c.lock("threads") != nil {
		return 0, 0
	}
	defer c.unlock()
	return int(capi.NThreads(c.ptr)), int(capi.NThreadsBatch(c.ptr))
}

// SetEmbeddings switches embedding output on or off.
func (c *Context) SetEmbeddings(on bool) error {
	if err := c.lock("set embeddings"); err != nil {
		return err
	}
	defer c.unlock()
	capi.SetEmbeddings(c.ptr, on)
	c.embeddings = on
	return nil
}

// SetCausalAttention switches causal attention on or off. Without it
// (as with ContextOptions.AttentionNonCausal, or a model whose attention
// is not causal) a batch is computed in one micro-batch: Decode refuses a
// batch of more than UBatchSize tokens with an error matching ErrInvalid.
func (c *Context) SetCausalAttention(on bool) error {
	if err := c.lock("set causal"); err != nil {
		return err
	}
	defer c.unlock()
	capi.SetCausalAttn(c.ptr, on)
	c.causal = on
	return nil
}

// causalAttention reports whether the model's attention is causal, as
// llama.cpp reads it (<arch>.attention.causal, true when absent). The
// caller holds m.use.
func (m *Model) causalAttention() bool {
	key := func(k string) (string, bool) {
		return m.strCall("meta", func(b unsafe.Pointer, s uintptr) int32 { return capi.ModelMetaValStr(m.ptr, k, b, s) })
	}
	arch, ok := key("general.architecture")
	if !ok {
		return true
	}
	v, ok := key(arch + ".attention.causal")
	return !ok || v != "false"
}
