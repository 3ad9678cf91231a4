package draft

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/x/llama"
)

// ModelOptions configure a Model.
type ModelOptions struct {
	// NMax is the most tokens drafted at once (default 3, llama.cpp's
	// --spec-draft-n-max).
	NMax int
	// NMin drops drafts shorter than this (llama.cpp's --spec-draft-n-min).
	NMin int
	// PMin stops a draft at a token whose probability among the draft
	// model's 10 best is below PMin (llama.cpp's --spec-draft-p-min; 0:
	// never).
	PMin float32
	// Seq is the sequence of the draft context to use (default 0).
	Seq int
}

// Model drafts with a small model that shares the target's vocabulary,
// through a llama.Context of its own: it keeps the sequence so far in that
// context's memory (recomputing only what changed) and drafts greedily.
// A recurrent or hybrid draft model's memory cannot drop the drafted
// tokens: it checkpoints its state before each draft
// (llama.Context.AppendSeqStatePartial) and goes back to it when the next
// history leaves the draft; a history that leaves before the checkpoint
// is decoded again from the start. The caller owns the draft context (another context than the target's,
// which is busy while it generates) and closes it after use.
type Model struct {
	c     *llama.Context
	opts  ModelOptions
	batch *llama.Batch
	cache []llama.Token // tokens in the draft context's memory, in order from position 0
	cand  []llama.TokenData
	// A recurrent draft memory's checkpoint before the last draft, with
	// ckLen tokens of cache in memory (see rewind).
	ck    []byte
	ckLen int
}

// SetPMin changes ModelOptions.PMin for the following drafts (a
// server's per-request speculative.p_min); values outside [0, 1] are
// clamped.
func (d *Model) SetPMin(p float32) {
	d.opts.PMin = min(max(p, 0), 1)
}

// NewModel returns a drafter over draft, a context of a draft model, after
// checking that its vocabulary is compatible with target's as llama.cpp
// checks it (see CheckCompatible).
func NewModel(target *llama.Model, draft *llama.Context, opts ModelOptions) (*Model, error) {
	if target == nil || draft == nil {
		return nil, errorf(llama.CodeInvalid, "draft model", "nil model or context")
	}
	if err := CheckCompatible(target, draft.Model()); err != nil {
		return nil, err
	}
	if opts.NMax <= 0 {
		opts.NMax = 3
	}
	if n := draft.Sequences(); opts.Seq < 0 || opts.Seq >= n {
		return nil, errorf(llama.CodeInvalid, "draft model", "sequence %d out of range [0, %d)", opts.Seq, n)
	}
	// Start from an empty sequence: the drafter tracks what it decodes.
	if _, err := draft.Memory().Remove(opts.Seq, 0, -1); err != nil {
		return nil, err
	}
	return &Model{c: draft, opts: opts, batch: llama.NewBatch(draft.BatchSize(), 1)}, nil
}

// Tokens of a vocabulary below this id are not compared: they are often
// special tokens that differ between otherwise identical vocabularies.
const draftVocabCheckStart = 5

// Vocabularies of a target and a draft may differ in size by this much.
const draftVocabMaxSizeDiff = 128

// CheckCompatible returns an error unless draft's vocabulary can draft
// for target's, by llama.cpp's rules: the same vocabulary type, the
// same BOS and EOS handling and ids, sizes within 128 tokens, and the same
// text for every token id from 5 up to the smaller size.
func CheckCompatible(target, draft *llama.Model) error {
	ti, err := target.Info()
	if err != nil {
		return err
	}
	di, err := draft.Info()
	if err != nil {
		return err
	}
	if ti.VocabType != di.VocabType {
		return errorf(llama.CodeInvalid, "draft model", "vocabulary types differ: target %s, draft %s", ti.VocabType, di.VocabType)
	}
	ts, ds := target.SpecialTokens(), draft.SpecialTokens()
	if ts.AddBOS != ds.AddBOS || (ts.AddBOS && ts.BOS != ds.BOS) {
		return errorf(llama.CodeInvalid, "draft model", "BOS tokens differ: target %d (add %v), draft %d (add %v)", ts.BOS, ts.AddBOS, ds.BOS, ds.AddBOS)
	}
	if ts.AddEOS != ds.AddEOS || (ts.AddEOS && ts.EOS != ds.EOS) {
		return errorf(llama.CodeInvalid, "draft model", "EOS tokens differ: target %d (add %v), draft %d (add %v)", ts.EOS, ts.AddEOS, ds.EOS, ds.AddEOS)
	}
	nt, nd := target.VocabSize(), draft.VocabSize()
	if d := nt - nd; d > draftVocabMaxSizeDiff || -d > draftVocabMaxSizeDiff {
		return errorf(llama.CodeInvalid, "draft model", "vocabulary sizes differ too much: target %d, draft %d", nt, nd)
	}
	for i := draftVocabCheckStart; i < min(nt, nd); i++ {
		a, err := target.TokenText(llama.Token(i))
		if err != nil {
			return err
		}
		b, err := draft.TokenText(llama.Token(i))
		if err != nil {
			return err
		}
		if a != b {
			return errorf(llama.CodeInvalid, "draft model", "token %d differs: target %q, draft %q", i, a, b)
		}
	}
	return nil
}

// Reset forgets what the drafter keeps of the sequence, and the draft
// context's memory of it: the next Draft decodes its history from the
// start. A caller uses it when a generation ended in a way that may have
// left the two apart (an interrupted Draft, say); Draft keeps them in step
// on its own otherwise.
func (d *Model) Reset() error {
	if d == nil || d.c == nil {
		return errorf(llama.CodeInvalid, "draft model", "not made by NewModel")
	}
	d.cache, d.ck = d.cache[:0], d.ck[:0]
	_, err := d.c.Memory().Remove(d.opts.Seq, 0, -1)
	return err
}

// Draft implements llama.Drafter: DraftModels with this one request.
func (d *Model) Draft(ctx context.Context, history []llama.Token, max int) ([]llama.Token, error) {
	if d == nil || d.c == nil {
		return nil, errorf(llama.CodeInvalid, "draft model", "not made by NewModel")
	}
	r := ModelRequest{Model: d, History: history, Max: max}
	if err := DraftModels(ctx, []*ModelRequest{&r}); err != nil {
		return nil, err
	}
	return r.Draft, nil
}

// best returns the most likely token and its probability among the 10
// most likely (llama.cpp drafts through a top-k 10 sampler).
func (d *Model) best(logits []float32) (llama.Token, float32) {
	return best10(&d.cand, logits)
}

// best10 is best, with cand as scratch.
func best10(cand *[]llama.TokenData, logits []float32) (llama.Token, float32) {
	const k = 10
	c := (*cand)[:0]
	defer func() { *cand = c }()
	for i, l := range logits {
		if len(c) < k {
			c = append(c, llama.TokenData{ID: llama.Token(i), Logit: l})
			if len(c) == k {
				slices.SortFunc(c, func(a, b llama.TokenData) int { return cmpLogit(b.Logit, a.Logit) })
			}
			continue
		}
		if l <= c[k-1].Logit {
			continue
		}
		j := k - 1
		for j > 0 && c[j-1].Logit < l {
			c[j] = c[j-1]
			j--
		}
		c[j] = llama.TokenData{ID: llama.Token(i), Logit: l}
	}
	if len(c) < k {
		slices.SortFunc(c, func(a, b llama.TokenData) int { return cmpLogit(b.Logit, a.Logit) })
	}
	var sum float64
	top := float64(c[0].Logit)
	for _, t := range c {
		sum += math.Exp(float64(t.Logit) - top)
	}
	return c[0].ID, float32(1 / sum)
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

// Accepted implements llama.Drafter. The draft context's memory keeps the draft
// past what was accepted; the next Draft trims it to the common prefix.
func (d *Model) Accepted(int) {}

func commonPrefix(a, b []llama.Token) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// errorf makes the *llama.Error of the package's failures.
func errorf(code llama.ErrorCode, op, format string, args ...any) error {
	return &llama.Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)}
}
