package draft

import (
	"context"

	"github.com/x/llama"
)

// ModelRequest is one sequence's part of DraftModels: its drafter, its
// history and the most tokens to draft (Model.Draft's arguments), and, on
// return, its draft.
type ModelRequest struct {
	Model   *Model
	History []llama.Token
	Max     int
	Draft   []llama.Token // set by DraftModels

	max, pos int
	next     llama.Token // the token to decode next
	idx      int         // its index in the batch
	done     bool
}

// DraftModels drafts for several sequences of one draft context at once:
// for each request what its Model's Draft would, but with the decodes of
// all the sequences in shared batches (one to bring their memories up to
// their histories, more only when that does not fit a batch, then one per
// drafted position), where Draft decodes each sequence alone. A server
// drafting for N slots so runs a few decodes of N tokens each step instead
// of N times as many of one token. The Models must share one context, each
// on a sequence of its own; a nil request, or one without a Model, is
// skipped. The drafts are Draft's, up to the rounding a batch of another
// size may bring to the draft model's logits. An error leaves every
// request without a draft and forgets the sequences' memories (their next
// drafts decode their histories again).
func DraftModels(ctx context.Context, reqs []*ModelRequest) error {
	var c *llama.Context
	var b *llama.Batch
	seqs := map[int]bool{}
	active := make([]*ModelRequest, 0, len(reqs))
	for _, r := range reqs {
		if r == nil {
			continue
		}
		r.Draft, r.done = nil, true
		m := r.Model
		if m == nil {
			continue
		}
		if m.c == nil {
			return errorf(llama.CodeInvalid, "draft model", "not made by NewModel")
		}
		if c == nil {
			c, b = m.c, m.batch
		}
		if m.c != c {
			return errorf(llama.CodeInvalid, "draft model", "drafters of different contexts in one batch")
		}
		if seqs[m.opts.Seq] {
			return errorf(llama.CodeInvalid, "draft model", "sequence %d drafted twice in one batch", m.opts.Seq)
		}
		seqs[m.opts.Seq] = true
		r.max = min(r.Max, m.opts.NMax)
		if len(r.History) == 0 || r.max <= 0 {
			continue
		}
		if r.max = min(r.max, c.SeqSize()-len(r.History)); r.max <= 0 {
			continue
		}
		r.done = false
		active = append(active, r)
	}
	if len(active) == 0 {
		return nil
	}
	fail := func(err error) error {
		for _, r := range active {
			r.Draft = nil
			r.Model.cache = r.Model.cache[:0]
			_, _ = c.Memory().Remove(r.Model.opts.Seq, 0, -1)
		}
		return err
	}
	// Each memory keeps its common prefix with its history; the rest
	// but the last token is decoded, in as few batches as it fits.
	b.Clear()
	for _, r := range active {
		m, hist := r.Model, r.History
		keep := commonPrefix(m.cache, hist[:len(hist)-1])
		if keep < len(m.cache) {
			if _, err := c.Memory().Remove(m.opts.Seq, keep, -1); err != nil {
				return fail(err)
			}
			m.cache = m.cache[:keep]
		}
		r.pos = keep
		for _, tok := range hist[keep : len(hist)-1] {
			if b.Len() == b.Cap() {
				if err := c.Decode(ctx, b); err != nil {
					return fail(err)
				}
				b.Clear()
			}
			if err := b.Add(tok, r.pos, m.opts.Seq, false); err != nil {
				return fail(err)
			}
			m.cache = append(m.cache, tok)
			r.pos++
		}
		r.next = hist[len(hist)-1]
	}
	if b.Len() > 0 {
		if err := c.Decode(ctx, b); err != nil {
			return fail(err)
		}
	}
	// Then one batch per drafted position, of the sequences still drafting
	// (at most a batch of them at a time).
	for left := active; len(left) > 0; {
		group := left[:min(len(left), b.Cap())]
		left = left[len(group):]
		for {
			b.Clear()
			for _, r := range group {
				if r.done {
					continue
				}
				r.idx = b.Len()
				if err := b.Add(r.next, r.pos, r.Model.opts.Seq, true); err != nil {
					return fail(err)
				}
			}
			if b.Len() == 0 {
				break
			}
			if err := c.Decode(ctx, b); err != nil {
				return fail(err)
			}
			for _, r := range group {
				if r.done {
					continue
				}
				m := r.Model
				m.cache = append(m.cache, r.next)
				r.pos++
				logits, err := c.Logits(r.idx)
				if err != nil {
					return fail(err)
				}
				tok, p := m.best(logits)
				if p < m.opts.PMin {
					r.done = true
					continue
				}
				r.Draft = append(r.Draft, tok)
				r.next = tok
				r.done = len(r.Draft) >= r.max
			}
		}
	}
	for _, r := range active {
		if len(r.Draft) < r.Model.opts.NMin {
			r.Draft = nil
		}
	}
	return nil
}
