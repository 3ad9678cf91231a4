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
// for each request what its Model's Draft would, with the decodes of all
// the sequences in shared batches (one to bring their memories up to
// their histories, more only when that does not fit a batch, then one per
// drafted position), where one Draft decodes its sequence alone. A server
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
	active := make([]*ModelRequest, 0, len(reqs))
	for i, r := range reqs {
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
		for _, o := range reqs[:i] {
			if o != nil && o.Model != nil && o.Model.opts.Seq == m.opts.Seq {
				return errorf(llama.CodeInvalid, "draft model", "sequence %d drafted twice in one batch", m.opts.Seq)
			}
		}
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
	for len(active) > 0 {
		// At most a batch of sequences at a time: each needs a position
		// in every batch below.
		group := active[:min(len(active), b.Cap())]
		active = active[len(group):]
		if err := draftGroup(ctx, c, b, group); err != nil {
			for _, r := range group {
				r.Draft = nil
				r.Model.cache, r.Model.ck = r.Model.cache[:0], r.Model.ck[:0]
				_, _ = c.Memory().Remove(r.Model.opts.Seq, 0, -1)
			}
			for _, r := range active {
				r.done = true
			}
			return err
		}
	}
	return nil
}

// draftGroup drafts for group, at most b.Cap() requests.
func draftGroup(ctx context.Context, c *llama.Context, b *llama.Batch, group []*ModelRequest) error {
	// Each memory keeps its common prefix with its history. The rest of
	// the histories goes into batches, the sequences' last tokens (whose
	// logits give the first drafted tokens) into the last batch: the
	// others fill batches before it only when all do not fit in one.
	rest := 0
	for _, r := range group {
		m, hist := r.Model, r.History
		keep := commonPrefix(m.cache, hist[:len(hist)-1])
		if keep < len(m.cache) {
			ok, err := c.Memory().Remove(m.opts.Seq, keep, -1)
			if err != nil {
				return err
			}
			if !ok {
				// A recurrent memory cannot drop the tail: back to the
				// checkpoint taken before the last draft (see below)
				// when the history still holds it, else from the start.
				if keep, err = m.rewind(keep); err != nil {
					return err
				}
			}
			m.cache = m.cache[:keep]
		}
		r.pos = keep
		rest += len(hist) - keep
	}
	b.Clear()
	for _, r := range group {
		m, hist := r.Model, r.History
		for _, tok := range hist[r.pos : len(hist)-1] {
			if b.Len() == b.Cap() || (b.Len() > 0 && rest <= b.Cap() && b.Len()+rest > b.Cap()) {
				if err := c.Decode(ctx, b); err != nil {
					return err
				}
				b.Clear()
			}
			if err := b.Add(tok, r.pos, m.opts.Seq, false); err != nil {
				return err
			}
			m.cache = append(m.cache, tok)
			r.pos++
			rest--
		}
	}
	if b.Len()+len(group) > b.Cap() {
		if err := c.Decode(ctx, b); err != nil {
			return err
		}
		b.Clear()
	}
	// A recurrent draft memory cannot take drafted tokens back: each
	// sequence's state is checkpointed once its whole history is in
	// (after the first drafting decode), for the next draft to go back
	// to where the target rejected some of this one (llama-server's
	// draft context goes back at every draft, and decodes the kept
	// tokens again).
	recurrent := c.Memory().RollbackLimit() >= 0
	first := true
	for _, r := range group {
		r.next = r.History[len(r.History)-1]
	}
	// Then one batch per drafted position: each sequence still drafting
	// decodes its last token, whose logits give the next.
	for {
		n := 0
		for _, r := range group {
			if r.done {
				continue
			}
			r.idx = b.Len()
			if err := b.Add(r.next, r.pos, r.Model.opts.Seq, true); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			break
		}
		if err := c.Decode(ctx, b); err != nil {
			return err
		}
		b.Clear()
		for _, r := range group {
			if r.done {
				continue
			}
			m := r.Model
			m.cache = append(m.cache, r.next)
			r.pos++
			logits, err := c.Logits(r.idx)
			if err != nil {
				return err
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
		if first && recurrent {
			for _, r := range group {
				m := r.Model
				ck, err := c.AppendSeqStatePartial(m.ck[:0], m.opts.Seq)
				if err != nil {
					return err
				}
				m.ck, m.ckLen = ck, len(m.cache)
			}
		}
		first = false
	}
	for _, r := range group {
		if len(r.Draft) < r.Model.opts.NMin {
			r.Draft = nil
		}
	}
	return nil
}

// rewind takes a recurrent draft memory back to where it can hold the
// first keep tokens of its cache: to the checkpoint of the last draft
// when it is within them, else to nothing. It returns the tokens the
// memory then holds.
func (m *Model) rewind(keep int) (int, error) {
	c, seq := m.c, m.opts.Seq
	if len(m.ck) > 0 && m.ckLen <= keep && m.ckLen <= len(m.cache) {
		err := c.SetSeqStatePartial(seq, m.ck)
		if err == nil {
			var ok bool
			if ok, err = c.Memory().Remove(seq, m.ckLen, -1); err == nil && ok {
				return m.ckLen, nil
			}
		}
	}
	m.ck = m.ck[:0]
	_, err := c.Memory().Remove(seq, 0, -1)
	return 0, err
}
