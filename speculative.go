package llama

import (
	"context"
	"math"
	"slices"
)

// A Drafter proposes tokens likely to follow a sequence, for speculative
// generation: the target model checks a whole draft in one batched decode,
// keeps the tokens it agrees with and samples one more, so each decode can
// yield several tokens. Drafts change only the speed, never the output.
//
// Drafters in this package: DraftModel (a small model of the same
// vocabulary), NgramSimple and NgramMap (self-speculation from the text so
// far) and NgramCache (n-gram statistics of the text so far and of lookup
// files). A Drafter serves one generation at a time; it is not safe for
// concurrent use.
type Drafter interface {
	// Draft returns up to max tokens to follow history: the tokens of the
	// sequence so far (prompt and generated), ending with the last sampled
	// token, which is not in the target's memory yet. It may return none.
	Draft(ctx context.Context, history []Token, max int) ([]Token, error)
	// Accepted reports how many tokens of the last draft the target kept.
	Accepted(n int)
}

// Speculative configures speculative generation (GenerateOptions.Speculative).
type Speculative struct {
	// Drafters are asked in order for each step; the first non-empty draft
	// is checked, as llama.cpp does with several --spec-type values.
	Drafters []Drafter
	// NMax caps the tokens of one draft (0: each drafter's own limit),
	// like llama-server's per-request speculative.n_max.
	NMax int
	// NMin drops drafts shorter than this (0: keep every draft).
	NMin int
}

// SpeculativeStats counts the drafts of a generation.
type SpeculativeStats struct {
	Drafts   int // drafts checked by the target
	Drafted  int // tokens drafted (llama-server's timings.draft_n)
	Accepted int // drafted tokens the target kept (timings.draft_n_accepted)
}

// draft asks the drafters for at most n tokens following history.
func (s *Speculative) draft(ctx context.Context, history []Token, n int) ([]Token, Drafter, error) {
	if s.NMax > 0 {
		n = min(n, s.NMax)
	}
	if n <= 0 || n < s.NMin {
		return nil, nil, nil
	}
	for _, d := range s.Drafters {
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

// DraftModelOptions configure a DraftModel.
type DraftModelOptions struct {
	// NMax is the most tokens drafted at once (default 3, llama.cpp's
	// --spec-draft-n-max).
	NMax int
	// NMin drops drafts shorter than this (llama.cpp's --spec-draft-n-min).
	NMin int
	// PMin stops a draft at a token whose probability among the draft
	// model's 10 best is below PMin (llama.cpp's --spec-draft-p-min; 0:
	// never).
	PMin float32
	// Seq is the sequence of the draft Context to use (default 0).
	Seq int
}

// DraftModel drafts with a small model that shares the target's
// vocabulary, through a Context of its own: it keeps the sequence so far in
// that Context's memory (recomputing only what changed) and drafts
// greedily. The caller owns the draft Context (another Context than the
// target's, which is busy while it generates) and closes it after use.
type DraftModel struct {
	c     *Context
	opts  DraftModelOptions
	batch *Batch
	cache []Token // tokens in the draft context's memory, in order from position 0
	cand  []TokenData
}

// NewDraftModel returns a drafter over draft, a Context of a draft model,
// after checking that its vocabulary is compatible with target's as
// llama.cpp checks it (see CheckDraftCompatible).
func NewDraftModel(target *Model, draft *Context, opts DraftModelOptions) (*DraftModel, error) {
	if target == nil || draft == nil {
		return nil, errorf(CodeInvalid, "draft model", "nil model or context")
	}
	if err := CheckDraftCompatible(target, draft.Model()); err != nil {
		return nil, err
	}
	if opts.NMax <= 0 {
		opts.NMax = 3
	}
	if err := draft.seqOK("draft model", opts.Seq, false); err != nil {
		return nil, err
	}
	// Start from an empty sequence: the drafter tracks what it decodes.
	if _, err := draft.RemoveTokens(opts.Seq, 0, -1); err != nil {
		return nil, err
	}
	return &DraftModel{c: draft, opts: opts, batch: NewBatch(draft.BatchSize(), 1)}, nil
}

// Tokens of a vocabulary below this id are not compared: they are often
// special tokens that differ between otherwise identical vocabularies.
const draftVocabCheckStart = 5

// Vocabularies of a target and a draft may differ in size by this much.
const draftVocabMaxSizeDiff = 128

// CheckDraftCompatible returns an error unless draft's vocabulary can
// draft for target's, by llama.cpp's rules: the same vocabulary type, the
// same BOS and EOS handling and ids, sizes within 128 tokens, and the same
// text for every token id from 5 up to the smaller size.
func CheckDraftCompatible(target, draft *Model) error {
	ti, err := target.Info()
	if err != nil {
		return err
	}
	di, err := draft.Info()
	if err != nil {
		return err
	}
	if ti.VocabType != di.VocabType {
		return errorf(CodeInvalid, "draft model", "vocabulary types differ: target %s, draft %s", ti.VocabType, di.VocabType)
	}
	ts, ds := target.SpecialTokens(), draft.SpecialTokens()
	if ts.AddBOS != ds.AddBOS || (ts.AddBOS && ts.BOS != ds.BOS) {
		return errorf(CodeInvalid, "draft model", "BOS tokens differ: target %d (add %v), draft %d (add %v)", ts.BOS, ts.AddBOS, ds.BOS, ds.AddBOS)
	}
	if ts.AddEOS != ds.AddEOS || (ts.AddEOS && ts.EOS != ds.EOS) {
		return errorf(CodeInvalid, "draft model", "EOS tokens differ: target %d (add %v), draft %d (add %v)", ts.EOS, ts.AddEOS, ds.EOS, ds.AddEOS)
	}
	nt, nd := target.VocabSize(), draft.VocabSize()
	if d := nt - nd; d > draftVocabMaxSizeDiff || -d > draftVocabMaxSizeDiff {
		return errorf(CodeInvalid, "draft model", "vocabulary sizes differ too much: target %d, draft %d", nt, nd)
	}
	for i := draftVocabCheckStart; i < min(nt, nd); i++ {
		a, err := target.TokenText(Token(i))
		if err != nil {
			return err
		}
		b, err := draft.TokenText(Token(i))
		if err != nil {
			return err
		}
		if a != b {
			return errorf(CodeInvalid, "draft model", "token %d differs: target %q, draft %q", i, a, b)
		}
	}
	return nil
}

// Draft implements Drafter.
func (d *DraftModel) Draft(ctx context.Context, history []Token, max int) ([]Token, error) {
	max = min(max, d.opts.NMax)
	if len(history) == 0 || max <= 0 {
		return nil, nil
	}
	c, seq := d.c, d.opts.Seq
	// Room in the draft context: the history and the draft must fit.
	max = min(max, c.SeqSize()-len(history))
	if max <= 0 {
		return nil, nil
	}
	// Keep the common prefix in memory, decode the rest of the history.
	keep := commonPrefix(d.cache, history[:len(history)-1])
	if keep < len(d.cache) {
		if _, err := c.RemoveTokens(seq, keep, -1); err != nil {
			return nil, err
		}
		d.cache = d.cache[:keep]
	}
	todo := history[keep:]
	pos := keep
	for len(todo) > 0 {
		n := min(len(todo), d.batch.Cap())
		d.batch.Clear()
		if err := d.batch.AddSequence(todo[:n], pos, seq, n == len(todo)); err != nil {
			return nil, err
		}
		if err := c.Decode(ctx, d.batch); err != nil {
			d.cache = d.cache[:0]
			_, _ = c.RemoveTokens(seq, 0, -1)
			return nil, err
		}
		d.cache = append(d.cache, todo[:n]...)
		todo, pos = todo[n:], pos+n
	}
	var out []Token
	for {
		logits, err := c.Logits(d.batch.Len() - 1)
		if err != nil {
			return nil, err
		}
		tok, p := d.best(logits)
		if p < d.opts.PMin {
			break
		}
		out = append(out, tok)
		if len(out) >= max {
			break
		}
		d.batch.Clear()
		_ = d.batch.Add(tok, pos, seq, true)
		if err := c.Decode(ctx, d.batch); err != nil {
			return nil, err
		}
		d.cache = append(d.cache, tok)
		pos++
	}
	if len(out) < d.opts.NMin {
		return nil, nil
	}
	return out, nil
}

// best returns the most likely token and its probability among the 10
// most likely (llama.cpp drafts through a top-k 10 sampler).
func (d *DraftModel) best(logits []float32) (Token, float32) {
	const k = 10
	d.cand = d.cand[:0]
	for i, l := range logits {
		if len(d.cand) < k {
			d.cand = append(d.cand, TokenData{ID: Token(i), Logit: l})
			if len(d.cand) == k {
				slices.SortFunc(d.cand, func(a, b TokenData) int { return cmpLogit(b.Logit, a.Logit) })
			}
			continue
		}
		if l <= d.cand[k-1].Logit {
			continue
		}
		j := k - 1
		for j > 0 && d.cand[j-1].Logit < l {
			d.cand[j] = d.cand[j-1]
			j--
		}
		d.cand[j] = TokenData{ID: Token(i), Logit: l}
	}
	if len(d.cand) < k {
		slices.SortFunc(d.cand, func(a, b TokenData) int { return cmpLogit(b.Logit, a.Logit) })
	}
	var sum float64
	top := float64(d.cand[0].Logit)
	for _, c := range d.cand {
		sum += math.Exp(float64(c.Logit) - top)
	}
	return d.cand[0].ID, float32(1 / sum)
}

func cmpLogit(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Accepted implements Drafter. The draft context's memory keeps the draft
// past what was accepted; the next Draft trims it to the common prefix.
func (d *DraftModel) Accepted(int) {}

func commonPrefix(a, b []Token) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
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
	for {
		if !e.emit(tok) {
			return nil
		}
		// Draft as much as fits the context (each sample needs a position
		// before the end), MaxTokens and the batch.
		n := min(nCtx-g.nPast-2, c.nBatch-1)
		if opts.MaxTokens > 0 {
			n = min(n, opts.MaxTokens-g.generated-1)
		}
		var draft []Token
		var drafter Drafter
		if n > 0 {
			if draft, drafter, err = spec.draft(ctx, history, n); err != nil {
				return err
			}
		}
		batch.Clear()
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
			t, err := e.sample(sampler, i)
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
				g.settle(drafter, len(draft), accepted)
				_, err := c.removeTokens(seq, g.nPast, -1)
				return err
			}
			g.nPast++
			if opts.MaxTokens > 0 && g.generated >= opts.MaxTokens {
				g.settle(drafter, len(draft), accepted)
				g.reason = StopMaxTokens
				_, err := c.removeTokens(seq, g.nPast, -1)
				return err
			}
		}
		g.settle(drafter, len(draft), accepted)
		if accepted < len(draft) {
			if _, err := c.removeTokens(seq, g.nPast, -1); err != nil {
				return err
			}
		}
		history = append(history, tok)
	}
}

// settle counts a checked draft and tells its drafter.
func (g *Generation) settle(d Drafter, drafted, accepted int) {
	if d == nil {
		return
	}
	g.spec.Drafts++
	g.spec.Drafted += drafted
	g.spec.Accepted += accepted
	d.Accepted(accepted)
}
