package engine

import (
	"errors"
	"slices"

	"github.com/x/llama"
)

// Preemption. With Context.KVUnified the slots share one KV buffer, and
// requests that fit one by one may not fit together: the buffer fills
// while all of them still run. llama-server then ends every request in
// the batch with "context size has been exceeded". This engine instead
// preempts a request, as vLLM does: the one started last gives up its
// memory (the tokens stay with the slot) and waits while the others go
// on; it decodes its tokens again once they fit in the free memory, and
// goes on where it stopped, with the same samplers, so that its output
// is the one it would have had (up to the rounding differences that any
// change of batch brings, which can turn a near tie). New requests start
// meanwhile, but being started later they are preempted first, so the
// preempted keep their turn. A request ends with the error only when it
// runs alone and still does not fit, where no running request's memory
// can be rebuilt from tokens (media in the prompt, speculative decoding,
// embeddings), or when it has waited maxWaitSlots full slots' worth of
// steps: with context shift a request may never end, and one running
// beside it must not wait for ever.
//
// Termination: a preemption leaves another request running; a preempted
// request wakes only when memory frees (a request ends or shifts its
// context), into that memory, or when none runs, so between two such
// events there are fewer preemptions than slots, and the requests left
// running go on.

// preempt gives up the memory of the running request started last, after
// the batch failed for want of memory and the caller undid it. It
// reports false where nothing was preempted: a request runs alone, or
// none can be.
func (e *Engine) preempt() bool {
	if e.embedding || e.spec != nil {
		return false
	}
	var victim *engSlot
	running := 0
	for _, s := range e.slots {
		if s.tk == nil || s.state == stWait {
			continue
		}
		running++
		if s.tk.t.Media != nil {
			continue
		}
		if victim == nil || s.tStart.After(victim.tStart) {
			victim = s
		}
	}
	if running < 2 || victim == nil {
		return false
	}
	s := victim
	if ok, err := e.lctx.Memory().Remove(s.id, 0, -1); err != nil || !ok {
		return false
	}
	if s.state != stRecompute { // else s.cache is a prefix of s.resume
		s.resume = append(s.resume[:0], s.cache...)
		s.resumeTo = s.state
		s.waited = 0 // it went on since it last waited
	}
	s.cache = s.cache[:0]
	s.ckpts = s.ckpts[:0]
	s.state, s.iBatch = stWait, -1
	e.preemptSeq++
	s.waitSeq = e.preemptSeq
	e.mu.Lock()
	e.metrics.PreemptionsTotal++
	e.mu.Unlock()
	if log := e.opts.Logger; log != nil {
		log.Debug("shared KV cache full: request preempted, to be decoded again when it fits",
			"slot", s.id, "tokens", len(s.resume))
	}
	return true
}

// maxWaitSlots bounds a preempted request's wait, in steps, as a multiple
// of the slot context: without context shift every running request ends
// within about a slot context's steps.
const maxWaitSlots = 4

// errWaitedTooLong ends a preempted request that waited too long.
var errWaitedTooLong = errors.New("engine: context size has been exceeded (the KV cache the slots share stayed full while the request waited for it)")

// tendPreempted counts a step of wait for each preempted request, ends
// those that waited too long, and wakes the first where none runs (the
// last one ended without release, after a panic).
func (e *Engine) tendPreempted() {
	running, waiting := false, false
	for _, s := range e.slots {
		switch {
		case s.tk == nil:
		case s.state != stWait:
			running = true
		default:
			if s.waited++; s.waited > maxWaitSlots*e.nCtxSlot {
				e.fail(s, errWaitedTooLong)
				continue
			}
			waiting = true
		}
	}
	if waiting && !running {
		e.wakePreempted()
	}
}

// wakePreempted sets the preempted requests whose tokens fit in the free
// memory (what the busy slots do not hold or are decoding again, less a
// cell for each running request's next token) to decode them again,
// first preempted first, and the first of them anyway when no request
// runs. It runs when a request ends (release) or shifts its context and,
// for a loop left with only preempted requests, at each step.
func (e *Engine) wakePreempted() {
	var wait []*engSlot
	free, running := e.kvCells, 0
	for _, s := range e.slots {
		switch {
		case s.tk == nil:
		case s.state == stWait:
			wait = append(wait, s)
		case s.state == stRecompute:
			running++
			free -= len(s.resume) + 1 // all of it, soon
		default:
			running++
			free -= len(s.cache) + 1
		}
	}
	if len(wait) == 0 {
		return
	}
	slices.SortFunc(wait, func(a, b *engSlot) int { return int(a.waitSeq - b.waitSeq) })
	for i, s := range wait {
		if len(s.resume) > free && (i > 0 || running > 0) {
			return
		}
		free -= len(s.resume)
		s.state = stRecompute
		if len(s.resume) == 0 {
			s.state = s.resumeTo // a prompt preempted before its first chunk
		}
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
