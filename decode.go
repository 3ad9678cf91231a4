package llama

import (
	"context"
	"runtime"

	"github.com/x/llama/internal/capi"
)

// check validates a batch against the context before it reaches C.
func (c *Context) check(op string, b *Batch, maxTokens int) error {
	if b == nil || b.n == 0 {
		return errorf(CodeInvalid, op, "empty batch")
	}
	if b.n > maxTokens {
		return errorf(CodeInvalid, op, "batch of %d tokens exceeds the context's batch size %d", b.n, maxTokens)
	}
	// Without causal attention (or without a KV memory: the decode is an
	// encode) llama.cpp computes the batch in one micro-batch, and asserts it.
	if (!c.causal || c.mem == 0) && b.n > c.nUBatch {
		return errorf(CodeInvalid, op, "batch of %d tokens exceeds the context's micro-batch size %d, which bounds a batch without causal attention", b.n, c.nUBatch)
	}
	// llama.cpp asserts that the outputs fit its output buffer: every
	// token is one with embeddings on, or in an encode.
	nOut := b.n
	if c.mem != 0 && op != "encode" && !c.embeddings {
		nOut = 0
		for _, o := range b.output[:b.n] {
			if o != 0 {
				nOut++
			}
		}
	}
	if nOut > c.nOutMax {
		return errorf(CodeInvalid, op, "batch of %d outputs exceeds the context's %d (ContextOptions.OutputsMax)", nOut, c.nOutMax)
	}
	switch {
	case c.mtp && b.hidden == nil:
		return errorf(CodeInvalid, op, "an MTP context needs each entry's hidden row (Batch.SetHidden)")
	case c.mtp && b.width != int(capi.ModelNEmbdOut(c.model.ptr)):
		return errorf(CodeInvalid, op, "hidden rows of %d values, the model's are %d", b.width, capi.ModelNEmbdOut(c.model.ptr))
	case !c.mtp && b.hidden != nil:
		return errorf(CodeInvalid, op, "a batch with hidden rows is for an MTP context (ContextOptions.MTP)")
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
	run, err := c.beginCompute(ctx, "decode", b.n)
	if err != nil {
		return err
	}
	var rc int32
	if len(c.model.rpcServers) == 0 {
		rc = capi.Decode(c.ptr, b.c())
	} else {
		rc, err = c.rpcCompute("decode", capi.Decode, b)
	}
	c.endCompute(run)
	runtime.KeepAlive(b)
	if err != nil {
		return err
	}
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

// computeRun is what beginCompute set up around one C computation, for
// endCompute to undo.
type computeRun struct {
	restore func()      // puts the calling thread back where it was
	stop    func() bool // unhooks ctx from the abort flag; nil for a ctx never done
}

// beginCompute prepares one C computation of op on the context
// (llama_decode, llama_encode, or libmtmd's evaluation of a chunk), the
// caller holding the context (lock or lockMu): a done ctx returns an error
// matching ErrCanceled before anything starts; the calling thread is
// placed as the ThreadPool options ask for a batch of n tokens (n = 0:
// left where it is); the end of ctx is wired to the abort flag that
// llama.cpp's abort callback reads, so the computation stops at its next
// check; and the threads are marked awake. Every beginCompute that returns
// no error is followed by endCompute once the computation has returned,
// whatever it returned, before the caller reads the flag or the outputs.
func (c *Context) beginCompute(ctx context.Context, op string, n int) (computeRun, error) {
	if err := ctx.Err(); err != nil {
		return computeRun{}, &Error{Code: CodeCanceled, Op: op, Err: err}
	}
	r := computeRun{restore: func() {}}
	if n > 0 {
		restore, err := c.pinFor(op, n)
		if err != nil {
			return computeRun{}, err
		}
		r.restore = restore
	}
	if ctx.Done() != nil {
		r.stop = context.AfterFunc(ctx, c.setAbort)
	}
	c.idle = false
	return r, nil
}

// endCompute undoes what beginCompute set up and reports whether the
// abort flag was set during the computation (its ctx ended, or Close asked
// it to stop). It clears the flag, so that the next computation starts
// unaborted.
func (c *Context) endCompute(r computeRun) (aborted bool) {
	r.restore()
	if r.stop != nil && !r.stop() {
		// The abort func has started; wait until it has set the flag so
		// that clearing it below cannot be undone by it.
		for c.abort.Load() == 0 {
			runtime.Gosched()
		}
	}
	return c.abort.Swap(0) != 0
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
	run, err := c.beginCompute(ctx, "encode", b.n)
	if err != nil {
		return err
	}
	var rc int32
	if len(c.model.rpcServers) == 0 {
		rc = capi.Encode(c.ptr, b.c())
	} else {
		rc, err = c.rpcCompute("encode", capi.Encode, b)
	}
	aborted := c.endCompute(run)
	runtime.KeepAlive(b)
	if err != nil {
		return err
	}
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
