package llama

import (
	"context"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/capi"
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
	ContextSize    int            // tokens of context; 0: the model's training context
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
	OutputsMax                                                int    // most outputs in a ubatch; 0: BatchSize
	RecurrentSnapshots                                        int    // recurrent-state snapshots per sequence for rollback; 0: none
	TypeK, TypeV                                              string // KV cache types ("f16", "q8_0", ...); "": f16
	Embeddings                                                bool   // compute embeddings (with logits)
	NoOffloadKQV                                              bool   // keep the KV cache and KQV ops on the CPU
	NoOpOffload                                               bool   // do not offload host tensor operations
	SWAPartial                                                bool   // use a sliding-window-sized cache for SWA models (default: full)
	KVUnified                                                 bool   // one KV buffer shared by all sequences
	Perf                                                      bool   // collect performance counters (Perf)
	// ThreadPool sets the compute threads' priority, polling and CPUs
	// (zero: ggml's defaults); ThreadPoolBatch the prompt batches'
	// threads' (nil: as ThreadPool).
	ThreadPool      ThreadPoolOptions
	ThreadPoolBatch *ThreadPoolOptions
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
	pooling                                 PoolingType

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
	if opts.ContextSize == 0 {
		p.NCtx = 0 // from the model
	}
	if max := int(capi.MaxParallelSequences()); int(p.NSeqMax) > max {
		return nil, errorf(CodeInvalid, "new context", "Sequences %d above llama.cpp's limit %d", p.NSeqMax, max)
	}
	if p.NUbatch > p.NBatch {
		p.NUbatch = p.NBatch
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
	p.NOutputsMax = uint32(opts.OutputsMax)
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
	p.SwaFull = !opts.SWAPartial
	p.KVUnified = opts.KVUnified
	p.NoPerf = !opts.Perf

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
	if err := m.rpcGuard("new context", func() { ptr = capi.InitFromModel(m.ptr, p) }); err != nil {
		return nil, err
	}
	if ptr == 0 {
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
	c.kvUnified = opts.KVUnified
	c.pooling = PoolingDefault
	if pt := capi.PoolingType(ptr); pt >= -1 && pt <= 4 {
		for i, v := range poolingC {
			if v == pt {
				c.pooling = PoolingType(i)
			}
		}
	}
	c.outputs = make([]int8, c.nBatch)
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

// BatchSize returns the most tokens one Decode takes.
func (c *Context) BatchSize() int { return c.get(func() int { return c.nBatch }) }

// UBatchSize returns the physical batch size.
func (c *Context) UBatchSize() int { return c.get(func() int { return c.nUBatch }) }

// Sequences returns the number of sequences the context holds.
func (c *Context) Sequences() int { return c.get(func() int { return c.nSeqMax }) }

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

// check validates a batch against the context before it reaches C.
func (c *Context) check(op string, b *Batch, maxTokens int) error {
	if b == nil || b.n == 0 {
		return errorf(CodeInvalid, op, "empty batch")
	}
	if b.n > maxTokens {
		return errorf(CodeInvalid, op, "batch of %d tokens exceeds the context's batch size %d", b.n, maxTokens)
	}
	nv := c.model.nVocb
	for i := 0; i < b.n; i++ {
		if t := b.tokens[i]; t < 0 || t >= nv {
			return errorf(CodeInvalid, op, "token %d at batch index %d out of range [0, %d)", t, i, nv)
		}
		if p := b.pos[i]; int(p) >= c.nCtxSeq {
			return errorf(CodeNoKVSlot, op, "position %d at batch index %d is past the context size %d", p, i, c.nCtxSeq)
		}
		for k := 0; k < int(b.nSeq[i]); k++ {
			if s := b.seqIDs[i*b.maxSeq+k]; s < 0 || int(s) >= c.nSeqMax {
				return errorf(CodeInvalid, op, "sequence %d at batch index %d out of range [0, %d)", s, i, c.nSeqMax)
			}
		}
	}
	return nil
}

// Decode runs the model on a batch, adding it to the KV memory. A done ctx
// interrupts it: the call returns an error matching ErrCanceled and
// ctx.Err(), and whatever part of the batch was processed is removed from
// memory again, so the context is as before the call.
func (c *Context) Decode(ctx context.Context, b *Batch) error {
	if err := c.acquire("decode"); err != nil {
		return err
	}
	defer c.release()
	return c.decode(ctx, b)
}

// decode is Decode for a caller that holds the context (acquire).
func (c *Context) decode(ctx context.Context, b *Batch) error {
	if err := c.lockMu("decode"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return c.decodeLocked(ctx, b)
}

func (c *Context) decodeLocked(ctx context.Context, b *Batch) error {
	if err := c.check("decode", b, c.nBatch); err != nil {
		return err
	}
	onBackend, err := c.backendOutputs(b)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &Error{Code: CodeCanceled, Op: "decode", Err: err}
	}
	restore, err := c.pinFor("decode", b.n)
	if err != nil {
		return err
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, c.setAbort)
	}
	c.idle = false
	var rc int32
	if len(c.model.rpcServers) == 0 {
		rc = capi.Decode(c.ptr, b.c())
	} else if rc, err = c.rpcCompute("decode", capi.Decode, b); err != nil {
		restore()
		if stop != nil {
			stop()
		}
		return err
	}
	restore()
	if stop != nil && !stop() {
		// The abort func has started; wait until it has set the flag so
		// that clearing it below cannot be undone by it.
		for c.abort.Load() == 0 {
			runtime.Gosched()
		}
	}
	c.abort.Store(0)
	runtime.KeepAlive(b)
	switch rc {
	case 0:
		copy(c.outputs, b.output[:b.n])
		c.nOut = b.n
		if onBackend {
			c.markBackendOutputs()
		}
		return nil
	case 1:
		return errorf(CodeNoKVSlot, "decode", "no KV slot for a batch of %d tokens (context full)", b.n)
	case 2:
		c.rollback(b)
		if c.closing.Load() {
			return c.closedErr("decode")
		}
		err := ctx.Err()
		if err == nil {
			err = context.Canceled
		}
		return &Error{Code: CodeCanceled, Op: "decode", Err: err}
	case -1:
		return errorf(CodeInvalid, "decode", "llama.cpp rejected the batch (positions not consistent with the sequence's memory?)")
	default:
		c.rollback(b)
		return errorf(CodeDecode, "decode", "llama.cpp failed with code %d", rc)
	}
}

// rollback removes from memory what an interrupted decode of b kept.
func (c *Context) rollback(b *Batch) {
	minPos := map[int32]int32{}
	for i := 0; i < b.n; i++ {
		for k := 0; k < int(b.nSeq[i]); k++ {
			s := b.seqIDs[i*b.maxSeq+k]
			if p, ok := minPos[s]; !ok || b.pos[i] < p {
				minPos[s] = b.pos[i]
			}
		}
	}
	for s, p := range minPos {
		capi.MemorySeqRm(c.mem, s, p, -1)
	}
	c.nOut = 0
}

// Encode runs an encoder (BERT-like or encoder-decoder) model on a batch,
// without the KV memory. The batch must fit the context's UBatchSize.
func (c *Context) Encode(ctx context.Context, b *Batch) error {
	if err := c.acquire("encode"); err != nil {
		return err
	}
	defer c.release()
	return c.encode(ctx, b)
}

func (c *Context) encode(ctx context.Context, b *Batch) error {
	if err := c.lockMu("encode"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	// llama.cpp encodes through a graph without memory: a model that has
	// neither an encoder nor a memory-less context (BERT-like) fails to
	// build it, and llama_encode then reads the missing result and crashes.
	if c.mem != 0 && !capi.ModelHasEncoder(c.model.ptr) {
		if e := c.model.rpcErr.Load(); e != nil {
			return &Error{Code: CodeRPC, Op: "encode", Msg: e.Msg}
		}
		return errorf(CodeInvalid, "encode", "the model has no encoder: use Decode")
	}
	if err := c.check("encode", b, c.nUBatch); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &Error{Code: CodeCanceled, Op: "encode", Err: err}
	}
	restore, err := c.pinFor("encode", b.n)
	if err != nil {
		return err
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, c.setAbort)
	}
	c.idle = false
	var rc int32
	if len(c.model.rpcServers) == 0 {
		rc = capi.Encode(c.ptr, b.c())
	} else if rc, err = c.rpcCompute("encode", capi.Encode, b); err != nil {
		restore()
		if stop != nil {
			stop()
		}
		return err
	}
	restore()
	if stop != nil && !stop() {
		for c.abort.Load() == 0 {
			runtime.Gosched()
		}
	}
	aborted := c.abort.Swap(0) != 0
	runtime.KeepAlive(b)
	if rc != 0 {
		if c.closing.Load() {
			return c.closedErr("encode")
		}
		if aborted || ctx.Err() != nil {
			return &Error{Code: CodeCanceled, Op: "encode", Err: context.Cause(ctx)}
		}
		return errorf(CodeDecode, "encode", "llama.cpp failed with code %d", rc)
	}
	copy(c.outputs, b.output[:b.n])
	c.nOut = b.n
	return nil
}

func (c *Context) checkOutput(op string, i int) error {
	if i < 0 || i >= c.nOut || c.outputs[i] == 0 {
		return errorf(CodeInvalid, op, "batch index %d had no output in the last decode", i)
	}
	return nil
}

// Logits returns the logits of batch entry i of the last Decode (an entry
// added with output set). The slice views llama.cpp's memory: it is valid
// until the next Decode or Close; copy it to keep it.
func (c *Context) Logits(i int) ([]float32, error) {
	if err := c.lock("logits"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if err := c.checkOutput("logits", i); err != nil {
		return nil, err
	}
	if c.outputs[i] == outputBackend {
		return nil, errorf(CodeInvalid, "logits", "batch index %d was sampled on the backend (SetSampler): llama.cpp made no logits for it", i)
	}
	p := capi.GetLogitsIth(c.ptr, int32(i))
	if p == nil {
		return nil, errorf(CodeInvalid, "logits", "no logits for batch index %d", i)
	}
	return unsafe.Slice((*float32)(p), c.model.nVocb), nil
}

// Embeddings returns the embedding of batch entry i of the last Decode or
// Encode (needs Embeddings in the options). The slice views llama.cpp's
// memory, valid until the next call; copy it to keep it.
func (c *Context) Embeddings(i int) ([]float32, error) {
	if err := c.lock("embeddings"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if !c.embeddings {
		return nil, errorf(CodeUnsupported, "embeddings", "context made without Embeddings")
	}
	if err := c.checkOutput("embeddings", i); err != nil {
		return nil, err
	}
	p := capi.GetEmbeddingsIth(c.ptr, int32(i))
	if p == nil {
		return nil, errorf(CodeInvalid, "embeddings", "no embeddings for batch index %d", i)
	}
	return unsafe.Slice((*float32)(p), capi.ModelNEmbdOut(c.model.ptr)), nil
}

// SeqEmbeddings returns the pooled embedding of a sequence after the last
// Decode or Encode (needs Embeddings and a pooling type other than none).
// With PoolingRank it holds the classifier's scores. The slice views
// llama.cpp's memory, valid until the next call.
func (c *Context) SeqEmbeddings(seq int) ([]float32, error) {
	if err := c.acquire("embeddings"); err != nil {
		return nil, err
	}
	defer c.release()
	return c.seqEmbeddings(seq)
}

func (c *Context) seqEmbeddings(seq int) ([]float32, error) {
	if err := c.lockMu("embeddings"); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if !c.embeddings {
		return nil, errorf(CodeUnsupported, "embeddings", "context made without Embeddings")
	}
	if c.pooling == PoolingNone || c.pooling == PoolingDefault {
		return nil, errorf(CodeUnsupported, "embeddings", "context has no pooling; use Embeddings(i)")
	}
	if seq < 0 || seq >= c.nSeqMax {
		return nil, errorf(CodeInvalid, "embeddings", "sequence %d out of range [0, %d)", seq, c.nSeqMax)
	}
	p := capi.GetEmbeddingsSeq(c.ptr, int32(seq))
	if p == nil {
		return nil, errorf(CodeInvalid, "embeddings", "no embeddings for sequence %d", seq)
	}
	n := int(capi.ModelNEmbdOut(c.model.ptr))
	if c.pooling == PoolingRank {
		n = max(int(capi.ModelNClsOut(c.model.ptr)), 1)
	}
	return unsafe.Slice((*float32)(p), n), nil
}

// Normalize scales v in place by its p-norm, as llama.cpp's embd_normalize:
// p = 2 Euclidean (the usual), 1 taxicab, 0 max-absolute scaled to int16
// range, negative: leave as is, > 2: p-norm. It returns v.
func Normalize(v []float32, p int) []float32 {
	var sum float64
	switch {
	case p < 0:
		return v
	case p == 0:
		for _, x := range v {
			sum = math.Max(sum, math.Abs(float64(x)))
		}
		sum /= 32760
	case p == 2:
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		sum = math.Sqrt(sum)
	default:
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), float64(p))
		}
		sum = math.Pow(sum, 1/float64(p))
	}
	if sum > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / sum)
		}
	}
	return v
}

// Synchronize waits until the work of the last Decode or Encode is done.
// On a GPU, llama.cpp's decode returns once the work is queued, and the
// wait happens at the first read of its outputs (Logits, Sample, ...) or
// here; on a CPU the decode has finished when it returns, and Synchronize
// returns at once. Calling it is never needed: it lets a caller that
// times its decodes tell the queueing from the computation. With RPC
// workers Decode already waits for the result.
func (c *Context) Synchronize() error {
	if err := c.lock("synchronize"); err != nil {
		return err
	}
	defer c.unlock()
	if len(c.model.rpcServers) == 0 {
		capi.Synchronize(c.ptr)
	}
	return nil
}

// Idle puts the context's compute threads to sleep until its next decode.
// After each decode, ggml's worker threads keep polling for the next one
// for a while (on the order of a hundred milliseconds) so that
// back-to-back decodes start at once; meanwhile they take cores from the
// rest of the process, other contexts' decodes included. A caller that
// knows no decode follows soon (a server whose queue just emptied, a chat
// waiting for its user) calls Idle to give the cores back at once. The
// next decode wakes the threads, as it would after they slept on their
// own. Idle does nothing where the library cannot pause its threads.
func (c *Context) Idle() error {
	if err := c.lock("idle"); err != nil {
		return err
	}
	defer c.unlock()
	if capi.ThreadpoolPause == nil || c.idle {
		return nil
	}
	for _, tp := range []capi.Threadpool{c.tp, c.tpb} {
		if tp != 0 {
			capi.ThreadpoolPause(tp)
		}
	}
	c.idle = true
	return nil
}

// KV memory.

// Memory is the view of a Context's KV memory: the operations on its
// sequences and the positions they hold (llama.cpp's llama_memory_*
// functions). Get it with Context.Memory; it holds no state of its own,
// and its methods follow the Context's rules: not safe for concurrent use
// with the Context's other calls (ErrBusy), ErrClosed after Close, and a
// sequence outside [0, Sequences()) is an error matching ErrInvalid. The
// snapshots of a sequence's state (SeqState, SaveSeqFile) stay on Context
// with the whole context's.
type Memory struct {
	c *Context
}

// Memory returns the view of c's KV memory. A view of a nil *Context
// returns errors matching ErrInvalid.
func (c *Context) Memory() Memory { return Memory{c} }

func (c *Context) seqOK(op string, seq int, allowAll bool) error {
	if (allowAll && seq == -1) || (seq >= 0 && seq < c.nSeqMax) {
		return nil
	}
	return errorf(CodeInvalid, op, "sequence %d out of range [0, %d)", seq, c.nSeqMax)
}

// Clear empties the KV memory of every sequence.
func (m Memory) Clear() error {
	c := m.c
	if err := c.lock("clear memory"); err != nil {
		return err
	}
	defer c.unlock()
	// Clearing the data reaches the workers' buffers with RPC devices.
	return c.model.rpcGuard("clear memory", func() { capi.MemoryClear(c.mem, true) })
}

// Remove removes positions [p0, p1) of seq (-1: every sequence; p1 < 0:
// to the end). It returns false when the memory cannot remove a part of a
// sequence (recurrent models).
func (m Memory) Remove(seq, p0, p1 int) (bool, error) {
	c := m.c
	if err := c.acquire("remove tokens"); err != nil {
		return false, err
	}
	defer c.release()
	return c.removeTokens(seq, p0, p1)
}

func (c *Context) removeTokens(seq, p0, p1 int) (bool, error) {
	if err := c.lockMu("remove tokens"); err != nil {
		return false, err
	}
	defer c.mu.Unlock()
	if err := c.seqOK("remove tokens", seq, true); err != nil {
		return false, err
	}
	var ok bool
	err := c.model.rpcGuard("remove tokens", func() { ok = capi.MemorySeqRm(c.mem, int32(seq), clampPos(p0), clampPos(p1)) })
	return ok, err
}

func clampPos(p int) int32 {
	if p < 0 {
		return -1
	}
	return int32(min(p, math.MaxInt32))
}

// Copy copies positions [p0, p1) of src to dst (p1 < 0: to the end),
// sharing the cells with KVUnified. Without KVUnified each sequence has a
// KV buffer of its own, and llama.cpp copies only whole buffers: then p0
// must be 0 or negative and p1 negative (the whole sequence; remove the
// tail afterwards with Remove), else the error matches ErrUnsupported
// (llama.cpp would abort the process).
func (m Memory) Copy(src, dst, p0, p1 int) error {
	c := m.c
	if err := c.lock("copy tokens"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("copy tokens", src, false); err != nil {
		return err
	}
	if err := c.seqOK("copy tokens", dst, false); err != nil {
		return err
	}
	if !c.kvUnified && c.nSeqMax > 1 && src != dst && (p0 > 0 || p1 >= 0) {
		return errorf(CodeUnsupported, "copy tokens",
			"a part [%d, %d) of a sequence cannot be copied without KVUnified: copy the whole sequence (0, -1)", p0, p1)
	}
	if src == dst {
		return nil
	}
	// Without KVUnified the copy reaches the buffers (the workers' too).
	return c.model.rpcGuard("copy tokens", func() {
		capi.MemorySeqCp(c.mem, int32(src), int32(dst), clampPos(p0), clampPos(p1))
	})
}

// Keep removes every sequence but seq.
func (m Memory) Keep(seq int) error {
	c := m.c
	if err := c.lock("keep sequence"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("keep sequence", seq, false); err != nil {
		return err
	}
	return c.model.rpcGuard("keep sequence", func() { capi.MemorySeqKeep(c.mem, int32(seq)) })
}

// Shift adds delta to the positions [p0, p1) of seq (-1: every
// sequence), for a context shift. A memory that cannot shift positions
// (CanShift) is an error matching ErrUnsupported.
func (m Memory) Shift(seq, p0, p1, delta int) error {
	c := m.c
	if err := c.lock("shift tokens"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("shift tokens", seq, true); err != nil {
		return err
	}
	if !capi.MemoryCanShift(c.mem) {
		return errorf(CodeUnsupported, "shift tokens", "this model's memory cannot shift positions")
	}
	if delta < -math.MaxInt32/2 || delta > math.MaxInt32/2 {
		return errorf(CodeInvalid, "shift tokens", "delta %d out of range", delta)
	}
	return c.model.rpcGuard("shift tokens", func() {
		capi.MemorySeqAdd(c.mem, int32(seq), clampPos(p0), clampPos(p1), int32(delta))
	})
}

// Divide divides the positions [p0, p1) of seq (-1: every sequence) by d
// (> 1), for self-extend. A memory that cannot shift positions (CanShift)
// is an error matching ErrUnsupported.
func (m Memory) Divide(seq, p0, p1, d int) error {
	c := m.c
	if err := c.lock("divide tokens"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("divide tokens", seq, true); err != nil {
		return err
	}
	if d < 1 || d > math.MaxInt32 {
		return errorf(CodeInvalid, "divide tokens", "divisor %d must be at least 1", d)
	}
	if !capi.MemoryCanShift(c.mem) {
		return errorf(CodeUnsupported, "divide tokens", "this model's memory cannot shift positions")
	}
	return c.model.rpcGuard("divide tokens", func() {
		capi.MemorySeqDiv(c.mem, int32(seq), clampPos(p0), clampPos(p1), int32(d))
	})
}

// PosRange returns the smallest and largest position of seq in memory;
// both are -1 when the sequence is empty.
func (m Memory) PosRange(seq int) (lo, hi int, err error) {
	c := m.c
	if err := c.acquire("pos range"); err != nil {
		return -1, -1, err
	}
	defer c.release()
	return c.posRange(seq)
}

func (c *Context) posRange(seq int) (lo, hi int, err error) {
	if err := c.lockMu("pos range"); err != nil {
		return -1, -1, err
	}
	defer c.mu.Unlock()
	if err := c.seqOK("pos range", seq, false); err != nil {
		return -1, -1, err
	}
	return int(capi.MemorySeqPosMin(c.mem, int32(seq))), int(capi.MemorySeqPosMax(c.mem, int32(seq))), nil
}

// CanShift reports whether the memory can shift positions (Shift and
// Divide); false also when the Context is nil, closed or in use.
func (m Memory) CanShift() bool {
	c := m.c
	if c.lock("can shift") != nil {
		return false
	}
	defer c.unlock()
	return capi.MemoryCanShift(c.mem)
}

// State.

// State returns the whole context state (KV memory, outputs, RNG).
func (c *Context) State() ([]byte, error) {
	if err := c.lock("state"); err != nil {
		return nil, err
	}
	defer c.unlock()
	var buf []byte
	err := c.model.rpcGuard("state", func() {
		n := capi.StateGetSize(c.ptr)
		buf = make([]byte, n)
		if n > 0 {
			buf = buf[:capi.StateGetData(c.ptr, unsafe.Pointer(&buf[0]), n)]
		}
	})
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// SetState restores a state returned by State.
func (c *Context) SetState(data []byte) error {
	if err := c.lock("set state"); err != nil {
		return err
	}
	defer c.unlock()
	if len(data) == 0 {
		return errorf(CodeInvalid, "set state", "empty state")
	}
	var n uintptr
	if err := c.model.rpcGuard("set state", func() {
		n = capi.StateSetData(c.ptr, unsafe.Pointer(&data[0]), uintptr(len(data)))
	}); err != nil {
		return err
	}
	if n == 0 {
		return errorf(CodeLoad, "set state", "llama.cpp rejected the state data")
	}
	c.nOut = 0
	return nil
}

// SeqState returns the state of one sequence.
func (c *Context) SeqState(seq int) ([]byte, error) {
	if err := c.lock("seq state"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if err := c.seqOK("seq state", seq, false); err != nil {
		return nil, err
	}
	var buf []byte
	err := c.model.rpcGuard("seq state", func() {
		n := capi.StateSeqGetSize(c.ptr, int32(seq))
		buf = make([]byte, n)
		if n > 0 {
			buf = buf[:capi.StateSeqGetData(c.ptr, unsafe.Pointer(&buf[0]), n, int32(seq))]
		}
	})
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// SetSeqState restores a sequence state into seq (which should be empty).
func (c *Context) SetSeqState(seq int, data []byte) error {
	if err := c.lock("set seq state"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("set seq state", seq, false); err != nil {
		return err
	}
	if len(data) == 0 {
		return errorf(CodeInvalid, "set seq state", "empty state")
	}
	var n uintptr
	if err := c.model.rpcGuard("set seq state", func() {
		n = capi.StateSeqSetData(c.ptr, unsafe.Pointer(&data[0]), uintptr(len(data)), int32(seq))
	}); err != nil {
		return err
	}
	if n == 0 {
		return errorf(CodeLoad, "set seq state", "llama.cpp rejected the sequence state")
	}
	return nil
}

func tokPtr(t []Token) unsafe.Pointer {
	if len(t) == 0 {
		return nil
	}
	return unsafe.Pointer(&t[0])
}

// SaveStateFile writes the whole state and the tokens it holds to a file.
func (c *Context) SaveStateFile(path string, tokens []Token) error {
	if err := c.lock("save state"); err != nil {
		return err
	}
	defer c.unlock()
	var ok bool
	if err := c.model.rpcGuard("save state", func() {
		ok = capi.StateSaveFile(c.ptr, path, tokPtr(tokens), uintptr(len(tokens)))
	}); err != nil {
		return err
	}
	if !ok {
		return errorf(CodeLoad, "save state", "could not write %s", path)
	}
	return nil
}

// LoadStateFile restores a state written by SaveStateFile and returns its tokens.
func (c *Context) LoadStateFile(path string) ([]Token, error) {
	if err := c.lock("load state"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if _, err := os.Stat(path); err != nil {
		return nil, &Error{Code: CodeLoad, Op: "load state", Err: err}
	}
	toks := make([]Token, c.nCtx)
	var n uintptr
	var ok bool
	if err := c.model.rpcGuard("load state", func() {
		ok = capi.StateLoadFile(c.ptr, path, tokPtr(toks), uintptr(len(toks)), &n)
	}); err != nil {
		return nil, err
	}
	if !ok {
		return nil, errorf(CodeLoad, "load state", "llama.cpp rejected %s", path)
	}
	c.nOut = 0
	return toks[:n], nil
}

// SaveSeqFile writes one sequence's state and tokens to a file, returning
// the bytes written.
func (c *Context) SaveSeqFile(path string, seq int, tokens []Token) (int, error) {
	if err := c.lock("save seq"); err != nil {
		return 0, err
	}
	defer c.unlock()
	if err := c.seqOK("save seq", seq, false); err != nil {
		return 0, err
	}
	var n uintptr
	if err := c.model.rpcGuard("save seq", func() {
		n = capi.StateSeqSaveFile(c.ptr, path, int32(seq), tokPtr(tokens), uintptr(len(tokens)))
	}); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, errorf(CodeLoad, "save seq", "could not write %s", path)
	}
	return int(n), nil
}

// LoadSeqFile restores a sequence file into seq and returns its tokens.
func (c *Context) LoadSeqFile(path string, seq int) ([]Token, error) {
	if err := c.lock("load seq"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if err := c.seqOK("load seq", seq, false); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, &Error{Code: CodeLoad, Op: "load seq", Err: err}
	}
	toks := make([]Token, c.nCtx)
	var n, read uintptr
	if err := c.model.rpcGuard("load seq", func() {
		read = capi.StateSeqLoadFile(c.ptr, path, int32(seq), tokPtr(toks), uintptr(len(toks)), &n)
	}); err != nil {
		return nil, err
	}
	if read == 0 {
		return nil, errorf(CodeLoad, "load seq", "llama.cpp rejected %s", path)
	}
	return toks[:n], nil
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

// SetCausalAttention switches causal attention on or off.
func (c *Context) SetCausalAttention(on bool) error {
	if err := c.lock("set causal"); err != nil {
		return err
	}
	defer c.unlock()
	capi.SetCausalAttn(c.ptr, on)
	return nil
}

// Perf holds a context's performance counters (with Perf in the options).
type Perf struct {
	LoadMs, PromptMs, EvalMs float64
	PromptTokens, EvalTokens int
	GraphReuses              int
}

// Perf returns the performance counters.
func (c *Context) Perf() (Perf, error) {
	if err := c.lock("perf"); err != nil {
		return Perf{}, err
	}
	defer c.unlock()
	d := capi.PerfContext(c.ptr)
	return Perf{LoadMs: d.TLoadMs, PromptMs: d.TPEvalMs, EvalMs: d.TEvalMs, PromptTokens: int(d.NPEval),
		EvalTokens: int(d.NEval), GraphReuses: int(d.NReused)}, nil
}

// ResetPerf zeroes the performance counters.
func (c *Context) ResetPerf() error {
	if err := c.lock("perf"); err != nil {
		return err
	}
	defer c.unlock()
	capi.PerfContextReset(c.ptr)
	return nil
}

// Adapters.

// Adapter is a LoRA adapter loaded for a model. It is safe for concurrent
// use; Close frees it (idempotent), as does closing its Model. While a
// Context uses it (SetAdapters), Close refuses with an error matching
// ErrBusy: remove it from those contexts (SetAdapters, or close them) first.
type Adapter struct {
	model *Model
	mu    sync.Mutex
	ptr   capi.AdapterLora
	path  string
	users map[*Context]struct{} // contexts whose adapters include it
}

// unuse records that c no longer uses the adapter.
func (a *Adapter) unuse(c *Context) {
	a.mu.Lock()
	delete(a.users, c)
	a.mu.Unlock()
}

// LoadAdapter loads a LoRA adapter GGUF for the model.
func (m *Model) LoadAdapter(path string) (*Adapter, error) {
	done, err := m.use("load adapter")
	if err != nil {
		return nil, err
	}
	defer done()
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		if err == nil {
			err = os.ErrInvalid
		}
		return nil, &Error{Code: CodeLoad, Op: "load adapter", Err: err}
	}
	var p capi.AdapterLora
	// Loading uploads the adapter's tensors, to the workers too.
	if err := m.rpcGuard("load adapter", func() { p = capi.AdapterLoraInit(m.ptr, path) }); err != nil {
		return nil, err
	}
	if p == 0 {
		return nil, errorf(CodeLoad, "load adapter", "llama.cpp could not load %s for this model", path)
	}
	a := &Adapter{model: m, ptr: p, path: path, users: map[*Context]struct{}{}}
	if !m.addChild(a) {
		_ = m.rpcGuard("close adapter", func() { capi.AdapterLoraFree(p) })
		return nil, closedErr("load adapter", "model")
	}
	return a, nil
}

// Path returns the adapter's file ("" for nil).
func (a *Adapter) Path() string {
	if a == nil {
		return ""
	}
	return a.path
}

// Meta returns one metadata value of the adapter.
func (a *Adapter) Meta(key string) (string, bool) {
	if a == nil {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ptr == 0 {
		return "", false
	}
	return a.model.strCall("adapter meta", func(b unsafe.Pointer, s uintptr) int32 {
		return capi.AdapterMetaValStr(a.ptr, key, b, s)
	})
}

// closeFromParent frees the adapter as its model closes, after the
// model's contexts are closed.
func (a *Adapter) closeFromParent() { a.close(true) }

func (a *Adapter) close(force bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !force && len(a.users) > 0 {
		return &Error{Code: CodeBusy, Op: "close adapter", Msg: "a context still uses the adapter (remove it with SetAdapters first)"}
	}
	if a.ptr != 0 {
		// llama.cpp frees adapters with their model; free only while the
		// model lives. After a worker failed, its buffers are left.
		p := a.ptr
		_ = a.model.rpcGuard("close adapter", func() { capi.AdapterLoraFree(p) })
		a.ptr = 0
	}
	return nil
}

// Close frees the adapter. It fails with an error matching ErrBusy while a
// Context uses the adapter (see SetAdapters).
func (a *Adapter) Close() error {
	if a == nil {
		return errorf(CodeInvalid, "close adapter", "nil *Adapter")
	}
	if err := a.close(false); err != nil {
		return err
	}
	a.model.removeChild(a)
	return nil
}

// AdapterScale is an adapter with the scale to apply it at.
type AdapterScale struct {
	Adapter *Adapter
	Scale   float32
}

// SetAdapters makes the given adapters (and only them) active on the
// context, each at its scale; nil removes all. Swapping adapters never
// reloads the model.
func (c *Context) SetAdapters(adapters []AdapterScale) error {
	if err := c.lock("set adapters"); err != nil {
		return err
	}
	defer c.unlock()
	ptrs := make([]uintptr, 0, len(adapters))
	scales := make([]float32, 0, len(adapters))
	for _, a := range adapters {
		if a.Adapter == nil {
			return errorf(CodeInvalid, "set adapters", "nil *Adapter")
		}
		if a.Adapter.model != c.model {
			return errorf(CodeInvalid, "set adapters", "adapter %s belongs to another model", a.Adapter.path)
		}
		if math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0) {
			return errorf(CodeInvalid, "set adapters", "scale %v is not finite", a.Scale)
		}
		scales = append(scales, a.Scale)
	}
	// Mark the new adapters used (refusing closed ones) before llama.cpp
	// sees them, so that none can be freed while this context holds it.
	var used []*Adapter
	undo := func() {
		for _, a := range used {
			if !slices.Contains(c.adapters, a) {
				a.unuse(c)
			}
		}
	}
	for _, as := range adapters {
		a := as.Adapter
		a.mu.Lock()
		p := a.ptr
		if p != 0 {
			a.users[c] = struct{}{}
		}
		a.mu.Unlock()
		if p == 0 {
			undo()
			return closedErr("set adapters", "adapter")
		}
		used = append(used, a)
		ptrs = append(ptrs, uintptr(p))
	}
	var pp, sp unsafe.Pointer
	if len(ptrs) > 0 {
		pp, sp = unsafe.Pointer(&ptrs[0]), unsafe.Pointer(&scales[0])
	}
	var rc int32
	if err := c.model.rpcGuard("set adapters", func() { rc = capi.SetAdaptersLora(c.ptr, pp, uintptr(len(ptrs)), sp) }); err != nil {
		undo()
		return err
	}
	if rc != 0 {
		undo()
		return errorf(CodeInvalid, "set adapters", "llama.cpp refused the adapters (code %d)", rc)
	}
	for _, a := range c.adapters {
		if !slices.Contains(used, a) {
			a.unuse(c)
		}
	}
	c.adapters = used
	return nil
}

// SetControlVector applies a control vector: data holds one direction of
// EmbeddingSize floats per layer, starting at layer 1, and is applied to
// layers [layerStart, layerEnd]. nil data clears it.
func (c *Context) SetControlVector(data []float32, layerStart, layerEnd int) error {
	if err := c.lock("control vector"); err != nil {
		return err
	}
	defer c.unlock()
	nEmbd := int(capi.ModelNEmbd(c.model.ptr))
	if data == nil {
		// Clearing and applying write to the vectors' buffers, the workers' too.
		return c.model.rpcGuard("control vector", func() { capi.SetAdapterCvec(c.ptr, nil, 0, int32(nEmbd), -1, -1) })
	}
	nLayer := int(capi.ModelNLayer(c.model.ptr))
	if len(data)%nEmbd != 0 || len(data)/nEmbd > nLayer {
		return errorf(CodeInvalid, "control vector", "data of %d floats is not up to %d layers of %d", len(data), nLayer, nEmbd)
	}
	if layerStart < 0 || layerEnd < layerStart || layerEnd > nLayer {
		return errorf(CodeInvalid, "control vector", "layers [%d, %d] out of range [0, %d]", layerStart, layerEnd, nLayer)
	}
	var rc int32
	if err := c.model.rpcGuard("control vector", func() {
		rc = capi.SetAdapterCvec(c.ptr, unsafe.Pointer(&data[0]), uintptr(len(data)), int32(nEmbd), int32(layerStart), int32(layerEnd))
	}); err != nil {
		return err
	}
	if rc != 0 {
		return errorf(CodeInvalid, "control vector", "llama.cpp refused it (code %d)", rc)
	}
	return nil
}
