package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/utf8tail"
	"github.com/x/llama/sampling"
)

// slot is one sequence of the context and the request it runs. Only the loop
// goroutine touches it.
type engSlot struct {
	id       int
	cache    []llama.Token // tokens in the sequence's memory, position i at index i
	lastUsed time.Time

	tk        *engTask
	state     engSlotState
	prompt    []llama.Token // the prompt as processed (maybe truncated)
	promptIdx int           // next prompt token to decode
	nCached   int
	iBatch    int // batch index of this step's output (-1 none)
	undoCache int // len(cache) and promptIdx before this step's batch
	undoIdx   int
	iFirst    int                 // batch index of the first prompt token (embeddings)
	smpl      *llama.SamplerChain // the samplers, dist last
	// pre: this step's token was sampled by presample (preTok, preErr).
	pre    bool
	preTok llama.Token
	preErr error
	gram   *llama.SamplerChain // the grammar, if any
	cand   []llama.TokenData
	// chainOut are the candidates the chain left in this step's sampling
	// (in cand), for Request.PostSamplingProbs; nil where no chain ran
	// over the row (a grammar that allows only end of generation).
	chainOut  []llama.TokenData
	last      llama.Token // sampled, not yet decoded
	generated int
	truncated bool
	pending   []byte // generated text not yet sent
	newline   bool
	special   []llama.Token // preserved tokens, rendered as their text
	tStart    time.Time
	tPrompt   time.Time   // prompt done
	spec      engSlotSpec // speculative decoding
	// copyPending: the memory was copied from another slot (copyPrefix)
	// and llama.cpp copies the data only at the next decode.
	copyPending bool
	// chunked: the prompt went in paced chunks; its rest is paced too,
	// even once it is short (deep in the prompt, a few tokens cost a
	// step's worth).
	chunked bool
	// ckpts are the context checkpoints of a windowed cache, oldest first
	// (see checkpoint.go).
	ckpts []ckpt
	// ppFirst is the batch index of this step's first prompt token, ppN
	// the count of them (Request.PromptProbs); promptProbs are the entries
	// so far, sent after the prompt.
	ppFirst, ppN int
	promptProbs  []PromptProb
	// resume is what the slot's memory held when it was preempted (state
	// stWait, then stRecompute), resumeTo the state it goes back to once
	// that is decoded again.
	resume   []llama.Token
	resumeTo engSlotState
	waitSeq  int64 // the preemption's number: the first preempted wake first
	waited   int   // steps waited since the request last went on
}

// start prepares a slot for its new request.
func (e *Engine) start(s *engSlot) {
	t := s.tk.t
	s.tStart = time.Now()
	s.generated, s.truncated, s.newline, s.chunked = 0, false, false, false
	s.pending = s.pending[:0]
	s.iBatch = -1
	s.prompt = t.Prompt
	s.special = s.special[:0]
	if e.embedding {
		if len(t.Prompt) > e.nBatch {
			e.fail(s, errors.New("engine: input is too large to process, increase the physical batch size"))
			return
		}
		if len(t.Prompt) > e.nCtxSlot {
			e.fail(s, &ContextSizeError{PromptTokens: len(t.Prompt), CtxSize: e.nCtxSlot})
			return
		}
		e.lctx.Memory().Remove(s.id, 0, -1)
		s.cache = s.cache[:0]
		s.promptIdx, s.nCached, s.state = 0, 0, stPrompt
		return
	}
	if len(t.Prompt) == 0 {
		e.finish(s, nil, StopTypeNone)
		return
	}
	// A prompt too long for the slot: an error, or with context shift
	// llama.cpp's truncation (keep NKeep, drop whole blocks of half the rest).
	if len(s.prompt) >= e.nCtxSlot {
		if !e.opts.ContextShift || t.Media != nil {
			e.fail(s, &ContextSizeError{PromptTokens: len(t.Prompt), CtxSize: e.nCtxSlot})
			return
		}
		nKeep := t.NKeep
		if nKeep < 0 || nKeep > e.nCtxSlot-4 {
			nKeep = e.nCtxSlot - 4
		}
		nLeft := e.nCtxSlot - nKeep
		block := max(nLeft/2, 1)
		erased := (len(s.prompt) - nKeep - block) / block
		p := append([]llama.Token(nil), s.prompt[:nKeep]...)
		p = append(p, s.prompt[nKeep+erased*block:]...)
		if len(p) >= e.nCtxSlot {
			e.fail(s, &ContextSizeError{PromptTokens: len(t.Prompt), CtxSize: e.nCtxSlot})
			return
		}
		s.prompt, s.truncated = p, true
	}
	smpl, gram, acceptPrompt, err := e.takeSampler(s)
	if err != nil {
		e.fail(s, err)
		return
	}
	s.smpl, s.gram = smpl, gram
	if err := e.specStart(s); err != nil {
		e.failSlot(s, err) // a drafter's panic: logged, and the slot reset
		return
	}
	if (t.Params.BackendSampling || e.backendAll) && gram == nil && !t.ReportsSampled() && t.Media == nil && !t.PromptProbs &&
		len(s.spec.spec.Drafters) == 0 && smpl.Offloadable() {
		// A new chain for each request: llama.cpp takes a chain to the
		// backend once. Closing it at the request's end detaches it.
		if err := e.lctx.SetSampler(s.id, smpl); err != nil {
			e.fail(s, err)
			return
		}
		e.nBackend++
	}
	if acceptPrompt {
		for _, tok := range s.prompt {
			if tok != MediaPlaceholder {
				smpl.Accept(tok)
			}
		}
	}
	for _, p := range t.Params.PreservedTokens {
		if tok, ok := e.model.SingleToken(p); ok {
			s.special = append(s.special, tok)
		}
	}
	// Prompt cache: keep the common prefix, decode the rest (at least the
	// last token, for its logits).
	n := 0
	if t.Media == nil && e.pcache != nil {
		// Without CachePrompt the slot's prompt is saved all the same
		// before the request overwrites it, as in llama-server; nothing
		// is restored for a request that will not use it.
		e.pcache.update(e, s, s.prompt, t.CachePrompt)
	}
	if t.CachePrompt && t.Media == nil {
		n = engCommonPrefix(s.cache, s.prompt)
		if m, ok := e.copyPrefix(s, n); ok {
			n = m
		} else if reuse := e.cacheReuse(t); reuse > 0 {
			n = e.reuseChunks(s, n, reuse)
		}
		if e.nSwa > 0 || e.recurrent {
			n = e.windowPrefix(s, n)
		} else if e.modelSwa > 0 {
			n = e.fullWindowPrefix(s, n) // SWAFull
		}
	}
	// The checkpoints past what the slot keeps are of tokens its memory
	// will no longer hold: llama-server erases them whatever the request
	// (kept, one taken again on the same tokens would add a copy).
	s.ckpts = slices.DeleteFunc(s.ckpts, func(c ckpt) bool { return c.posMax > n })
	if t.CachePrompt && t.Media == nil && n == len(s.prompt) {
		n--
	}
	if ok, err := e.lctx.Memory().Remove(s.id, n, -1); err != nil || !ok {
		e.lctx.Memory().Remove(s.id, 0, -1)
		n = 0
	}
	s.cache = s.cache[:n]
	s.promptIdx, s.nCached, s.state = n, n, stPrompt
	s.promptProbs, s.ppN = nil, 0
	if t.ReturnProgress {
		e.progress(s, s.tStart)
	}
	if t.Media != nil {
		e.startMedia(s)
	}
}

// progress sends slot s's prompt progress, as of now.
func (e *Engine) progress(s *engSlot, now time.Time) {
	ms := now.Sub(s.tStart)
	ev := Event{Token: llama.NoToken, SlotID: s.id, Progress: &PromptProgress{
		Total: len(s.prompt), Cache: s.nCached, Processed: s.promptIdx, TimeMS: ms.Milliseconds()}}
	ev.Timings = Timings{CacheN: s.nCached, PromptN: s.promptIdx - s.nCached, PromptMS: float64(ms.Microseconds()) / 1000}
	if tm := ev.Timings; tm.PromptN > 0 && tm.PromptMS > 0 {
		ev.Timings.PromptPerTokenMS = tm.PromptMS / float64(tm.PromptN)
		ev.Timings.PromptPerSecond = 1000 * float64(tm.PromptN) / tm.PromptMS
	}
	s.tk.ob.push(&ev, false)
}

// copyPrefix gives slot s, which holds n tokens of its prompt, the longer
// prefix of the prompt that another slot's memory holds, when there is one
// worth copying: the other slot's KV stream is copied into s's
// (llama_memory_seq_cp, done by llama.cpp at the next decode) and its tail
// past the prefix dropped, instead of decoding those tokens again. The
// other slot may be busy: what its cache lists is in its memory, and the
// copy is made before the next decode changes it. It returns the tokens
// of the prompt s now holds and whether it copied.
func (e *Engine) copyPrefix(s *engSlot, n int) (int, bool) {
	if !e.canCopy {
		return n, false
	}
	var src *engSlot
	best := n
	for _, o := range e.slots {
		if o == s {
			continue
		}
		if m := engCommonPrefix(o.cache, s.prompt); m > best {
			src, best = o, m
		}
	}
	// The whole stream is copied, whatever the prefix: worth it when it
	// saves more than a few tokens' decode.
	if src == nil || best-n < max(16, e.nCtxSlot/256) {
		return n, false
	}
	if err := e.lctx.Memory().Copy(src.id, s.id, 0, -1); err != nil {
		return n, false
	}
	if ok, err := e.lctx.Memory().Remove(s.id, best, -1); err != nil || !ok {
		e.lctx.Memory().Remove(s.id, 0, -1)
		s.cache = s.cache[:0]
		return 0, true
	}
	e.mtpMirror(s.id, func(q *draft.MTPSeq) error {
		if err := e.spec.mtp.Copy(src.id, s.id); err != nil {
			return err
		}
		return q.Remove(best, -1)
	})
	s.cache = append(s.cache[:0], src.cache[:best]...)
	s.copyPending = true
	return best, true
}

// cacheReuse is the smallest chunk t may reuse from the cache (0: none):
// the request's CacheReuse, else the engine's, when the memory can shift.
func (e *Engine) cacheReuse(t *Request) int {
	if !e.canReuse {
		return 0
	}
	if t.CacheReuse != 0 {
		return max(t.CacheReuse, 0)
	}
	return max(e.opts.CacheReuse, 0)
}

// reuseChunks is llama.cpp's cache reuse: the slot's memory holds
// s.prompt[:n] at positions [0, n); it scans the rest of the cache for
// runs of at least minChunk tokens equal to the prompt's continuation,
// moves each one back to where the prompt needs it (dropping the cached
// tokens in between) and returns how many prompt tokens the memory now
// holds. s.cache is updated for those; what lies after them in the cache
// is stale and removed by the caller.
func (e *Engine) reuseChunks(s *engSlot, n, minChunk int) int {
	hc, hp := n, n // heads in the cache and in the prompt
	for hc < len(s.cache) && hp < len(s.prompt) {
		m := engCommonPrefix(s.cache[hc:], s.prompt[hp:])
		if m < minChunk {
			hc++
			continue
		}
		if hc > hp {
			if ok, err := e.lctx.Memory().Remove(s.id, hp, hc); err != nil || !ok {
				return hp
			}
			if err := e.lctx.Memory().Shift(s.id, hc, hc+m, hp-hc); err != nil {
				return hp
			}
			e.mtpMirror(s.id, func(q *draft.MTPSeq) error {
				if err := q.Remove(hp, hc); err != nil {
					return err
				}
				return q.Shift(hc, hc+m, hp-hc)
			})
			copy(s.cache[hp:hp+m], s.cache[hc:hc+m])
		}
		hc += m
		hp += m
	}
	return hp
}

// step builds one batch from every slot's work, decodes it and handles
// the outputs. It reports whether there was anything to do.
func (e *Engine) step() bool {
	b := e.batch
	b.Clear()
	busy, nGen, kGen := 0, 0, 0
	for _, s := range e.slots {
		if s.state == stGen {
			nGen++
		}
	}
	gens := e.gens[:0]
	e.tendPreempted()
	for _, s := range e.slots {
		s.iBatch = -1
		s.undoCache, s.undoIdx = len(s.cache), s.promptIdx
		if s.tk != nil {
			busy++
		}
		if s.state != stGen {
			continue
		}
		if len(s.cache)+len(s.spec.replay)+1 >= e.nCtxSlot {
			if !e.opts.ContextShift || !e.shift(s) {
				s.truncated = true
				e.finish(s, nil, StopTypeLimit)
				continue
			}
			// The shift stays when the batch fails: undo to after it.
			s.undoCache = len(s.cache)
			if e.yieldAfterShift(s) {
				continue
			}
			e.wakePreempted() // the shift freed memory
		}
		s.cache = append(s.cache, s.spec.replay...)
		s.cache = append(s.cache, s.last)
		gens = append(gens, s)
	}
	e.gens = gens
	// Every generating slot's draft first (the draft model's for all of
	// them in shared batches), then each slot's last token and draft.
	e.specDraftAll(gens)
	for _, s := range gens {
		if r := s.spec.replay; len(r) > 0 {
			// The tokens a draft's checkpoint took back, again (see
			// specVerify); the MTP head has them already.
			for i, tok := range r {
				b.Add(tok, len(s.cache)-1-len(r)+i, s.id, false)
			}
			e.spec.mtpSeq(s.id).Replayed(len(r))
		}
		s.iBatch = b.Len()
		b.Add(s.last, len(s.cache)-1, s.id, true)
		kGen++
		e.specPut(s)
	}
	// While slots generate, a long prompt goes in chunks between their
	// tokens, sized by the pacer (see prefill.go); a short one goes whole.
	capped := kGen > 0 && e.opts.PrefillChunk > 0
	shortUnits := e.opts.PrefillChunk * prefillUnit
	budget, paced := 0, false          // the pacer's, asked for when a long prompt needs it
	probe := capped && e.pacer.probe() // no long-prompt work this step
	longUnits, tookShort := 0, false
	for _, s := range e.slots {
		var left int // > 0: start finishes empty prompts, a preempted slot has tokens
		switch s.state {
		case stPrompt:
			left = len(s.prompt) - s.promptIdx
		case stRecompute:
			left = len(s.resume) - len(s.cache)
		default:
			continue
		}
		room := min(e.nBatch-b.Len(), left)
		if room <= 0 {
			break
		}
		if capped {
			if room == left && !s.chunked && prefillCost(len(s.cache), left) <= shortUnits {
				tookShort = true
			} else {
				s.chunked = true
				if probe {
					continue
				}
				if !paced {
					budget, paced = e.pacer.budget(nGen), true
				}
				n, cost := prefillFit(len(s.cache), budget, room)
				if n == 0 && longUnits == 0 {
					n, cost = 1, prefillCost(len(s.cache), 1) // at least one token a step
				}
				if n == 0 {
					continue
				}
				room, budget, longUnits = n, budget-cost, longUnits+cost
			}
		}
		if s.state == stRecompute {
			e.recompute(b, s, room)
			continue
		}
		rest := s.prompt[s.promptIdx:]
		if e.embedding {
			if len(rest) > room {
				continue // whole inputs only: next step
			}
			s.iFirst = b.Len()
		}
		ck := e.ckptOn(s)
		if ck {
			room = e.ckptRoom(s, room)
		}
		chunk := rest[:min(len(rest), room)]
		if ck {
			e.ckptTake(s, len(chunk))
		}
		probs := s.tk.t.PromptProbs
		if probs {
			s.ppFirst, s.ppN = b.Len(), len(chunk)
		}
		for i, tok := range chunk {
			out := e.embedding || probs || s.promptIdx+i == len(s.prompt)-1
			b.Add(tok, len(s.cache), s.id, out)
			s.cache = append(s.cache, tok)
		}
		s.promptIdx += len(chunk)
		if s.promptIdx == len(s.prompt) {
			s.iBatch = b.Len() - 1
		} else {
			s.iBatch = -2 // in the batch, no output yet
		}
	}
	if b.Len() == 0 {
		return false
	}
	if len(e.firstOut) > 0 {
		if e.coresTaken {
			e.handOffFirst()
		}
		clear(e.firstOut)
		e.firstOut = e.firstOut[:0]
	}
	if testBeforeDecode != nil {
		testBeforeDecode()
	}
	e.clock.mark(PhaseBatch)
	tDecode := e.clock.last
	err := e.lctx.Decode(e.baseCtx, b)
	if errors.Is(err, llama.ErrNoKVSlot) && e.clearIdleSlots() {
		// As llama-server: a full unified cache first gives up the idle
		// slots' memory (their prompts go to the prompt cache).
		err = e.lctx.Decode(e.baseCtx, b)
	}
	e.clock.mark(PhaseDecodeSubmit)
	if err == nil {
		// On a GPU the decode returns once its work is queued: wait for
		// it here, so that the wait shows as such (the first read of the
		// logits would wait anyway) and the pacer sees the whole step.
		err = e.lctx.Synchronize()
	}
	e.clock.mark(PhaseDecodeWait)
	e.clock.t.Steps++
	took := e.clock.last.Sub(tDecode)
	e.decodeTime += took
	if err == nil && capped {
		seen := took
		if testStepTime != nil {
			seen = testStepTime(took, longUnits)
		}
		e.pacer.observe(seen, longUnits, tookShort)
	}
	e.mu.Lock()
	e.metrics.DecodeTotal++
	e.busySum += int64(busy)
	e.mu.Unlock()
	if err == nil {
		for _, s := range e.slots {
			s.copyPending = false // llama.cpp copied the data first
			s.spec.replay = s.spec.replay[:0]
			if s.state == stRecompute && len(s.cache) == len(s.resume) {
				// No output of this batch is the slot's.
				s.state, s.resume, s.iBatch = s.resumeTo, s.resume[:0], -1
			}
		}
		if e.spec != nil && e.spec.mtp != nil {
			e.mtpDecoded(b)
		}
	}
	if err != nil {
		if e.baseCtx.Err() != nil {
			return false
		}
		if errors.Is(err, llama.ErrNoKVSlot) {
			// The shared KV memory is full (llama.cpp left it as before
			// the batch). As llama-server: free the memory idle slots keep
			// for prompt caching and retry; failing that, the requests in
			// the batch end with an error.
			for _, s := range e.slots {
				if s.iBatch != -1 {
					s.cache, s.promptIdx = s.cache[:s.undoCache], s.undoIdx
				}
			}
			if e.clearIdleSlots() || e.preempt() {
				return true
			}
			err = errors.New("engine: context size has been exceeded (the KV cache the slots share is full)")
			if e.failLargest(err) {
				return true
			}
		}
		for _, s := range e.slots {
			if s.tk != nil && s.iBatch != -1 {
				if f := s.spec.fault; f != nil {
					e.slotPanic(s, f) // its drafter's panic says more
					continue
				}
				e.lctx.Memory().Remove(s.id, 0, -1)
				s.cache = s.cache[:0]
				e.fail(s, err)
			}
		}
		return true
	}
	now := time.Now()
	for _, s := range e.slots {
		if s.tk != nil && s.state == stPrompt && s.iBatch != -1 && s.tk.t.ReturnProgress && !e.embedding {
			e.progress(s, now)
		}
		if s.tk != nil && s.state == stPrompt && s.iBatch != -1 && s.tk.t.PromptProbs {
			e.readPromptProbs(s)
		}
	}
	for _, s := range e.slots {
		if f := s.spec.fault; f != nil {
			// Its drafter panicked while the batch was being built: the
			// slot's token is decoded, and the request ends now.
			s.spec.fault = nil
			if s.tk != nil {
				e.slotPanic(s, f)
			}
			continue
		}
		if s.tk == nil || s.iBatch < 0 {
			continue
		}
		if s.state == stPrompt {
			s.tPrompt = now
			if e.embedding {
				e.embedOut(s)
				continue
			}
			s.state = stGen
			if s.tk.t.NPredict == 0 {
				e.finish(s, nil, StopTypeLimit)
				continue
			}
		}
		if len(s.spec.draft) > 0 {
			e.verifySlot(s)
			continue
		}
		e.toSample = append(e.toSample, s)
	}
	e.presample(e.toSample)
	e.clock.mark(PhaseSample)
	for _, s := range e.toSample {
		e.sampleSlot(s)
		e.clock.mark(PhaseEmit)
	}
	clear(e.toSample)
	e.toSample = e.toSample[:0]
	return true
}

// presample samples the rows of the slots at once (llama.Context.SampleParallel)
// when there are several and more than one sampling goroutine is allowed;
// sampleNext then takes each slot's token. Slots with a grammar sample
// theirs in sampleNext, one after another.
func (e *Engine) presample(slots []*engSlot) {
	if e.sampleWorkers <= 1 || len(slots) < 2 {
		return
	}
	jobs := e.sampleJobs[:0]
	for _, s := range slots {
		if s.samplesInParallel() {
			jobs = append(jobs, llama.SampleJob{Chain: s.smpl, Index: s.iBatch})
		}
	}
	if len(jobs) >= 2 && e.lctx.SampleParallel(jobs, e.sampleWorkers) == nil {
		e.presampled++
		k := 0
		for _, s := range slots {
			if s.samplesInParallel() {
				s.pre, s.preTok, s.preErr = true, jobs[k].Token, jobs[k].Err
				k++
			}
		}
	}
	clear(jobs)
	e.sampleJobs = jobs[:0]
}

// samplesInParallel reports whether presample may sample the slot's row:
// not with a grammar, nor where the chain's candidates are reported.
func (s *engSlot) samplesInParallel() bool { return s.gram == nil && !s.tk.t.reportsChain() }

// failLargest ends, with err, the running request that holds the most of
// the full shared memory, and frees its cells, so that the others go on
// (llama-server ends them all; its own note plans this), where none could
// be preempted. It reports false where that leaves nothing to go on with:
// one request running, none holding memory, or a drafter's fault to
// report, which the caller handles for the whole batch.
func (e *Engine) failLargest(err error) bool {
	var largest *engSlot
	n := 0
	for _, s := range e.slots {
		if s.tk == nil || s.state == stWait {
			continue
		}
		if s.iBatch != -1 && s.spec.fault != nil {
			return false
		}
		n++
		if largest == nil || len(s.cache) > len(largest.cache) {
			largest = s
		}
	}
	if n < 2 || len(largest.cache) == 0 {
		return false
	}
	e.lctx.Memory().Remove(largest.id, 0, -1)
	largest.cache = largest.cache[:0]
	e.fail(largest, err)
	return true
}

// clearIdleSlots frees the memory of the idle slots, saving their prompts
// to the prompt cache first. It reports whether any was freed.
func (e *Engine) clearIdleSlots() bool {
	cleared := false
	for _, s := range e.slots {
		if s.tk != nil || len(s.cache) == 0 {
			continue
		}
		if e.pcache != nil {
			e.pcache.save(e, s)
		}
		e.lctx.Memory().Remove(s.id, 0, -1)
		s.cache = s.cache[:0]
		cleared = true
	}
	return cleared
}

// shift is llama.cpp's context shift: keep NKeep tokens (plus BOS), drop
// half of the rest, move the tail back. It runs only with ContextShift,
// which New turns off for a memory that cannot shift.
func (e *Engine) shift(s *engSlot) bool {
	t := s.tk.t
	if t.Media != nil {
		return false // media cannot be cut (as llama-server refuses)
	}
	nKeep := t.NKeep
	if nKeep < 0 {
		nKeep = len(s.prompt)
	}
	if e.addBOS {
		nKeep++
	}
	nKeep = min(e.nCtxSlot-4, nKeep)
	nLeft := len(s.cache) - nKeep
	nDiscard := min(max(nLeft/2, 0), max(0, nLeft-1))
	if nDiscard <= 0 {
		return false
	}
	if ok, err := e.lctx.Memory().Remove(s.id, nKeep, nKeep+nDiscard); err != nil || !ok {
		return false
	}
	if err := e.lctx.Memory().Shift(s.id, nKeep+nDiscard, len(s.cache), -nDiscard); err != nil {
		return false
	}
	e.mtpMirror(s.id, func(q *draft.MTPSeq) error {
		if err := q.Remove(nKeep, nKeep+nDiscard); err != nil {
			return err
		}
		return q.Shift(nKeep+nDiscard, len(s.cache), -nDiscard)
	})
	s.cache = append(s.cache[:nKeep], s.cache[nKeep+nDiscard:]...)
	s.truncated = true
	return true
}

// sampleSlot is sampleNext for a slot alone: a panic there (in a Go
// sampler, say) ends the slot's request and no other.
func (e *Engine) sampleSlot(s *engSlot) {
	defer e.recoverSlot(s, "engine: sampling")
	e.sampleNext(s)
}

// sampleNext samples the slot's next token from its output and handles it
// as llama.cpp's process_token: text, stop strings, limits, EOG.
func (e *Engine) sampleNext(s *engSlot) {
	t := s.tk.t
	var probs []TokenProb
	var sampled *TokenProb
	var logits []float32
	if t.ReportsSampled() && !t.reportsChain() {
		if l, err := e.lctx.Logits(s.iBatch); err == nil {
			logits = l
		}
	}
	tok, err := s.preTok, s.preErr
	if s.pre {
		s.pre = false
	} else {
		tok, err = e.sample(s)
	}
	if err != nil {
		e.failSlot(s, err)
		return
	}
	s.generated++
	switch {
	case t.reportsChain():
		probs, sampled = e.chainProbs(s.chainOut, t.Params.NProbs, tok, t.Params.Greedy())
	case logits != nil:
		probs, sampled = e.topProbs(logits, t.Params.NProbs, tok)
	}
	e.clock.mark(PhaseSample)
	eog := e.isEOG[tok]
	ev := Event{Token: tok, Probs: probs, Sampled: sampled, SlotID: s.id, PromptTokens: len(t.Prompt), CachedTokens: s.nCached,
		PromptProbs: s.takePromptProbs()}
	stop := StopTypeNone
	word := ""
	if !eog {
		piece := e.piece(tok, e.opts.Special || slices.Contains(s.special, tok))
		if strings.IndexByte(piece, '\n') >= 0 {
			s.newline = true
		}
		if len(s.pending) == 0 && len(t.Stop) == 0 && utf8tail.Complete(piece) == len(piece) {
			ev.Text = piece // the common case: the piece is the text as it is
		} else {
			stop, word = e.takeText(s, &ev, piece)
		}
	}
	if stop == StopTypeNone {
		switch {
		case !e.opts.ContextShift && len(s.cache)+1 >= e.nCtxSlot:
			s.truncated = true
			stop = StopTypeLimit
		case t.NPredict >= 0 && s.generated >= t.NPredict:
			stop = StopTypeLimit
		case s.newline && t.TMaxPredictMs > 0 && time.Since(s.tPrompt).Milliseconds() > int64(t.TMaxPredictMs):
			stop = StopTypeLimit
		case eog:
			stop = StopTypeEOS
		}
		if stop != StopTypeNone && len(s.pending) > 0 {
			ev.Text += strings.ToValidUTF8(string(s.pending), "\uFFFD")
			s.pending = s.pending[:0]
			ev.Partial = false // the character will not be finished: sent as it is
		}
	}
	if s.tk.ob.push(&ev, false) && s.generated == 1 {
		e.firstOut = append(e.firstOut, s.tk.ob)
	}
	if stop != StopTypeNone {
		e.finish(s, &word, stop)
		return
	}
	s.last = tok
}

// readPromptProbs reads, after a decode, the probabilities of the prompt
// tokens that follow this step's chunk of the slot's prompt: the logits
// of each chunk position give the next prompt token's entry and the top
// NProbs (the chunk's last position, when it ends the prompt, gives the
// first generated token, which sampleNext reads).
func (e *Engine) readPromptProbs(s *engSlot) {
	t := s.tk.t
	pos := s.promptIdx - s.ppN // the prompt index of the step's first token
	for i := range s.ppN {
		next := pos + i + 1
		if next >= len(s.prompt) {
			break
		}
		logits, err := e.lctx.Logits(s.ppFirst + i)
		if err != nil {
			e.fail(s, err)
			return
		}
		top, tok := e.topProbs(logits, t.Params.NProbs, s.prompt[next])
		pp := PromptProb{Top: top}
		if tok != nil {
			pp.Token = *tok
		}
		s.promptProbs = append(s.promptProbs, pp)
	}
	s.ppN = 0
}

// takePromptProbs returns the prompt's probabilities once (for the
// request's first event after its prompt), nil after that.
func (s *engSlot) takePromptProbs() []PromptProb {
	pp := s.promptProbs
	s.promptProbs = nil
	return pp
}

// piece returns a token's text. Pieces without special rendering are
// cached: they are asked for once per token of the vocabulary at most.
// takeText appends piece to the slot's pending text and moves to ev what
// can be sent: all of it but an incomplete UTF-8 character or the start of
// a stop string, or the text before a stop string, which ends the request.
func (e *Engine) takeText(s *engSlot, ev *Event, piece string) (StopType, string) {
	stops := s.tk.t.Stop
	s.pending = append(s.pending, piece...)
	if i, w := engFindStop(s.pending, stops); i >= 0 {
		ev.Text = strings.ToValidUTF8(string(s.pending[:i]), "\uFFFD")
		s.pending = s.pending[:0]
		return StopTypeWord, w
	}
	n := utf8tail.Complete(s.pending)
	ev.Partial = n < len(s.pending)
	if len(stops) > 0 {
		n = min(n, engSafeStopPrefix(s.pending[:n], stops))
	}
	ev.Text = string(s.pending[:n])
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return StopTypeNone, ""
}

func (e *Engine) piece(tok llama.Token, special bool) string {
	if special || int(tok) < 0 || int(tok) >= len(e.pieces) {
		p, _ := e.model.TokenPiece(tok, special)
		return p
	}
	if !e.havePiece[tok] {
		e.pieces[tok], _ = e.model.TokenPiece(tok, false)
		e.havePiece[tok] = true
	}
	return e.pieces[tok]
}

// finish sends the Done event with the request's stats and frees the slot.
func (e *Engine) finish(s *engSlot, word *string, stop StopType) {
	t := s.tk.t
	now := time.Now()
	ev := Event{Token: llama.NoToken, Done: true, Stop: stop, Truncated: s.truncated, SlotID: s.id,
		PromptTokens: len(t.Prompt), CachedTokens: s.nCached, Generated: s.generated, SlotTokens: len(s.cache),
		PromptProbs: s.takePromptProbs()}
	if word != nil {
		ev.StoppingWord = *word
	}
	ev.Timings = e.timings(s, now)
	e.mu.Lock()
	e.metrics.PromptTokensTotal += int64(ev.Timings.PromptN)
	e.metrics.PromptTokensCachedTotal += int64(ev.Timings.CacheN)
	e.metrics.PromptSecondsTotal += ev.Timings.PromptMS / 1000
	e.metrics.TokensPredictedTotal += int64(ev.Timings.PredictedN)
	e.metrics.TokensPredictedSteps += int64(max(ev.Timings.PredictedN-1, 0))
	e.metrics.TokensPredictedSeconds += ev.Timings.PredictedMS / 1000
	e.mu.Unlock()
	// Free the slot, count the metrics and publish the slots' state before
	// the client sees Done, so that what it reads next (/metrics, /slots)
	// already includes the request.
	ob := s.tk.ob
	e.release(s)
	e.publish()
	ob.push(&ev, true)
}

func (e *Engine) timings(s *engSlot, now time.Time) Timings {
	tm := Timings{CacheN: s.nCached, PromptN: len(s.prompt) - s.nCached, PredictedN: s.generated,
		DraftN: s.spec.drafted, DraftNAccepted: s.spec.accepted}
	if s.tPrompt.Before(s.tStart) || s.state == stPrompt {
		s.tPrompt = now
	}
	tm.PromptMS = float64(s.tPrompt.Sub(s.tStart).Microseconds()) / 1000
	tm.PredictedMS = float64(now.Sub(s.tPrompt).Microseconds()) / 1000
	if tm.PromptN > 0 && tm.PromptMS > 0 {
		tm.PromptPerTokenMS = tm.PromptMS / float64(tm.PromptN)
		tm.PromptPerSecond = 1000 * float64(tm.PromptN) / tm.PromptMS
	}
	// As llama-server: the rate is over the decode steps, the first token
	// coming free with the prompt's last batch.
	if steps := tm.PredictedN - 1; steps > 0 && tm.PredictedMS > 0 {
		tm.PredictedPerTokenMS = tm.PredictedMS / float64(steps)
		tm.PredictedPerSecond = 1000 * float64(steps) / tm.PredictedMS
	}
	return tm
}

// embedOut sends an embedding or rerank request's result and frees the slot
// (and its sequence: embeddings keep no cache).
func (e *Engine) embedOut(s *engSlot) {
	t := s.tk.t
	ev := Event{Token: llama.NoToken, Done: true, SlotID: s.id, PromptTokens: len(t.Prompt)}
	var err error
	switch {
	case t.Kind == KindRerank:
		var v []float32
		if v, err = e.lctx.SeqEmbeddings(s.id); err == nil && len(v) > 0 {
			ev.Score = v[0]
		}
	case e.lctx.Pooling() == llama.PoolingNone:
		// Per-token vectors, not normalized (as llama.cpp).
		for i := 0; i < len(s.prompt) && err == nil; i++ {
			var v []float32
			if v, err = e.lctx.Embeddings(s.iFirst + i); err == nil {
				ev.Embedding = append(ev.Embedding, append([]float32(nil), v...))
			}
		}
	case t.PerToken:
		err = errors.New("engine: per-token embeddings need pooling none")
	default:
		var v []float32
		if v, err = e.lctx.SeqEmbeddings(s.id); err == nil {
			ev.Embedding = [][]float32{llama.Normalize(append([]float32(nil), v...), t.Normalize)}
		}
	}
	e.lctx.Memory().Remove(s.id, 0, -1)
	s.cache = s.cache[:0]
	if err != nil {
		e.fail(s, err)
		return
	}
	ev.Timings = e.timings(s, time.Now())
	s.tk.ob.push(&ev, true)
	e.mu.Lock()
	e.metrics.PromptTokensTotal += int64(ev.Timings.PromptN)
	e.metrics.PromptSecondsTotal += ev.Timings.PromptMS / 1000
	e.mu.Unlock()
	e.release(s)
}

// topProbsInsert is the most entries topProbs finds by insertion.
const topProbsInsert = 64

// insertTop inserts index i into top, which holds at most n indices by
// decreasing key, where top is not full or i's key is above its last's.
func insertTop(top []int, n, i int, key func(int) float32) []int {
	j := len(top)
	if j < n {
		top = append(top, i)
	} else {
		j = n - 1
	}
	for j > 0 && key(top[j-1]) < key(i) {
		top[j] = top[j-1]
		j--
	}
	top[j] = i
	return top
}

// topProbs returns the n most likely tokens of logits with their
// probabilities, and the entry of the sampled token. The probabilities are
// those of the full softmax of the logits (the model's, before sampling;
// chainProbs gives the chain's), Logprob their logarithm.
func (e *Engine) topProbs(logits []float32, n int, tok llama.Token) ([]TokenProb, *TokenProb) {
	maxL := float32(math.Inf(-1))
	for _, l := range logits {
		if l > maxL {
			maxL = l
		}
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - maxL))
	}
	logSum := math.Log(sum)
	n = max(min(n, len(logits)), 0)
	top := make([]int, 0, n+1) // indices, by decreasing logit
	if n > topProbsInsert {
		// Many: sort the row (insertion would cost n per token of the
		// vocabulary, 7·10¹⁰ steps a token for Gemma 3's whole row), in
		// the order insertion gives (ties by id).
		for i := range logits {
			top = append(top, i)
		}
		slices.SortStableFunc(top, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
		top = top[:n]
	}
	for i, l := range logits {
		if n == 0 || n > topProbsInsert {
			break // the sampled token's entry alone, or sorted above
		}
		if len(top) < n || l > logits[top[n-1]] {
			top = insertTop(top, n, i, func(k int) float32 { return logits[k] })
		}
	}
	entry := func(i int) TokenProb {
		lp := float64(logits[i]-maxL) - logSum
		text := e.piece(llama.Token(i), false)
		return TokenProb{Token: llama.Token(i), Text: text, Prob: float32(math.Exp(lp)), Logprob: float32(lp)}
	}
	out := make([]TokenProb, len(top))
	for k, i := range top {
		out[k] = entry(i)
	}
	var sampled *TokenProb
	if int(tok) >= 0 && int(tok) < len(logits) {
		s := entry(int(tok))
		sampled = &s
	}
	return out, sampled
}

// newSampler builds a request's sampler chain (sampling.Params.Chain) and
// its grammar's, apart (see sample). acceptPrompt says whether the prompt
// tokens should be fed to the chain (penalties and DRY look at them; a
// grammar must not see them). extra, the request's own samplers, go
// before the final pick.
func (e *Engine) newSampler(ctx context.Context, p *sampling.Params, extra []llama.Sampler) (chain, gram *llama.SamplerChain, acceptPrompt bool, err error) {
	g, err := p.GrammarSampler(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	if g != nil {
		if gram, err = llama.NewSamplerChain(e.model, llama.SamplerChainOptions{Filter: true}, g); err != nil {
			return nil, nil, false, err
		}
	}
	ss, history := p.Chain(sampling.Env{NCtx: e.nCtxSlot, EOG: e.eog}, extra...)
	c, err := llama.NewSamplerChain(e.model, llama.SamplerChainOptions{}, ss...)
	if err != nil {
		if gram != nil {
			gram.Close()
		}
		return nil, nil, false, err
	}
	return c, gram, history, nil
}

// errGrammarStuck ends a request whose grammar allows no token at all.
// It is the client's grammar that cannot go on: a CodeGrammar error (400).
var errGrammarStuck error = &llama.Error{Code: llama.CodeGrammar, Op: "sample", Msg: "the grammar allows no next token"}

// sample picks the slot's next token. Without a grammar, the chain samples
// and accepts it in one call. With one, the chain proposes a token and
// keeps it when the grammar allows it; otherwise the grammar masks the
// whole row and the chain samples again. Both accept the token: a token
// the grammar rejects must never reach its accept, which would abort the
// process. When the grammar only allows end-of-generation tokens
// (it is complete), one of them is returned even with ignore_eos.
func (e *Engine) sample(s *engSlot) (llama.Token, error) {
	s.chainOut = nil
	chain := s.tk.t.reportsChain()
	if s.gram == nil {
		if !chain {
			return s.smpl.Sample(e.lctx, s.iBatch)
		}
		tok, err := e.proposeRow(s)
		if err != nil {
			return llama.NoToken, err
		}
		return tok, s.smpl.Accept(tok)
	}
	// As llama.cpp's sampler: sample without the grammar first (Propose:
	// the top-k fast path when the chain has one) and keep the token when
	// the grammar allows it; otherwise sample again from the candidates
	// the grammar allows. (Each pass draws from the random generator, so
	// seeded outputs match llama-server's.)
	var tok llama.Token
	var err error
	if chain {
		tok, err = e.proposeRow(s)
	} else {
		tok, err = s.smpl.Propose(e.lctx, s.iBatch)
	}
	if err == nil && s.gramAllows(tok) {
		return tok, e.acceptBoth(s, tok)
	}
	s.chainOut = nil // cand is filled again below
	logits, err := e.lctx.Logits(s.iBatch)
	if err != nil {
		return llama.NoToken, err
	}
	s.fillCand(logits)
	// The row is masked and sampled in place: copies of a large
	// vocabulary's row would cost milliseconds a step. The grammar's pass
	// runs on the engine's C thread (see cThread).
	if e.cthread == nil {
		e.cthread = newCThread()
	}
	var masked []llama.TokenData
	e.cthread.run(func() { masked, _, err = s.gram.ApplyInPlace(s.cand) })
	if err != nil {
		return llama.NoToken, err
	}
	// When the grammar allows only end-of-generation tokens (it is
	// complete), the likeliest of them ends the text, as llama.cpp's
	// greedy pick among them: a model may have several (Gemma's <eos> and
	// </s>), and the choice shows in token probabilities.
	eog, eogLogit, other := llama.NoToken, float32(math.Inf(-1)), 0
	for _, c := range masked {
		if !math.IsInf(float64(c.Logit), -1) {
			if e.isEOG[c.ID] {
				if eog == llama.NoToken || c.Logit > eogLogit {
					eog, eogLogit = c.ID, c.Logit
				}
			} else {
				other++
			}
		}
	}
	if other == 0 {
		if eog == llama.NoToken {
			return llama.NoToken, errGrammarStuck
		}
		return eog, nil
	}
	cands, sel, err := s.smpl.ApplyInPlace(masked)
	if err != nil {
		return llama.NoToken, err
	}
	if sel < 0 || sel >= len(cands) || math.IsInf(float64(cands[sel].Logit), -1) {
		return llama.NoToken, errGrammarStuck
	}
	tok = cands[sel].ID
	// The chain gave it a finite logit; the grammar must still allow it
	// (a sampler could have raised a masked token's logit).
	if !s.gramAllows(tok) {
		return llama.NoToken, errGrammarStuck
	}
	s.chainOut = cands
	return tok, e.acceptBoth(s, tok)
}

// acceptBoth accepts tok into the slot's chain and its grammar.
func (e *Engine) acceptBoth(s *engSlot, tok llama.Token) error {
	if err := s.smpl.Accept(tok); err != nil {
		return err
	}
	return s.gram.Accept(tok)
}

// proposeRow runs the slot's chain over its whole row (without accepting
// the token), as Propose, keeping the chain's candidates in s.chainOut.
func (e *Engine) proposeRow(s *engSlot) (llama.Token, error) {
	logits, err := e.lctx.Logits(s.iBatch)
	if err != nil {
		return llama.NoToken, err
	}
	s.fillCand(logits)
	cands, sel, err := s.smpl.ApplyInPlace(s.cand)
	if err != nil {
		return llama.NoToken, err
	}
	if sel < 0 {
		return llama.NoToken, fmt.Errorf("engine: no sampler of the chain selected a token: %w", llama.ErrInvalid)
	}
	s.chainOut = cands
	return cands[sel].ID, nil
}

// fillCand sets the slot's candidates to the row of logits.
func (s *engSlot) fillCand(logits []float32) {
	s.cand = s.cand[:0]
	for i, l := range logits {
		s.cand = append(s.cand, llama.TokenData{ID: llama.Token(i), Logit: l})
	}
}

// chainProbs are a step's probability entries from the chain's output
// (Request.PostSamplingProbs): the n most probable candidates (none of
// probability 0) and tok's own entry. A greedy chain, or none (cands nil),
// made tok certain.
func (e *Engine) chainProbs(cands []llama.TokenData, n int, tok llama.Token, greedy bool) ([]TokenProb, *TokenProb) {
	entry := func(t llama.Token, p float32) TokenProb {
		lp := float32(math.Inf(-1))
		if p > 0 {
			lp = float32(math.Log(float64(p)))
		}
		return TokenProb{Token: t, Text: e.piece(t, false), Prob: p, Logprob: lp}
	}
	if greedy || cands == nil {
		own := entry(tok, 1)
		if n > 0 {
			return []TokenProb{own}, &own
		}
		return nil, &own
	}
	var own TokenProb
	found := false
	n = max(min(n, len(cands)), 0)
	top := make([]int, 0, n) // indices, by decreasing probability
	for i, c := range cands {
		if c.ID == tok && !found {
			own, found = entry(tok, c.P), true
		}
		if n == 0 || !(c.P > 0) {
			continue
		}
		if n > topProbsInsert {
			top = append(top, i) // sorted below
			continue
		}
		if len(top) < n || c.P > cands[top[n-1]].P {
			top = insertTop(top, n, i, func(k int) float32 { return cands[k].P })
		}
	}
	if !found {
		own = entry(tok, 0)
	}
	if n > topProbsInsert {
		slices.SortStableFunc(top, func(a, b int) int { return cmp.Compare(cands[b].P, cands[a].P) })
		top = top[:min(n, len(top))]
	}
	out := make([]TokenProb, len(top))
	for k, i := range top {
		out[k] = entry(cands[i].ID, cands[i].P)
	}
	return out, &own
}

// gramAllows reports whether the slot's grammar allows tok next (a pass
// over that one candidate; false on an error too).
func (s *engSlot) gramAllows(tok llama.Token) bool {
	one, _, err := s.gram.ApplyInPlace([]llama.TokenData{{ID: tok, Logit: 1}})
	return err == nil && len(one) == 1 && !math.IsInf(float64(one[0].Logit), -1)
}

// engFindStop returns the index in b of the earliest stop string and which.
func engFindStop(b []byte, stops []string) (int, string) {
	best, word := -1, ""
	for _, w := range stops {
		if w == "" {
			continue
		}
		if i := bytes.Index(b, []byte(w)); i >= 0 && (best < 0 || i < best) {
			best, word = i, w
		}
	}
	return best, word
}

// engSafeStopPrefix returns how many bytes of b cannot be the beginning of a
// stop string that later text completes.
func engSafeStopPrefix(b []byte, stops []string) int {
	n := len(b)
	for _, w := range stops {
		for k := min(len(w)-1, len(b)); k > 0; k-- {
			if bytes.HasSuffix(b, []byte(w[:k])) {
				n = min(n, len(b)-k)
				break
			}
		}
	}
	return n
}
