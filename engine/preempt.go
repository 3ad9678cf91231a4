package engine

import "github.com/x/llama"

// Preemption. With Context.KVUnified the slots share one KV buffer, and
// requests that fit one by one may not fit together: the buffer fills
// while all of them still generate. llama-server then ends every request
// in the batch with "context size has been exceeded". This engine instead
// preempts one request: it gives up that request's memory (the tokens
// stay with the slot), the others go on, and when any request ends the
// preempted one decodes its tokens again and goes on where it stopped,
// with the same samplers, so that its output is the one it would have
// had. A request is ended with the error only when it runs alone and
// still does not fit, or where its memory cannot be rebuilt from tokens
// (media in the prompt, speculative decoding, embeddings).
//
// Termination: a preemption needs another request in the batch, which
// goes on; the preempted wake only when a request ends, so between two
// ends there are fewer preemptions than slots.

// preempt gives up the memory of one of this step's requests, the one
// whose end needs the most memory (the latest started among equals),
// after the batch failed for want of memory and the caller undid it. It
// reports false where nothing was preempted.
func (e *Engine) preempt() bool {
	if e.embedding || e.spec != nil {
		return false
	}
	var victim *engSlot
	n := 0
	for _, s := range e.slots {
		if s.tk == nil || s.iBatch == -1 {
			continue
		}
		n++
		if s.tk.t.Media != nil || len(s.cache) == 0 {
			continue
		}
		if victim == nil || e.finalSize(s) > e.finalSize(victim) ||
			e.finalSize(s) == e.finalSize(victim) && s.tStart.After(victim.tStart) {
			victim = s
		}
	}
	if n < 2 || victim == nil {
		return false
	}
	s := victim
	if ok, err := e.lctx.Memory().Remove(s.id, 0, -1); err != nil || !ok {
		return false
	}
	if s.state != stRecompute { // else s.cache is a prefix of s.resume
		s.resume = append(s.resume[:0], s.cache...)
		s.resumeTo = s.state
	}
	s.cache = s.cache[:0]
	s.ckpts = s.ckpts[:0]
	s.state, s.iBatch = stWait, -1
	e.mu.Lock()
	e.metrics.PreemptionsTotal++
	e.mu.Unlock()
	if log := e.opts.Logger; log != nil {
		log.Debug("shared KV cache full: request preempted, to be decoded again when another ends",
			"slot", s.id, "tokens", len(s.resume))
	}
	return true
}

// finalSize is the memory slot s's request takes at its end, as far as
// its NPredict tells (the whole slot without one).
func (e *Engine) finalSize(s *engSlot) int {
	t := s.tk.t
	if t.NPredict < 0 {
		return e.nCtxSlot
	}
	return min(len(s.prompt)+t.NPredict, e.nCtxSlot)
}

// wakePreempted sets the preempted slots to decode their tokens again: a
// request ended, and memory is (or can be made) free.
func (e *Engine) wakePreempted() {
	for _, s := range e.slots {
		if s.state == stWait {
			s.state = stRecompute
		}
	}
}

// wakeStalled wakes the preempted slots where no other request runs
// (one ended without release, after a panic), so that none waits forever.
func (e *Engine) wakeStalled() {
	waiting := false
	for _, s := range e.slots {
		switch {
		case s.tk == nil:
		case s.state == stWait:
			waiting = true
		default:
			return
		}
	}
	if waiting {
		e.wakePreempted()
	}
}

// recompute adds to batch b the next n of slot s's tokens to decode again
// (paced as a prompt is), without outputs.
func (e *Engine) recompute(b *llama.Batch, s *engSlot, n int) {
	for _, tok := range s.resume[len(s.cache) : len(s.cache)+n] {
		b.Add(tok, len(s.cache), s.id, false)
		s.cache = append(s.cache, tok)
	}
	s.iBatch = -2 // in the batch, no output
}
