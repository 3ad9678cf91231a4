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
// that collects timings (SamplerChainOptions.Perf) cannot either.
func (c *SamplerChain) Offloadable() bool {
	if c == nil || c.hasGo || c.perf || len(c.names) == 0 {
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
	if seq < 0 || seq >= c.nSeqMax {
		return errorf(CodeInvalid, "set sampler", "sequence %d is outside [0, %d)", seq, c.nSeqMax)
	}
	var old *SamplerChain
	for ch, s := range c.backend {
		if s == seq {
			old = ch
		}
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
		delete(c.backend, old)
		old.attached = nil
		c.backendSeq[seq] = false
	}
	if chain == nil {
		return nil
	}
	chain.wasAttached.Store(true)
	if !ok {
		return errorf(CodeUnsupported, "set sampler", "llama.cpp cannot run the chain %v on the backend", chain.names)
	}
	if c.backend == nil {
		c.backend = map[*SamplerChain]int{}
	}
	c.backend[chain] = seq
	if c.backendSeq == nil {
		c.backendSeq = make([]bool, c.nSeqMax)
	}
	c.backendSeq[seq] = true
	chain.attached, chain.attachedSeq = c, seq
	return nil
}

// detachAll forgets the context's backend samplers; the caller holds
// attachMu and c.mu and frees the context.
func (c *Context) detachAll() {
	for ch := range c.backend {
		ch.attached = nil
	}
	c.backend, c.backendSeq = nil, nil
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
	if c.ptr != 0 {
		capi.SetSampler(c.ptr, capi.SeqID(ch.attachedSeq), 0)
	}
	delete(c.backend, ch)
	if c.backendSeq != nil {
		c.backendSeq[ch.attachedSeq] = false
	}
	c.mu.Unlock()
	ch.attached = nil
}

// markBackendOutputs marks the outputs of the last decode that a backend
// chain sampled (outputBackend): llama.cpp did not copy their logits. The
// caller holds c.mu.
func (c *Context) markBackendOutputs(b *Batch) {
	if len(c.backend) == 0 {
		return
	}
	for i := range b.n {
		if b.output[i] == 0 {
			continue
		}
		all := true
		for _, s := range b.seqIDs[i*b.maxSeq : i*b.maxSeq+int(b.nSeq[i])] {
			all = all && s >= 0 && int(s) < len(c.backendSeq) && c.backendSeq[s]
		}
		if all {
			c.outputs[i] = outputBackend
			c.outSeq[i] = b.seqIDs[i*b.maxSeq]
		}
	}
}

// checkBackendOutputs refuses a batch asking for more than one output of
// a sequence that samples on the backend (llama.cpp's
// n_outputs_max_per_seq is 1): llama.cpp would reject it. The caller
// holds c.mu.
func (c *Context) checkBackendOutputs(b *Batch) error {
	if len(c.backend) == 0 {
		return nil
	}
	var seen []bool
	for i := range b.n {
		if b.output[i] == 0 {
			continue
		}
		for _, s := range b.seqIDs[i*b.maxSeq : i*b.maxSeq+int(b.nSeq[i])] {
			if s < 0 || int(s) >= len(c.backendSeq) || !c.backendSeq[s] {
				continue
			}
			if seen == nil {
				seen = make([]bool, len(c.backendSeq))
			}
			if seen[s] {
				return errorf(CodeInvalid, "decode", "sequence %d samples on the backend (SetSampler): a batch may ask for one output of it", s)
			}
			seen[s] = true
		}
	}
	return nil
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
	if seq, ok := c.backend[chain]; !ok || int32(seq) != c.outSeq[idx] {
		return 0, false, errorf(CodeInvalid, "sample", "batch index %d was sampled on the backend by the chain of sequence %d", idx, c.outSeq[idx])
	}
	t = capi.GetSampledTokenIth(c.ptr, int32(idx))
	if t < 0 {
		return 0, false, errorf(CodeInvalid, "sample", "the backend sampled no token for batch index %d", idx)
	}
	return t, true, nil
}
