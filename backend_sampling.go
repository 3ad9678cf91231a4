package llama

import (
	"sync"

	"github.com/x/llama/internal/capi"
)

// Backend sampling: a sampler chain attached to a sequence of a Context
// runs inside the decode's graph, on the compute threads, and the decode
// returns the chosen token instead of the row of logits for the chain to
// read (llama.cpp's llama_set_sampler, as llama-server's
// --backend-sampling). On a CPU it saves copying and scanning a
// vocabulary's worth of logits for every output.

// backendSamplers are the samplers llama.cpp can run in the graph.
var backendSamplers = map[string]bool{
	"greedy": true, "dist": true, "top-k": true, "top-p": true, "min-p": true,
	"temp": true, "temp-ext": true, "penalties": true, "logit-bias": true,
}

// attachMu orders attaching and detaching chains (Context.SetSampler,
// SamplerChain.Close, Context.Close): it is taken before a Context's mu.
var attachMu sync.Mutex

// Offloadable reports whether every sampler of the chain can run on the
// backend (Context.SetSampler): greedy, dist, top-k, top-p, min-p, temp,
// temp-ext, penalties and logit-bias can; grammars, Go samplers, typical,
// XTC, DRY, mirostat, top-n-sigma, adaptive-p and infill cannot. A chain
// that collects timings (SamplerChainOptions.Perf) or selects no token
// (SamplerChainOptions.Filter) cannot either.
func (c *SamplerChain) Offloadable() bool {
	if c == nil || c.hasGo || c.perf || !c.selects || len(c.names) == 0 {
		return false
	}
	for _, n := range c.names {
		if !backendSamplers[n] {
			return false
		}
	}
	return true
}

// SetSampler attaches chain to sequence seq (nil detaches the one there):
// from the next Decode, the chain samples that sequence's outputs inside
// the decode, and chain.Sample on those outputs returns the token it chose
// (and accepts it, as for a chain sampling on the CPU). The chain must be
// Offloadable and of the context's model; a chain is attached to one
// sequence of one context at a time, and a sequence has one chain.
// Logits of the sequence's outputs are then not computed (Logits fails on
// them, and Sample on them with another chain): a caller that needs them,
// to report probabilities, detaches first. A decode may ask for one
// output of such a sequence (more is an error matching ErrInvalid). A
// chain goes to the backend once: detached or replaced, it can no longer
// sample (on the CPU, Sample, Apply and Clone refuse it): make a new one.
// Closing the chain or the context detaches it. Changing a sequence's
// chain makes llama.cpp plan its graph again at the next Decode.
// SetSampler waits for a Decode running on the context.
func (c *Context) SetSampler(seq int, chain *SamplerChain) error {
	attachMu.Lock()
	defer attachMu.Unlock()
	if chain != nil {
		if chain.model != c.model {
			return errorf(CodeInvalid, "set sampler", "chain and context belong to different models")
		}
		if !chain.Offloadable() {
			return errorf(CodeUnsupported, "set sampler", "the chain %v cannot run on the backend", chain.names)
		}
		if chain.attached != nil && (chain.attached != c || chain.attachedSeq != seq) {
			return errorf(CodeInvalid, "set sampler", "the chain is attached to another sequence")
		}
		if chain.attached == nil && chain.wasAttached.Load() {
			// llama.cpp prepares a chain for the graph once in its life
			// and aborts the process when asked again.
			return errorf(CodeInvalid, "set sampler", "the chain was attached before: a chain goes to the backend once")
		}
	}
	if err := c.lockMu("set sampler"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := c.seqOK("set sampler", seq, false); err != nil {
		return err
	}
	var old *SamplerChain
	if c.backend != nil {
		old = c.backend[seq]
	}
	if old == chain {
		return nil
	}
	var ptr capi.Sampler
	if chain != nil {
		if err := chain.lock("set sampler"); err != nil {
			return err
		}
		ptr = chain.ptr
		chain.mu.Unlock()
	}
	ok := capi.SetSampler(c.ptr, capi.SeqID(seq), ptr)
	if old != nil {
		c.setBackend(seq, nil)
		old.attached = nil
	}
	if chain == nil {
		return nil
	}
	chain.wasAttached.Store(true)
	if !ok {
		return errorf(CodeUnsupported, "set sampler", "llama.cpp cannot run the chain %v on the backend", chain.names)
	}
	c.setBackend(seq, chain)
	chain.attached, chain.attachedSeq = c, seq
	return nil
}

// setBackend records chain (nil: none) as sequence seq's backend chain;
// the caller holds c.mu.
func (c *Context) setBackend(seq int, chain *SamplerChain) {
	if c.backend == nil {
		c.backend = make([]*SamplerChain, c.nSeqMax)
	}
	switch {
	case c.backend[seq] == nil && chain != nil:
		c.nBackend++
	case c.backend[seq] != nil && chain == nil:
		c.nBackend--
	}
	c.backend[seq] = chain
}

// detachAll forgets the context's backend samplers; the caller holds
// attachMu and c.mu and frees the context.
func (c *Context) detachAll() {
	for _, ch := range c.backend {
		if ch != nil {
			ch.attached = nil
		}
	}
	c.backend, c.nBackend = nil, 0
}

// detach takes the chain off the context it is attached to, before the
// chain is freed.
func (ch *SamplerChain) detach() {
	attachMu.Lock()
	defer attachMu.Unlock()
	c := ch.attached
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != 0 {
		capi.SetSampler(c.ptr, capi.SeqID(ch.attachedSeq), 0)
	}
	c.setBackend(ch.attachedSeq, nil)
	ch.attached = nil
}

// backendOutputs checks b's outputs against the sequences that sample on
// the backend before a decode, in one pass: llama.cpp samples one output
// of such a sequence a batch (n_outputs_max_per_seq is 1) and rejects a
// batch asking for more, so that is refused here. It records in
// c.pendSeq, for each output all of whose sequences sample on the backend,
// its sequence (-1 for the others), for markBackendOutputs, and reports
// whether there is any. The caller holds c.mu.
func (c *Context) backendOutputs(b *Batch) (bool, error) {
	if c.nBackend == 0 {
		return false, nil
	}
	if c.pendSeq == nil {
		// Made on the first decode with a backend chain: contexts that
		// never use one carry none of these.
		c.pendSeq = make([]int32, c.nBatch)
		c.outSeq = make([]int32, c.nBatch)
		c.seenSeq = make([]bool, c.nSeqMax)
	}
	c.pendSeq = c.pendSeq[:b.n]
	clear(c.seenSeq)
	found := false
	for i := range b.n {
		c.pendSeq[i] = -1
		if b.output[i] == 0 {
			continue
		}
		all := true
		for _, s := range b.seqIDs[i*b.maxSeq : i*b.maxSeq+int(b.nSeq[i])] {
			if s < 0 || int(s) >= len(c.backend) || c.backend[s] == nil {
				all = false
				continue
			}
			if c.seenSeq[s] {
				return false, errorf(CodeInvalid, "decode", "sequence %d samples on the backend (SetSampler): a batch may ask for one output of it", s)
			}
			c.seenSeq[s] = true
		}
		if all {
			c.pendSeq[i], found = b.seqIDs[i*b.maxSeq], true
		}
	}
	return found, nil
}

// markBackendOutputs marks, after a decode, the outputs backendOutputs
// found (outputBackend): llama.cpp did not copy their logits. The caller
// holds c.mu.
func (c *Context) markBackendOutputs() {
	for i, s := range c.pendSeq {
		if s >= 0 {
			c.outputs[i] = outputBackend
			c.outSeq[i] = s
		}
	}
}

// outputBackend marks in Context.outputs an output a backend chain sampled.
const outputBackend = 2

// backendToken returns the token the backend sampled for output idx with
// chain; ok is false when the output was not sampled on the backend, and
// err set when it was, by another chain. The caller holds c.mu and has
// checked idx.
func (c *Context) backendToken(chain *SamplerChain, idx int) (t capi.Token, ok bool, err error) {
	if c.outputs[idx] != outputBackend {
		return 0, false, nil
	}
	if seq := c.outSeq[idx]; c.backend == nil || c.backend[seq] != chain {
		return 0, false, errorf(CodeInvalid, "sample", "batch index %d was sampled on the backend by the chain of sequence %d", idx, c.outSeq[idx])
	}
	t = capi.GetSampledTokenIth(c.ptr, int32(idx))
	if t < 0 {
		return 0, false, errorf(CodeInvalid, "sample", "the backend sampled no token for batch index %d", idx)
	}
	return t, true, nil
}
