package llama

import (
	"math"

	"github.com/x/llama/internal/capi"
)

// KV memory.

// Memory is the view of a Context's KV memory: the operations on its
// sequences and the positions they hold (llama.cpp's llama_memory_*
// functions). Get it with Context.Memory; it holds no state of its own,
// and its methods follow the Context's rules: not safe for concurrent use
// with the Context's other calls (ErrBusy), ErrClosed after Close, and a
// sequence outside [0, Sequences()) is an error matching ErrInvalid. The
// snapshots of a sequence's state (SeqState, SaveSeqFile) stay on Context
// with the whole context's.
//
// A windowed cache (Context.SlidingWindow > 0: a model with sliding-window
// layers, without ContextOptions.SWAFull) keeps those layers' entries for
// about the last window of each sequence only, and overwrites older ones
// as the sequence grows. What needs the entries it dropped is refused
// with an error matching ErrUnsupported, before llama.cpp is called,
// instead of leaving a sequence whose next decode reads the wrong
// entries:
//   - removing a middle span [p0, p1) (p0 > 0, p1 inside the sequence):
//     closing the gap would need the entries the window let go;
//   - removing a tail [p0, end) (p0 > 0) when the window no longer holds
//     the positions before p0 that the next token at p0 attends to
//     (PosRange's lo is past p0 - window + 1); decode the sequence again
//     from 0, or restore a partial state taken earlier
//     (Context.SeqStatePartial) first. This holds for a full-size cache
//     too after SetSeqState or LoadSeqFile: llama.cpp saves a sequence's
//     sliding-window entries for its last window only;
//   - shifting or dividing positions (Shift, Divide; CanShift is false).
//
// Removing a whole sequence, a head [0, p1) or a tail the window still
// covers works as with a full cache (speculative decoding's rollback of
// rejected draft tokens is such a tail).
type Memory struct {
	c *Context
}

// Memory returns the view of c's KV memory. A view of a nil *Context
// returns errors matching ErrInvalid.
func (c *Context) Memory() Memory { return Memory{c} }

func (c *Context) seqOK(op string, seq int, allowAll bool) error {
	if (allowAll && seq == -1) || (seq >= 0 && seq < c.nSeqMax) {
		return nil
	}
	return errorf(CodeInvalid, op, "sequence %d out of range [0, %d)", seq, c.nSeqMax)
}

// Clear empties the KV memory of every sequence.
func (m Memory) Clear() error {
	c := m.c
	if err := c.lock("clear memory"); err != nil {
		return err
	}
	defer c.unlock()
	// Clearing the data reaches the workers' buffers with RPC devices.
	return c.model.rpcGuard("clear memory", func() { capi.MemoryClear(c.mem, true) })
}

// Remove removes positions [p0, p1) of seq (-1: every sequence; p1 < 0:
// to the end). It returns false when the memory cannot remove a part of a
// sequence: a recurrent state (Mamba, RWKV; the recurrent half of a hybrid
// model) holds no entry per token, so it cannot forget a tail beyond the
// snapshots ContextOptions.RecurrentSnapshots keeps (restore a partial
// state taken earlier, Context.SeqStatePartial, or decode again from 0).
// A middle span leaves a recurrent state as it is and reports true, as
// llama.cpp does: the state still carries what the span said, which is
// what context shift wants and nothing else should rely on. With a
// windowed cache, a middle span or a tail the window no longer covers is
// an error matching ErrUnsupported (see Memory).
func (m Memory) Remove(seq, p0, p1 int) (bool, error) {
	c := m.c
	if err := c.acquire("remove tokens"); err != nil {
		return false, err
	}
	defer c.release()
	return c.removeTokens(seq, p0, p1)
}

// RollbackLimit returns the most tokens Remove can take back from the
// tail of a sequence: -1 for no limit (a memory of attention entries), or
// for a recurrent or hybrid model the recurrent-state snapshots the
// context keeps (ContextOptions.RecurrentSnapshots where the architecture
// supports them, else 0). Beyond it, take a partial state
// (Context.SeqStatePartial) before the tokens go in, restore it, and
// decode the tokens to keep again: what Generate does with drafts.
func (m Memory) RollbackLimit() int {
	if m.c == nil {
		return 0
	}
	return m.c.nRollback
}

func (c *Context) removeTokens(seq, p0, p1 int) (bool, error) {
	if err := c.lockMu("remove tokens"); err != nil {
		return false, err
	}
	defer c.mu.Unlock()
	if err := c.seqOK("remove tokens", seq, true); err != nil {
		return false, err
	}
	if err := c.windowRemoveOK(seq, p0, p1); err != nil {
		return false, err
	}
	var ok bool
	err := c.model.rpcGuard("remove tokens", func() { ok = capi.MemorySeqRm(c.mem, int32(seq), clampPos(p0), clampPos(p1)) })
	return ok, err
}

// windowRemoveOK refuses a removal of [p0, p1) from seq (-1: all) that
// would leave a sequence whose sliding-window layers lack the entries its
// next token needs: with a windowed cache a middle span, and with any
// cache of a model with sliding-window layers a tail the window no longer
// covers (a full-size cache too holds only the last window of a sequence
// state it restored: llama.cpp saves no more). c.mu is held.
func (c *Context) windowRemoveOK(seq, p0, p1 int) error {
	w := c.nSwaModel
	if w == 0 || p0 <= 0 {
		return nil
	}
	if p1 >= 0 && p1 <= p0 {
		return nil // an empty span
	}
	seqs := []int{seq}
	if seq == -1 {
		seqs = seqs[:0]
		for i := range c.nSeqMax {
			seqs = append(seqs, i)
		}
	}
	for _, q := range seqs {
		lo := int(capi.MemorySeqPosMin(c.mem, int32(q)))
		hi := int(capi.MemorySeqPosMax(c.mem, int32(q)))
		if lo < 0 || p0 > hi {
			continue // empty, or nothing of it in the span
		}
		if p1 >= 0 && p1 <= hi {
			if c.nSwa == 0 {
				continue // a full-size cache removes any span
			}
			return errorf(CodeUnsupported, "remove tokens",
				"sequence %d: a windowed KV cache (sliding window %d) cannot remove the middle span [%d, %d) of [%d, %d] (set ContextOptions.SWAFull for that)", q, w, p0, p1, lo, hi)
		}
		if lo > max(0, p0-w+1) {
			return errorf(CodeUnsupported, "remove tokens",
				"sequence %d: the sliding-window layers (window %d) hold positions from %d only, and a sequence cut at %d would need them from %d: decode it again from 0, or restore an earlier partial state", q, w, lo, p0, max(0, p0-w+1))
		}
	}
	return nil
}

func clampPos(p int) int32 {
	if p < 0 {
		return -1
	}
	return int32(min(p, math.MaxInt32))
}

// Copy copies positions [p0, p1) of src to dst (p1 < 0: to the end),
// sharing the cells with KVUnified. Without KVUnified each sequence has a
// KV buffer of its own, and llama.cpp copies only whole buffers: then p0
// must be 0 or negative and p1 negative (the whole sequence; remove the
// tail afterwards with Remove), else the error matches ErrUnsupported
// (llama.cpp would abort the process).
func (m Memory) Copy(src, dst, p0, p1 int) error {
	c := m.c
	if err := c.lock("copy tokens"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("copy tokens", src, false); err != nil {
		return err
	}
	if err := c.seqOK("copy tokens", dst, false); err != nil {
		return err
	}
	if !c.kvUnified && c.nSeqMax > 1 && src != dst && (p0 > 0 || p1 >= 0) {
		return errorf(CodeUnsupported, "copy tokens",
			"a part [%d, %d) of a sequence cannot be copied without KVUnified: copy the whole sequence (0, -1)", p0, p1)
	}
	if src == dst {
		return nil
	}
	// Without KVUnified the copy reaches the buffers (the workers' too).
	return c.model.rpcGuard("copy tokens", func() {
		capi.MemorySeqCp(c.mem, int32(src), int32(dst), clampPos(p0), clampPos(p1))
	})
}

// Keep removes every sequence but seq.
func (m Memory) Keep(seq int) error {
	c := m.c
	if err := c.lock("keep sequence"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("keep sequence", seq, false); err != nil {
		return err
	}
	return c.model.rpcGuard("keep sequence", func() { capi.MemorySeqKeep(c.mem, int32(seq)) })
}

// Shift adds delta to the positions [p0, p1) of seq (-1: every
// sequence), for a context shift. A memory that cannot shift positions
// (CanShift; a windowed cache cannot) is an error matching ErrUnsupported.
func (m Memory) Shift(seq, p0, p1, delta int) error {
	c := m.c
	if err := c.lock("shift tokens"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("shift tokens", seq, true); err != nil {
		return err
	}
	if !capi.MemoryCanShift(c.mem) {
		return errorf(CodeUnsupported, "shift tokens", "this model's memory cannot shift positions")
	}
	if delta < -math.MaxInt32/2 || delta > math.MaxInt32/2 {
		return errorf(CodeInvalid, "shift tokens", "delta %d out of range", delta)
	}
	return c.model.rpcGuard("shift tokens", func() {
		capi.MemorySeqAdd(c.mem, int32(seq), clampPos(p0), clampPos(p1), int32(delta))
	})
}

// Divide divides the positions [p0, p1) of seq (-1: every sequence) by d
// (> 1), for self-extend. A memory that cannot shift positions (CanShift)
// is an error matching ErrUnsupported.
func (m Memory) Divide(seq, p0, p1, d int) error {
	c := m.c
	if err := c.lock("divide tokens"); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK("divide tokens", seq, true); err != nil {
		return err
	}
	if d < 1 || d > math.MaxInt32 {
		return errorf(CodeInvalid, "divide tokens", "divisor %d must be at least 1", d)
	}
	if !capi.MemoryCanShift(c.mem) {
		return errorf(CodeUnsupported, "divide tokens", "this model's memory cannot shift positions")
	}
	return c.model.rpcGuard("divide tokens", func() {
		capi.MemorySeqDiv(c.mem, int32(seq), clampPos(p0), clampPos(p1), int32(d))
	})
}

// PosRange returns the smallest and largest position of seq in memory;
// both are -1 when the sequence is empty.
func (m Memory) PosRange(seq int) (lo, hi int, err error) {
	c := m.c
	if err := c.acquire("pos range"); err != nil {
		return -1, -1, err
	}
	defer c.release()
	return c.posRange(seq)
}

func (c *Context) posRange(seq int) (lo, hi int, err error) {
	if err := c.lockMu("pos range"); err != nil {
		return -1, -1, err
	}
	defer c.mu.Unlock()
	if err := c.seqOK("pos range", seq, false); err != nil {
		return -1, -1, err
	}
	return int(capi.MemorySeqPosMin(c.mem, int32(seq))), int(capi.MemorySeqPosMax(c.mem, int32(seq))), nil
}

// CanShift reports whether the memory can shift positions (Shift and
// Divide); false also when the Context is nil, closed or in use.
func (m Memory) CanShift() bool {
	c := m.c
	if c.lock("can shift") != nil {
		return false
	}
	defer c.unlock()
	return capi.MemoryCanShift(c.mem)
}
