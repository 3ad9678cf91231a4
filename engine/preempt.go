package engine

import (
	"cmp"
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
// steps. With context shift a request may run for ever, so at each of
// its shifts it yields to a preempted request that has waited a slot
// context's worth of steps (yieldAfterShift): requests that keep
// shifting take turns.
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
	var victim *engSlot
	running := 0
	for _, s := range e.slots {
		if s.tk == nil || s.state == stWait {
			continue
		}
		running++
		if !e.canPreempt(s) {
			continue
		}
		if victim == nil || s.tStart.After(victim.tStart) {
			victim = s
		}
	}
	if running < 2 || victim == nil {
		return false
	}
	return e.preemptSlot(victim)
}

// canPreempt reports whether busy slot s's memory can be rebuilt from its
// tokens: not with media in its prompt, speculative decoding (the draft
// model's sequence) or embeddings.
func (e *Engine) canPreempt(s *engSlot) bool {
	return !e.embedding && e.spec == nil && s.tk.t.Media == nil
}

// preemptSlot gives up the memory of slot s's request, which waits.
func (e *Engine) preemptSlot(s *engSlot) bool {
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

// yieldAfterShift preempts slot s, whose request has just shifted its
// context, in favour of the first preempted request when that one has
// waited a slot context's worth of steps and would fit in what s frees:
// a request that context shift keeps going (it may never end, or end
// after many times the context) then takes turns with the waiters
// instead of holding the memory for good. It reports whether s waits.
func (e *Engine) yieldAfterShift(s *engSlot) bool {
	if !e.canPreempt(s) {
		return false
	}
	free, _, wait := e.freeCells()
	if len(wait) == 0 {
		return false
	}
	first := wait[0]
	if first.waited < e.nCtxSlot || len(first.resume) > free+len(s.cache)+1 || !e.preemptSlot(s) {
		return false
	}
	// Only the waiter it yields to: woken too, s would take the memory
	// back at once.
	first.wake()
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
	free, running, wait := e.freeCells()
	for i, s := range wait {
		if len(s.resume) > free && (i > 0 || running > 0) {
			return
		}
		free -= len(s.resume)
		s.wake()
	}
}

// freeCells returns the shared memory free for a preempted request: what
// the busy slots do not hold or are decoding again, less a cell for each
// running request's next token; the running requests; and the preempted,
// first preempted first.
func (e *Engine) freeCells() (free, running int, wait []*engSlot) {
	free = e.kvCells
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
	slices.SortFunc(wait, func(a, b *engSlot) int { return cmp.Compare(a.waitSeq, b.waitSeq) })
	return free, running, wait
}

// wake sets preempted slot s to decode its tokens again.
func (s *engSlot) wake() {
	s.state = stRecompute
	if len(s.resume) == 0 {
		s.state = s.resumeTo // a prompt preempted before its first chunk
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
