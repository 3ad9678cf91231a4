package draft

import (
	"context"
	"slices"

	"github.com/x/llama"
)

// MTPOptions configure an MTP drafter.
type MTPOptions struct {
	// NMax is the most tokens drafted at once (default 3, llama.cpp's
	// --spec-draft-n-max); NMin drops shorter drafts; PMin stops a draft
	// at a token whose probability among the head's 10 best is below it
	// (0: never; llama-server's default is 0.75). Each sequence's
	// MTPSeq.SetPMin changes it for that sequence.
	NMax, NMin int
	PMin       float32
	// Context sets the MTP context's threads (none: the target's) and
	// thread pools; its sizes, sequences and MTP flag come from the
	// target context.
	Context llama.ContextOptions
	// Model is the head's model when it ships apart from the target's
	// (llama.cpp's MTP sidecar file, loaded with llama.ModelOptions.MTP;
	// its vocabulary must match the target's, see CheckCompatible); nil:
	// the target's own model.
	Model *llama.Model
}

// MTP drafts with a model's own multi-token-prediction head (llama.cpp's
// draft-mtp), for every sequence of a target context: GLM-4.5, Qwen3.5,
// DeepSeek V3 and the other models whose files carry MTP blocks
// (llama.Info.MTPLayers), loaded with llama.ModelOptions.MTP.
//
// The head predicts from the target's hidden state, so it must see every
// batch the target decodes: call Decoded after each of the target's
// decodes, with its batch. MTP keeps, in a context of its own on the same
// model, each sequence's tokens paired with the target's hidden rows. A
// sequence whose target memory changed otherwise (a prompt restored from a
// cache, a context shift) drafts from what the head saw; the drafts are
// still checked by the target, so only their acceptance suffers.
//
// On a recurrent or hybrid model (Qwen3.5), give the target context
// llama.ContextOptions.RecurrentSnapshots of NMax: it then takes the
// rejected part of a draft back through them, where a shorter keep needs
// a checkpoint of its state and a replay (see llama.Speculative and
// MTPSeq.Replayed).
//
// An MTP is not safe for concurrent use; it uses the target context (to
// read its hidden rows) and must be used by the target's user. Close frees
// its context.
type MTP struct {
	target, c *llama.Context
	opts      MTPOptions
	width     int
	batch     *llama.Batch
	seqs      []*MTPSeq
	first     []int // scratch of Decoded: by sequence, its first entry in the batch (-1: none)
	last      []int // and its last so far
	prev      []int // scratch of Decoded: by entry, the previous entry of its sequence (-1: none; replayed: a replayed entry)
	cand      []llama.TokenData
}

// replayed marks an entry of Decoded's batch that MTPSeq.Replayed passes
// over (in place of the previous entry's index).
const replayed = -2

// MTPSeq is one sequence's drafter of an MTP: a llama.Drafter (and
// llama.DraftBeginner) that drafts with the shared head. For
// llama.Context.Generate, pass the Seq of the generation's sequence: it
// is also a llama.DecodeWatcher, which Generate shows its batches.
type MTPSeq struct {
	m       *MTP
	seq     int
	pmin    float32
	fed     []llama.Token // tokens in the head's memory from position 0, where contiguous
	begin   []llama.Token // the prompt of the last Begin, applied at the next Decoded (begun)
	begun   bool
	pending []float32 // the target's hidden row of the sequence's last decoded token
	rows    []float32 // its hidden rows in the target's last batch
	nRows   int
	skip    int // Replayed: the sequence's first entries in the next batch shown to Decoded to pass over

	// DraftAll's state.
	draft         []llama.Token
	max, pos, idx int
	next          llama.Token
	done          bool
}

// NewMTP returns an MTP drafter for target's sequences. It turns on the
// target's hidden rows (llama.Context.SetHidden) and makes the MTP
// context: the target's model (or opts.Model) must carry MTP blocks and
// have been loaded with llama.ModelOptions.MTP. Blocks chained one per drafted token
// (Step 3.5's) and heads that share the target's memory (Gemma 4's
// assistants) are not supported.
func NewMTP(target *llama.Context, opts MTPOptions) (*MTP, error) {
	if target == nil {
		return nil, errorf(llama.CodeInvalid, "mtp", "nil target context")
	}
	m := target.Model()
	if opts.Model != nil && opts.Model != m {
		if err := CheckCompatible(m, opts.Model); err != nil {
			return nil, err
		}
		m = opts.Model
	}
	info, err := m.Info()
	if err != nil {
		return nil, err
	}
	switch {
	case info.MTPLayers == 0:
		return nil, errorf(llama.CodeUnsupported, "mtp", "the model has no MTP blocks")
	case info.MTPLayers > 1:
		return nil, errorf(llama.CodeUnsupported, "mtp", "%d chained MTP blocks are not supported", info.MTPLayers)
	}
	if opts.NMax <= 0 {
		opts.NMax = 3
	}
	opts.PMin = min(max(opts.PMin, 0), 1)
	co := opts.Context
	co.ContextSize, co.BatchSize, co.UBatchSize = target.Size(), target.BatchSize(), target.UBatchSize()
	co.Sequences, co.KVUnified, co.MTP = target.Sequences(), target.KVUnified(), true
	co.Embeddings = false
	if co.Threads <= 0 && co.ThreadsBatch <= 0 {
		// The head runs in step with the target: more threads than the
		// target's would only contend with it.
		co.Threads, co.ThreadsBatch = target.Threads()
	}
	c, err := m.NewContext(co)
	if err != nil {
		return nil, err
	}
	if err := c.SetHidden(true, false); err != nil {
		c.Close()
		return nil, err
	}
	if c.HiddenSize() != target.HiddenSize() {
		c.Close()
		return nil, errorf(llama.CodeInvalid, "mtp", "the head reads rows of %d values, the target's are %d", c.HiddenSize(), target.HiddenSize())
	}
	if err := target.SetHidden(true, true); err != nil {
		c.Close()
		return nil, err
	}
	d := &MTP{target: target, c: c, opts: opts, width: target.HiddenSize(), batch: llama.NewBatch(c.BatchSize(), 1)}
	d.seqs = make([]*MTPSeq, c.Sequences())
	for i := range d.seqs {
		d.seqs[i] = &MTPSeq{m: d, seq: i, pmin: opts.PMin, pending: make([]float32, d.width)}
	}
	d.first, d.last = make([]int, len(d.seqs)), make([]int, len(d.seqs))
	return d, nil
}

// Close frees the MTP context and turns the target's hidden rows off.
// It is idempotent.
func (d *MTP) Close() error {
	if d == nil || d.c == nil {
		return nil
	}
	err := d.c.Close()
	d.c = nil
	_ = d.target.SetHidden(false, false)
	return err
}

// Seq returns sequence seq's drafter; nil when seq is out of range.
func (d *MTP) Seq(seq int) *MTPSeq {
	if d == nil || seq < 0 || seq >= len(d.seqs) {
		return nil
	}
	return d.seqs[seq]
}

// Decoded shows the head a batch the target has just decoded: it decodes
// the batch's tokens in the MTP context, each with the target's hidden row
// of the token before it in its sequence, and keeps the rows for the
// drafts to come. What the head's memory held of a sequence from the
// batch's first position on is replaced. Batches of embeddings (media) are
// not shown, as in llama.cpp.
func (d *MTP) Decoded(ctx context.Context, b *llama.Batch) error {
	if d == nil || d.c == nil {
		return errorf(llama.CodeInvalid, "mtp", "closed or not made by NewMTP")
	}
	n := b.Len()
	if n == 0 {
		return nil
	}
	for i := range d.first {
		d.first[i], d.last[i] = -1, -1
	}
	d.prev = d.prev[:0]
	for i := range n {
		_, pos, seq := b.Token(i)
		if seq < 0 || seq >= len(d.seqs) {
			return errorf(llama.CodeInvalid, "mtp", "sequence %d out of range [0, %d)", seq, len(d.seqs))
		}
		if s := d.seqs[seq]; s.skip > 0 && d.first[seq] < 0 {
			// A replayed entry: the head holds it; the entry after it
			// takes its row.
			s.skip--
			d.prev = append(d.prev, replayed)
			d.last[seq] = i
			continue
		}
		if d.first[seq] < 0 {
			d.first[seq] = i
			if err := d.truncate(seq, pos); err != nil {
				return err
			}
			d.seqs[seq].nRows = 0
		}
		d.prev = append(d.prev, d.last[seq])
		d.last[seq] = i
	}
	// Each entry's row: the target's row of the entry before it in its
	// sequence, or for the first, the sequence's pending row.
	for lo := 0; lo < n; lo += d.batch.Cap() {
		hi := min(n, lo+d.batch.Cap())
		d.batch.Clear()
		for i := lo; i < hi; i++ {
			if d.prev[i] == replayed {
				continue
			}
			tok, pos, seq := b.Token(i)
			if err := d.batch.Add(tok, pos, seq, false); err != nil {
				return err
			}
			row := d.seqs[seq].pending
			if p := d.prev[i]; p >= 0 {
				var err error
				if row, err = d.target.Hidden(p); err != nil {
					return err
				}
			}
			if err := d.batch.SetHidden(d.batch.Len()-1, row); err != nil {
				return err
			}
		}
		if d.batch.Len() == 0 {
			continue
		}
		if err := d.c.Decode(ctx, d.batch); err != nil {
			for seq, f := range d.first {
				if f >= 0 {
					d.forget(seq)
				}
			}
			return err
		}
	}
	// Keep each sequence's first rows (a draft's check: the next draft
	// starts from the row of the last token the target accepts, at most
	// NMax in), its last row and its tokens.
	for i := range n {
		tok, pos, seq := b.Token(i)
		s := d.seqs[seq]
		if d.prev[i] == replayed {
			// The last replayed entry of a sequence with no other entry
			// gives it its pending row.
			if d.last[seq] == i {
				row, err := d.target.Hidden(i)
				if err != nil {
					return err
				}
				copy(s.pending, row)
				s.nRows = 0
			}
			continue
		}
		if pos == len(s.fed) {
			s.fed = append(s.fed, tok)
		}
		last := d.last[seq] == i
		if s.nRows > d.opts.NMax && !last {
			continue
		}
		row, err := d.target.Hidden(i)
		if err != nil {
			return err
		}
		if s.nRows <= d.opts.NMax {
			if s.nRows == 0 {
				s.rows = s.rows[:0]
			}
			s.rows = append(s.rows, row...)
			s.nRows++
		}
		if last {
			copy(s.pending, row)
		}
	}
	return nil
}

// truncate readies sequence seq of the head's memory for tokens from
// position pos: what it holds from pos on goes, and when it then does not
// end right before pos (positions the head never saw: the target's memory
// was restored, or shifted), all of it goes, since llama.cpp takes a
// sequence's tokens only in order from its last position or into an empty
// memory.
func (d *MTP) truncate(seq, pos int) error {
	want := pos
	s := d.seqs[seq]
	mem := d.c.Memory()
	if s.begun {
		s.begun = false
		pos = min(pos, commonPrefix(s.fed, s.begin))
	}
	if _, err := mem.Remove(seq, pos, -1); err != nil {
		return err
	}
	s.fed = s.fed[:min(len(s.fed), pos)]
	if _, hi, err := mem.PosRange(seq); err != nil || hi < 0 || hi == want-1 {
		return err
	}
	_, err := mem.Remove(seq, 0, -1)
	s.fed = s.fed[:0]
	return err
}

// forget empties sequence seq in the head's memory.
func (d *MTP) forget(seq int) {
	s := d.seqs[seq]
	_, _ = d.c.Memory().Remove(seq, 0, -1)
	s.fed, s.nRows, s.begun = s.fed[:0], 0, false
	clear(s.pending)
}

// MTPRequest is one sequence's part of DraftAll: its drafter, the
// sequence's tokens so far (the last not yet decoded by the target) and
// the most tokens to draft; on return, its draft.
type MTPRequest struct {
	Seq     *MTPSeq
	History []llama.Token
	Max     int
	Draft   []llama.Token // set by DraftAll
}

// DraftAll drafts for several sequences at once, with one decode of the
// MTP context per drafted position holding every sequence still drafting,
// as llama-server drafts for its slots. Each request's history must end
// with the token the target decodes next, after the tokens shown to
// Decoded. A nil request or one without a Seq is skipped. An error leaves
// every request without a draft.
func (d *MTP) DraftAll(ctx context.Context, reqs []*MTPRequest) error {
	if d == nil || d.c == nil {
		return errorf(llama.CodeInvalid, "mtp", "closed or not made by NewMTP")
	}
	b := d.batch
	b.Clear()
	var active []*MTPSeq
	for _, r := range reqs {
		if r == nil {
			continue
		}
		r.Draft = nil
		s := r.Seq
		if s == nil {
			continue
		}
		if s.m != d {
			return errorf(llama.CodeInvalid, "mtp", "a sequence of another MTP")
		}
		if s.max = min(r.Max, d.opts.NMax, d.c.SeqSize()-len(r.History)); len(r.History) == 0 || s.max <= 0 {
			continue
		}
		for _, o := range active {
			if o == s {
				return errorf(llama.CodeInvalid, "mtp", "sequence %d drafted twice", s.seq)
			}
		}
		if b.Len() == b.Cap() {
			break
		}
		s.draft, s.done = s.draft[:0], false
		s.pos, s.next = len(r.History)-1, r.History[len(r.History)-1]
		// The head's memory past the target's (a rejected draft's tail)
		// goes: the draft decodes from the next position.
		if err := d.truncate(s.seq, s.pos); err != nil {
			return err
		}
		s.idx = b.Len()
		if err := b.Add(s.next, s.pos, s.seq, true); err != nil {
			return err
		}
		if err := b.SetHidden(s.idx, s.pending); err != nil {
			return err
		}
		active = append(active, s)
	}
	err := d.draftSteps(ctx, active)
	for _, r := range reqs {
		if r == nil || r.Seq == nil || err != nil {
			continue
		}
		// Only a sequence that drafted now has a draft: one skipped (no
		// room, Max 0, the batch full) still holds its last call's.
		if s := r.Seq; slices.Contains(active, s) && len(s.draft) >= d.opts.NMin {
			r.Draft = append(r.Draft[:0], s.draft...)
		}
	}
	// The drafted positions leave the head's memory when the target's
	// batch with the draft is shown to Decoded.
	return err
}

// draftSteps decodes the batch DraftAll built, then one batch per drafted
// position.
func (d *MTP) draftSteps(ctx context.Context, active []*MTPSeq) error {
	b := d.batch
	for b.Len() > 0 {
		if err := d.c.Decode(ctx, b); err != nil {
			for _, s := range active {
				s.draft = s.draft[:0]
			}
			return err
		}
		b.Clear()
		for _, s := range active {
			if s.done {
				continue
			}
			logits, err := d.c.Logits(s.idx)
			if err != nil {
				return err
			}
			tok, p := best10(&d.cand, logits)
			if p < s.pmin {
				s.done = true
				continue
			}
			s.draft = append(s.draft, tok)
			if len(s.draft) >= s.max {
				s.done = true
				continue
			}
			row, err := d.c.Hidden(s.idx)
			if err != nil {
				return err
			}
			s.pos++
			s.next = tok
			s.idx = b.Len()
			if err := b.Add(tok, s.pos, s.seq, true); err != nil {
				return err
			}
			if err := b.SetHidden(s.idx, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetPMin changes the sequence's PMin for the following drafts (a
// server's per-request speculative.p_min); values outside [0, 1] are
// clamped.
func (s *MTPSeq) SetPMin(p float32) {
	s.pmin = min(max(p, 0), 1)
}

// Draft implements llama.Drafter: DraftAll with this one request.
func (s *MTPSeq) Draft(ctx context.Context, history []llama.Token, max int) ([]llama.Token, error) {
	if s == nil || s.m == nil {
		return nil, errorf(llama.CodeInvalid, "mtp", "not made by NewMTP")
	}
	r := MTPRequest{Seq: s, History: history, Max: max}
	if err := s.m.DraftAll(ctx, []*MTPRequest{&r}); err != nil {
		return nil, err
	}
	return r.Draft, nil
}

// Replayed says that the sequence's first n entries in the next batch
// shown to Decoded are tokens the head has seen already: the target
// decodes them again after its memory went back to a checkpoint taken
// before a draft, when the draft was partly rejected (the kept tokens,
// which Accepted was told of). Decoded passes over them, and the entry
// after them takes the target's row of the last of them.
func (s *MTPSeq) Replayed(n int) {
	if s != nil {
		s.skip = max(n, 0)
	}
}

// Accepted implements llama.Drafter: the next draft starts from the
// target's hidden row of the last accepted token.
func (s *MTPSeq) Accepted(n int) {
	if s == nil || s.nRows == 0 {
		return
	}
	i := min(max(n, 0), s.nRows-1)
	copy(s.pending, s.rows[i*len(s.pending):(i+1)*len(s.pending)])
}

// Begin implements llama.DraftBeginner: what the head's memory holds of
// the sequence past its common prefix with prompt is forgotten at the next
// Decoded of the sequence (another conversation's tokens, when the
// target's memory was restored from a slot file, say). Until then it stays,
// so that a prompt cache saving the sequence (State) gets all of it.
func (s *MTPSeq) Begin(prompt []llama.Token) {
	if s == nil {
		return
	}
	s.begin = append(s.begin[:0], prompt...)
	s.begun = true
}

// State returns the head's memory of the sequence, for SetState to bring
// back with the target's (a prompt cache, as llama-server's).
func (s *MTPSeq) State() ([]byte, error) {
	if s == nil || s.m == nil || s.m.c == nil {
		return nil, errorf(llama.CodeInvalid, "mtp", "closed or not made by NewMTP")
	}
	return s.m.c.SeqState(s.seq)
}

// SetState replaces the head's memory of the sequence with a State saved
// when the target's memory held tokens, which it holds again. The row the
// next batch starts from stays the sequence's last, as in llama.cpp.
func (s *MTPSeq) SetState(data []byte, tokens []llama.Token) error {
	if s == nil || s.m == nil || s.m.c == nil {
		return errorf(llama.CodeInvalid, "mtp", "closed or not made by NewMTP")
	}
	mem := s.m.c.Memory()
	s.fed = s.fed[:0]
	if _, err := mem.Remove(s.seq, 0, -1); err != nil {
		return err
	}
	if err := s.m.c.SetSeqState(s.seq, data); err != nil {
		_, _ = mem.Remove(s.seq, 0, -1)
		return err
	}
	// Past the tokens (a draft's tail when it was saved) it holds nothing
	// of this sequence.
	if _, err := mem.Remove(s.seq, len(tokens), -1); err != nil {
		return err
	}
	lo, hi, err := mem.PosRange(s.seq)
	if err != nil {
		return err
	}
	if lo == 0 {
		s.fed = append(s.fed, tokens[:hi+1]...)
	}
	return nil
}

// Remove and Shift make the same change to the head's memory of the
// sequence as llama.Memory's Remove and Shift to the target's (a context
// shift, llama.cpp's cache reuse), as llama-server edits both memories
// together, so that the head keeps what it saw where the target does.
func (s *MTPSeq) Remove(p0, p1 int) error {
	if s == nil || s.m == nil || s.m.c == nil {
		return errorf(llama.CodeInvalid, "mtp", "closed or not made by NewMTP")
	}
	if _, err := s.m.c.Memory().Remove(s.seq, p0, p1); err != nil {
		return err
	}
	p0 = max(p0, 0)
	if p1 < 0 || p1 >= len(s.fed) {
		s.fed = s.fed[:min(len(s.fed), p0)]
		return nil
	}
	for i := p0; i < p1; i++ {
		s.fed[i] = llama.NoToken
	}
	return nil
}

// Shift: see Remove.
func (s *MTPSeq) Shift(p0, p1, delta int) error {
	if s == nil || s.m == nil || s.m.c == nil {
		return errorf(llama.CodeInvalid, "mtp", "closed or not made by NewMTP")
	}
	if err := s.m.c.Memory().Shift(s.seq, p0, p1, delta); err != nil {
		return err
	}
	p0 = max(p0, 0)
	if p1 < 0 || p1 > len(s.fed) {
		p1 = len(s.fed)
	}
	if p0 >= p1 || delta == 0 {
		return nil
	}
	moved := slices.Clone(s.fed[p0:p1])
	for i := p0; i < p1; i++ {
		s.fed[i] = llama.NoToken
	}
	for i, t := range moved {
		switch j := p0 + i + delta; {
		case j < 0:
		case j < len(s.fed):
			s.fed[j] = t
		default:
			for len(s.fed) < j {
				s.fed = append(s.fed, llama.NoToken)
			}
			s.fed = append(s.fed, t)
		}
	}
	for len(s.fed) > 0 && s.fed[len(s.fed)-1] == llama.NoToken {
		s.fed = s.fed[:len(s.fed)-1]
	}
	return nil
}

// Copy makes sequence dst's memory of the head a copy of src's, as
// llama.Memory's Copy of a whole sequence does the target's.
func (d *MTP) Copy(src, dst int) error {
	if d == nil || d.c == nil {
		return errorf(llama.CodeInvalid, "mtp", "closed or not made by NewMTP")
	}
	if src < 0 || src >= len(d.seqs) || dst < 0 || dst >= len(d.seqs) {
		return errorf(llama.CodeInvalid, "mtp", "sequence %d or %d out of range [0, %d)", src, dst, len(d.seqs))
	}
	mem := d.c.Memory()
	if _, err := mem.Remove(dst, 0, -1); err != nil {
		return err
	}
	if err := mem.Copy(src, dst, 0, -1); err != nil {
		d.forget(dst)
		return err
	}
	d.seqs[dst].fed = append(d.seqs[dst].fed[:0], d.seqs[src].fed...)
	return nil
}

// Reset forgets the sequence: the head's memory of it and its rows.
func (s *MTPSeq) Reset() {
	if s != nil && s.m != nil && s.m.c != nil {
		s.m.forget(s.seq)
	}
}
