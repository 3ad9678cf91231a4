package llama

import (
	"unsafe"

	"github.com/x/llama/internal/capi"
)

// Batch is a reusable set of tokens to decode, for one or several sequences
// at once: each entry has a token, a position, the sequences it belongs to
// and whether its logits (or embeddings) are wanted.
//
// A Batch is Go memory, allocated once by NewBatch; adding tokens does not
// allocate, and Decode passes it to llama.cpp without copying. A Batch is
// not safe for concurrent use; it needs no Close. Methods on a nil *Batch
// return errors matching ErrInvalid (or zero values), as Decode does.
type Batch struct {
	tokens []int32
	pos    []int32
	nSeq   []int32
	seqPtr []uintptr // one pointer per entry into seqIDs
	seqIDs []int32   // maxSeq ids per entry
	output []int8
	maxSeq int
	n      int
	// hidden holds a row of width floats per entry (SetHidden), for an
	// MTP context; nil until the first SetHidden.
	hidden []float32
	width  int
}

// NewBatch returns an empty batch for up to capacity tokens, each in up to
// maxSeqPerToken sequences (at least 1).
func NewBatch(capacity, maxSeqPerToken int) *Batch {
	capacity = max(capacity, 1)
	maxSeqPerToken = max(maxSeqPerToken, 1)
	b := &Batch{
		tokens: make([]int32, capacity),
		pos:    make([]int32, capacity),
		nSeq:   make([]int32, capacity),
		seqPtr: make([]uintptr, capacity),
		seqIDs: make([]int32, capacity*maxSeqPerToken),
		output: make([]int8, capacity),
		maxSeq: maxSeqPerToken,
	}
	for i := range b.seqPtr {
		b.seqPtr[i] = uintptr(unsafe.Pointer(&b.seqIDs[i*maxSeqPerToken]))
	}
	return b
}

// Len returns the number of tokens in the batch.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Cap returns the batch's capacity.
func (b *Batch) Cap() int {
	if b == nil {
		return 0
	}
	return len(b.tokens)
}

// Clear empties the batch for reuse.
func (b *Batch) Clear() {
	if b != nil {
		b.n = 0
	}
}

// Add appends a token at position pos of sequence seq; output asks for its
// logits (or embeddings). It fails when the batch is full or an argument is
// negative (NoToken among them); Decode checks the rest against the
// context (a token past the vocabulary, say).
func (b *Batch) Add(t Token, pos int, seq int, output bool) error {
	if b == nil {
		return errorf(CodeInvalid, "batch add", "nil *Batch")
	}
	if b.n >= len(b.tokens) {
		return errorf(CodeInvalid, "batch add", "batch is full (%d tokens)", len(b.tokens))
	}
	if t < 0 {
		return errorf(CodeInvalid, "batch add", "negative token %d", t)
	}
	if pos < 0 || pos > 1<<30 || seq < 0 || seq > 1<<20 {
		return errorf(CodeInvalid, "batch add", "bad position %d or sequence %d", pos, seq)
	}
	i := b.n
	b.tokens[i] = int32(t)
	b.pos[i] = int32(pos)
	b.nSeq[i] = 1
	b.seqIDs[i*b.maxSeq] = int32(seq)
	b.output[i] = 0
	if output {
		b.output[i] = 1
	}
	b.n++
	return nil
}

// AddShared appends a token that belongs to several sequences at once
// (a shared prompt prefix, say).
func (b *Batch) AddShared(t Token, pos int, seqs []int, output bool) error {
	if b == nil {
		return errorf(CodeInvalid, "batch add", "nil *Batch")
	}
	if len(seqs) == 0 || len(seqs) > b.maxSeq {
		return errorf(CodeInvalid, "batch add", "%d sequences for one token, batch allows 1 to %d", len(seqs), b.maxSeq)
	}
	if err := b.Add(t, pos, seqs[0], output); err != nil {
		return err
	}
	i := b.n - 1
	for k, s := range seqs {
		if s < 0 || s > 1<<20 {
			b.n--
			return errorf(CodeInvalid, "batch add", "bad sequence %d", s)
		}
		b.seqIDs[i*b.maxSeq+k] = int32(s)
	}
	b.nSeq[i] = int32(len(seqs))
	return nil
}

// AddSequence appends tokens at consecutive positions from pos in sequence
// seq, asking for the output of the last one only when lastOutput is set.
func (b *Batch) AddSequence(tokens []Token, pos int, seq int, lastOutput bool) error {
	if b == nil {
		return errorf(CodeInvalid, "batch add", "nil *Batch")
	}
	if b.n+len(tokens) > len(b.tokens) {
		return errorf(CodeInvalid, "batch add", "%d tokens do not fit: %d of %d used", len(tokens), b.n, len(b.tokens))
	}
	for i, t := range tokens {
		if err := b.Add(t, pos+i, seq, lastOutput && i == len(tokens)-1); err != nil {
			return err
		}
	}
	return nil
}

// SetOutput changes whether entry i's output is wanted.
func (b *Batch) SetOutput(i int, output bool) {
	if b != nil && i >= 0 && i < b.n {
		b.output[i] = 0
		if output {
			b.output[i] = 1
		}
	}
}

// SetHidden sets entry i's hidden row: what a context made with
// ContextOptions.MTP reads beside the token, the target model's hidden
// state for the position before (Context.Hidden). Every row of a batch has
// the width of the first one set (the model's embedding size); a row not
// set since the batch was made holds zeros, and Clear keeps the rows. Only
// an MTP context decodes a batch with hidden rows.
func (b *Batch) SetHidden(i int, row []float32) error {
	switch {
	case b == nil:
		return errorf(CodeInvalid, "batch hidden", "nil *Batch")
	case i < 0 || i >= b.n:
		return errorf(CodeInvalid, "batch hidden", "entry %d out of range [0, %d)", i, b.n)
	case len(row) == 0 || b.width > 0 && len(row) != b.width:
		return errorf(CodeInvalid, "batch hidden", "row of %d values, want %d", len(row), max(b.width, 1))
	case len(row) > 1<<20:
		return errorf(CodeInvalid, "batch hidden", "row of %d values", len(row))
	}
	if b.hidden == nil {
		b.width = len(row)
		b.hidden = make([]float32, len(b.tokens)*b.width)
	}
	copy(b.hidden[i*b.width:], row)
	return nil
}

// Token returns entry i's token, position and first sequence; NoToken and
// -1s when i is out of range (or b is nil).
func (b *Batch) Token(i int) (t Token, pos, seq int) {
	if b == nil || i < 0 || i >= b.n {
		return NoToken, -1, -1
	}
	return Token(b.tokens[i]), int(b.pos[i]), int(b.seqIDs[i*b.maxSeq])
}

// c returns the C view of the batch; b must stay reachable during the call.
func (b *Batch) c() capi.Batch {
	var embd uintptr
	if b.hidden != nil {
		embd = uintptr(unsafe.Pointer(&b.hidden[0]))
	}
	return capi.Batch{
		Embd:    embd,
		NTokens: int32(b.n),
		Token:   uintptr(unsafe.Pointer(&b.tokens[0])),
		Pos:     uintptr(unsafe.Pointer(&b.pos[0])),
		NSeqID:  uintptr(unsafe.Pointer(&b.nSeq[0])),
		SeqID:   uintptr(unsafe.Pointer(&b.seqPtr[0])),
		Logits:  uintptr(unsafe.Pointer(&b.output[0])),
	}
}
