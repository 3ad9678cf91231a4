package llama

import (
	"context"
	"slices"

	"github.com/x/llama/internal/capi"
)

// A Drafter proposes tokens likely to follow a sequence, for speculative
// generation: the target model checks a whole draft in one batched decode,
// keeps the tokens it agrees with and samples one more, so each decode can
// yield several tokens. Drafts change only the speed, never the output.
//
// Package draft has the drafters: draft.Model (a small model of the same
// vocabulary), draft.NgramSimple, draft.NgramMap and draft.NgramMod
// (self-speculation from the text so far) and draft.NgramCache (n-gram
// statistics of the text so far and of lookup files). A Drafter serves one generation at a time; it
// is not safe for concurrent use.
type Drafter interface {
	// Draft returns up to max tokens to follow history: the tokens of the
	// sequence so far (prompt and generated), ending with the last sampled
	// token, which is not in the target's memory yet. It may return none.
	Draft(ctx context.Context, history []Token, max int) ([]Token, error)
	// Accepted reports how many tokens of the last draft the target kept.
	// A draft that is not checked (shorter than Speculative.NMin), or that
	// an AdaptiveDrafter capped and the target kept entirely, gets no call.
	Accepted(n int)
}

// A DraftBeginner is a Drafter that keeps what it learns from one sequence
// to the next, and so needs to know where each begins (draft.NgramMap and
// draft.NgramMod, as llama.cpp's). Speculative generation calls Begin with
// the prompt (the tokens in memory before the first sample) before the
// first Draft; the engine does so at each request's start, with the
// slot's prompt.
type DraftBeginner interface {
	Drafter
	Begin(prompt []Token)
}

// A DecodeWatcher is a Drafter that must see every batch the target
// decodes: draft.MTPSeq, whose head drafts from the target's hidden
// state. Speculative generation calls Decoded after each decode of the
// generation (the prompt's batches, then each token with its draft), and
// Decoded may read the target context meanwhile (Context.Hidden); an
// error ends the generation. Its Accepted hears the verdict on every
// draft checked, whichever drafter drafted it (as llama.cpp tells its
// draft-mtp), since it saw the draft go in. One with a Replayed(n int)
// method (draft.MTPSeq) is told, before Decoded, that the batch begins
// with n tokens it saw already: kept draft tokens decoded again after a
// checkpoint's restore (see Speculative). The engine feeds its own
// draft-mtp head and calls no DecodeWatcher of
// Options.Speculative.NewDrafters.
type DecodeWatcher interface {
	Drafter
	Decoded(ctx context.Context, b *Batch) error
}

// Speculative configures speculative generation (GenerateOptions.Speculative).
//
// On a recurrent or hybrid model (Qwen3.5) the memory takes back no more
// tokens than the context keeps snapshots (Memory.RollbackLimit): a longer
// draft goes in after a checkpoint of the sequence's recurrent state
// (Context.SeqStatePartial); a rejection restores it, and the kept
// tokens go in again with the next token, in a step that drafts nothing
// (as llama-server's). Set ContextOptions.RecurrentSnapshots to the
// drafts' length to spare it.
type Speculative struct {
	// Drafters are asked in order for each step; the first non-empty draft
	// is checked, as llama.cpp does with several --spec-type values. A
	// drafter sitting out a step under Adapt counts as having no draft.
	Drafters []Drafter
	// NMax caps the tokens of one draft (0: each drafter's own limit),
	// like llama-server's per-request speculative.n_max.
	NMax int
	// NMin drops drafts shorter than this (0: keep every draft).
	NMin int
	// Adapt is how each drafter's drafts follow what the target accepts
	// (the zero value adapts; see DraftAdapt).
	Adapt DraftAdapt
}

// DraftAdapt sets how speculative generation adapts each drafter to the
// target's verdicts, so that speculation costs little where it does not
// help: checking a draft costs a decode of several tokens, which on a CPU
// takes several times as long as one, and a rejected draft gains nothing.
// The zero value adapts, with the defaults below.
//
// A drafter's first draft is at most Start tokens. A draft counts as
// paying when the target keeps at least half of it and at least 2 tokens
// (1 where only 1 was asked). After a paying draft the drafter may draft
// twice as many tokens next time when all were kept, one more than were
// kept otherwise. After a draft that does not pay, the drafter sits out:
// it is not asked again until it would have offered 8 more drafts (judged
// by how often it has offered one so far), 32 after a second such draft in
// a row, 128 after a third, up to MaxSkip drafts, then it is asked for a
// short draft again (one more token than it got kept, at least 2); each
// paying draft halves the next sit-out. The rules count drafts and tokens,
// not time, so a generation's drafts are the same on every run; they
// choose which drafts are checked, never the output.
type DraftAdapt struct {
	// Off drafts as llama.cpp does: at every step, as much as each drafter
	// proposes.
	Off bool
	// Start is the most tokens of a drafter's first draft (default 8).
	Start int
	// MaxSkip is the most drafts a drafter sits out after drafts that did
	// not pay in a row (default 256).
	MaxSkip int
}

// DraftAdapt's defaults, and the first sit-out.
const (
	defaultDraftStart = 8
	defaultMaxSkip    = 256
	firstSkip         = 8
)

// AdaptiveDrafter wraps a Drafter with a DraftAdapt policy. Speculative
// wraps its drafters itself (per generation); a caller that runs its own
// speculative loop, asking drafters and reporting acceptance itself (as a
// server with a drafter per slot does), wraps each of its drafters in a new
// AdaptiveDrafter for each generation, for the same policy. Like the
// Drafter it wraps, it is not safe for concurrent use.
type AdaptiveDrafter struct {
	// Drafter is the wrapped drafter.
	Drafter Drafter
	// Adapt is the policy (the zero value: DraftAdapt's defaults).
	Adapt DraftAdapt
	// NMin is the shortest draft the caller checks (Speculative.NMin): a
	// draft is never capped below it.
	NMin int

	limit   int  // most tokens of the next draft (0: Start)
	skip    int  // steps still to sit out
	backoff int  // drafts to sit out after the next draft that does not pay
	asked   int  // steps the drafter was asked
	offered int  // drafts it offered
	max     int  // the max of the last draft's request
	pending int  // tokens of the last draft, until Accepted (0: none)
	planned int  // the most tokens Plan allowed, until Offer
	cut     bool // the last draft may have been cut by the cap
}

// Draft implements Drafter: it asks the wrapped drafter for a draft, unless
// the drafter sits out this step, and caps the draft's length.
// A nil Drafter, or a max of 0 or less, drafts nothing.
func (a *AdaptiveDrafter) Draft(ctx context.Context, history []Token, max int) ([]Token, error) {
	n := a.Plan(max)
	if n <= 0 {
		return nil, nil
	}
	toks, err := a.Drafter.Draft(ctx, history, n)
	if err != nil {
		return nil, err
	}
	return a.Offer(toks), nil
}

// Plan and Offer split Draft for a caller that asks the wrapped drafter
// itself (a server drafting for several sequences in one batch): Plan
// returns the most tokens the wrapped drafter may draft this step, 0 when
// it sits out (the step then counts as drafting nothing); the caller asks
// it for at most that many and passes its draft to Offer, which returns it
// capped. After an error the caller skips Offer, as Draft does: the step
// counts as not asked. Draft is Plan, the ask, then Offer.
func (a *AdaptiveDrafter) Plan(max int) int {
	a.pending = 0
	a.planned = 0
	if a.Drafter == nil || max <= 0 {
		return 0
	}
	if a.Adapt.Off {
		a.planned, a.cut = max, false
		return max
	}
	if a.skip > 0 {
		a.skip--
		return 0
	}
	a.max = max
	limit := a.limit
	if limit <= 0 {
		limit = a.Adapt.Start
		if limit <= 0 {
			limit = defaultDraftStart
		}
	}
	a.cut = max > limit // the draft may be cut by the cap
	a.planned = min(max, limit)
	return a.planned
}

// Offer records the wrapped drafter's draft for the step Plan planned,
// and returns it within the plan.
func (a *AdaptiveDrafter) Offer(toks []Token) []Token {
	n := a.planned
	a.planned = 0
	if n <= 0 {
		return nil
	}
	if len(toks) > n {
		toks = toks[:n]
	}
	if a.Adapt.Off {
		return toks
	}
	a.cut = a.cut && len(toks) == n
	a.asked++
	if len(toks) > 0 {
		a.offered++
	}
	a.pending = len(toks)
	return toks
}

// Decoded implements DecodeWatcher: it passes the batch on to the
// wrapped drafter when that is a DecodeWatcher.
func (a *AdaptiveDrafter) Decoded(ctx context.Context, b *Batch) error {
	if w, ok := a.Drafter.(DecodeWatcher); ok {
		return w.Decoded(ctx, b)
	}
	return nil
}

// Begin implements DraftBeginner: it passes prompt on to the wrapped
// drafter when that is a DraftBeginner.
func (a *AdaptiveDrafter) Begin(prompt []Token) {
	if b, ok := a.Drafter.(DraftBeginner); ok {
		b.Begin(prompt)
	}
}

// Accepted implements Drafter: it passes n on and adapts the next drafts.
// A draft it capped and the target kept entirely is not passed on: the
// verdict says nothing of the tokens the wrapped drafter would have added,
// and draft.NgramMap would take it as the most to draft from that n-gram.
func (a *AdaptiveDrafter) Accepted(n int) {
	k := a.pending
	a.pending = 0
	if a.Drafter == nil {
		return
	}
	if a.Adapt.Off || k == 0 || a.offered == 0 {
		a.Drafter.Accepted(n)
		return
	}
	n = min(max(n, 0), k) // a count the draft cannot have
	if n < k || !a.cut {
		a.Drafter.Accepted(n)
	}
	if 2*n >= k && n >= min(2, a.max) {
		a.backoff /= 2
		if n == k {
			a.limit = min(2*k, 1<<20)
		} else {
			a.limit = n + 1
		}
	} else {
		maxSkip := a.Adapt.MaxSkip
		if maxSkip <= 0 {
			maxSkip = defaultMaxSkip
		}
		a.backoff = min(max(4*a.backoff, firstSkip), maxSkip, 1<<20)
		// As many steps as the drafter took to offer that many drafts.
		steps := (int64(a.backoff)*int64(a.asked) + int64(a.offered) - 1) / int64(a.offered)
		a.skip = int(min(steps, 1<<30))
		a.limit = max(n+1, 2)
	}
	a.limit = max(a.limit, a.NMin)
}

// drafters returns the drafters of one generation, each wrapped in an
// AdaptiveDrafter unless adaptation is off or it is one already.
func (s *Speculative) drafters() []Drafter {
	if s.Adapt.Off {
		return s.Drafters
	}
	out := make([]Drafter, len(s.Drafters))
	for i, d := range s.Drafters {
		if _, ok := d.(*AdaptiveDrafter); ok || d == nil {
			out[i] = d
			continue
		}
		out[i] = &AdaptiveDrafter{Drafter: d, Adapt: s.Adapt, NMin: s.NMin}
	}
	return out
}

// SpeculativeStats counts the drafts of a generation.
type SpeculativeStats struct {
	Drafts   int // drafts checked by the target
	Drafted  int // tokens drafted (llama-server's timings.draft_n)
	Accepted int // drafted tokens the target kept (timings.draft_n_accepted)
}

// draft asks drafters (those of s, as drafters wraps them) for at most n
// tokens following history.
func (s *Speculative) draft(ctx context.Context, drafters []Drafter, history []Token, n int) ([]Token, Drafter, error) {
	if s.NMax > 0 {
		n = min(n, s.NMax)
	}
	if n <= 0 || n < s.NMin {
		return nil, nil, nil
	}
	for _, d := range drafters {
		toks, err := d.Draft(ctx, history, n)
		if err != nil {
			return nil, nil, err
		}
		if len(toks) > n {
			toks = toks[:n]
		}
		if len(toks) == 0 {
			continue
		}
		if len(toks) < s.NMin {
			return nil, nil, nil
		}
		return toks, d, nil
	}
	return nil, nil, nil
}

// speculate is Generate's loop with drafts: each step decodes the last
// sampled token together with a draft, samples at each position of the
// draft while the samples agree with it, and removes the rest from memory.
// The tokens sampled are those the plain loop samples (the same logits reach
// the same sampler state), so the pieces are the same.
func (g *Generation) speculate(e *emitter, sampler *SamplerChain, batch *Batch) error {
	c, opts, ctx := g.c, g.opts, g.ctx
	spec, seq, nCtx := opts.Speculative, opts.Seq, c.nCtxSeq
	if opts.MaxTokens > 0 && g.generated >= opts.MaxTokens {
		g.reason = StopMaxTokens
		return nil
	}
	tok, err := e.sample(sampler, batch.n-1)
	if err != nil {
		return err
	}
	history := append(slices.Clip(g.prompt), tok)
	drafters := spec.drafters()
	var ckBuf []byte   // the checkpoints' buffer (recurrent models)
	var replay []Token // kept tokens a checkpoint took back, to decode again before tok
	for _, d := range drafters {
		if b, ok := d.(DraftBeginner); ok {
			b.Begin(g.prompt)
		}
	}
	for {
		if !e.emit(tok) {
			return g.decodeKept(replay, batch)
		}
		// Draft as much as fits the context (each sample needs a position
		// before the end), MaxTokens and the batch; nothing in a step
		// that decodes kept tokens again (as llama-server's replay).
		n := min(nCtx-g.nPast-2, c.nBatch-1)
		if opts.MaxTokens > 0 {
			n = min(n, opts.MaxTokens-g.generated-1)
		}
		if len(replay) > 0 {
			n = 0
		}
		var draft []Token
		var drafter Drafter
		if n > 0 {
			if draft, drafter, err = spec.draft(ctx, drafters, history, n); err != nil {
				return err
			}
		}
		// A recurrent memory takes back no more tokens than it keeps
		// snapshots: a longer draft goes in after a checkpoint of its
		// state (as llama-server's).
		var ck []byte
		ckPos, hPos := g.nPast, len(history)-1 // tok's position, its index in history
		if lim := c.nRollback; lim >= 0 && len(draft) > lim {
			if ckBuf, err = c.seqStateHeld("generate", ckBuf[:0], seq, capi.StateSeqFlagsPartialOnly); err != nil {
				return err
			}
			ck = ckBuf
		}
		// takeBack leaves the memory holding the tokens before g.nPast:
		// through a checkpoint, it decodes the kept tokens again at once
		// (the generation ends), or in the next step (later).
		takeBack := func(later bool) error {
			ok, err := c.removeTokens(seq, g.nPast, -1)
			if err != nil || ok {
				return err
			}
			if ck == nil {
				return errorf(CodeUnsupported, "generate", "the memory cannot take back rejected draft tokens")
			}
			if err := g.restore(ck, ckPos); err != nil {
				return err
			}
			replay = append(replay[:0], history[hPos:hPos+g.nPast-ckPos]...)
			g.nPast = ckPos
			if later {
				return nil
			}
			return g.decodeKept(replay, batch)
		}
		batch.Clear()
		if len(replay) > 0 {
			_ = batch.AddSequence(replay, g.nPast, seq, false)
			g.nPast += len(replay)
		}
		base := batch.n // tok's batch index
		_ = batch.Add(tok, g.nPast, seq, true)
		for i, d := range draft {
			if err := c.model.CheckToken(d); err != nil {
				return err
			}
			_ = batch.Add(d, g.nPast+1+i, seq, true)
		}
		if err := c.decode(ctx, batch); err != nil {
			return err
		}
		replayed(drafters, len(replay))
		replay = replay[:0]
		if err := c.watchDecode(ctx, drafters, batch); err != nil {
			return err
		}
		g.nPast++
		if opts.MaxTokens > 0 && g.generated >= opts.MaxTokens {
			g.reason = StopMaxTokens
			return nil
		}
		if g.nPast >= nCtx {
			g.reason = StopContext
			return nil
		}
		accepted := 0
		for i := 0; ; i++ {
			t, err := e.sample(sampler, base+i)
			if err != nil {
				return err
			}
			if i == len(draft) || t != draft[i] {
				tok = t
				break
			}
			// A draft token the target agrees with: it is in memory already.
			accepted++
			history = append(history, t)
			if !e.emit(t) {
				g.settle(drafters, drafter, len(draft), accepted)
				return takeBack(false)
			}
			g.nPast++
			if opts.MaxTokens > 0 && g.generated >= opts.MaxTokens {
				g.settle(drafters, drafter, len(draft), accepted)
				g.reason = StopMaxTokens
				return takeBack(false)
			}
		}
		g.settle(drafters, drafter, len(draft), accepted)
		if accepted < len(draft) {
			if err := takeBack(true); err != nil {
				return err
			}
		}
		history = append(history, tok)
	}
}

// restore brings seq's memory back to the checkpoint ck, taken with pos
// tokens in memory.
func (g *Generation) restore(ck []byte, pos int) error {
	c, seq := g.c, g.opts.Seq
	if err := c.setSeqStateHeld("generate", seq, ck, capi.StateSeqFlagsPartialOnly, "the draft's checkpoint"); err != nil {
		return err
	}
	if ok, err := c.removeTokens(seq, pos, -1); err != nil || !ok {
		if err == nil {
			err = errorf(CodeUnsupported, "generate", "the memory cannot drop the rejected draft after its checkpoint")
		}
		return err
	}
	return nil
}

// decodeKept decodes keep, the kept tokens a checkpoint took back, from
// g.nPast on, when the generation ends before the next step would have.
// The drafters are not shown that decode: they saw the tokens in the
// draft's check, and were told which were kept.
func (g *Generation) decodeKept(keep []Token, batch *Batch) error {
	c, seq := g.c, g.opts.Seq
	for len(keep) > 0 {
		n := min(len(keep), batch.Cap())
		batch.Clear()
		if err := batch.AddSequence(keep[:n], g.nPast, seq, false); err != nil {
			return err
		}
		if err := c.decode(g.ctx, batch); err != nil {
			return err
		}
		keep, g.nPast = keep[n:], g.nPast+n
	}
	return nil
}

// replayed tells the drafters that watch the decodes, and can pass over
// tokens decoded again (draft.MTPSeq's Replayed), that the batch just
// decoded begins with n of them.
func replayed(drafters []Drafter, n int) {
	if n == 0 {
		return
	}
	for _, d := range drafters {
		if r, ok := inner(d).(interface{ Replayed(int) }); ok {
			r.Replayed(n)
		}
	}
}

// inner is the drafter an AdaptiveDrafter wraps, else d.
func inner(d Drafter) Drafter {
	if a, ok := d.(*AdaptiveDrafter); ok {
		return a.Drafter
	}
	return d
}

// watchDecode shows b, just decoded on c (which the generation holds),
// to the drafters that watch the target's decodes. The context is let go
// meanwhile, so that they may read it (Hidden).
func (c *Context) watchDecode(ctx context.Context, drafters []Drafter, b *Batch) (err error) {
	for _, d := range drafters {
		w, ok := d.(DecodeWatcher)
		if !ok {
			continue
		}
		c.release()
		err = w.Decoded(ctx, b)
		if e := c.acquire("generate"); e != nil {
			return e
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// settle counts a checked draft and tells its drafter, and the other
// drafters that watch the decodes (they saw the draft go in).
func (g *Generation) settle(ds []Drafter, d Drafter, drafted, accepted int) {
	if d == nil {
		return
	}
	g.spec.Drafts++
	g.spec.Drafted += drafted
	g.spec.Accepted += accepted
	d.Accepted(accepted)
	for _, o := range ds {
		if w, ok := inner(o).(DecodeWatcher); ok && o != d {
			w.Accepted(accepted)
		}
	}
}
