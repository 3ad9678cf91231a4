package llama

import (
	"encoding/binary"
	"io"
	"os"
	"slices"
	"unsafe"

	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/seqstate"
)

// State.

// State returns the whole context state (KV memory, outputs, RNG).
func (c *Context) State() ([]byte, error) {
	if err := c.lock("state"); err != nil {
		return nil, err
	}
	defer c.unlock()
	var buf []byte
	err := c.model.rpcGuard("state", func() {
		n := capi.StateGetSize(c.ptr)
		buf = make([]byte, n)
		if n > 0 {
			buf = buf[:capi.StateGetData(c.ptr, unsafe.Pointer(&buf[0]), n)]
		}
	})
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// SetState restores a state returned by State.
func (c *Context) SetState(data []byte) error {
	if err := c.lock("set state"); err != nil {
		return err
	}
	defer c.unlock()
	if len(data) == 0 {
		return errorf(CodeInvalid, "set state", "empty state")
	}
	if err := c.model.rpcFailed("set state"); err != nil {
		return err
	}
	if !plausibleArch(data[:min(4, len(data))], int64(len(data))) {
		return errorf(CodeLoad, "set state", "the state does not start with a model architecture's name")
	}
	var n uintptr
	if err := c.model.rpcGuard("set state", func() {
		n = capi.StateSetData(c.ptr, unsafe.Pointer(&data[0]), uintptr(len(data)))
	}); err != nil {
		return err
	}
	if n == 0 {
		return errorf(CodeLoad, "set state", "llama.cpp rejected the state data")
	}
	c.nOut = 0
	return nil
}

// SeqState returns the state of one sequence.
func (c *Context) SeqState(seq int) ([]byte, error) {
	return c.seqState("seq state", nil, seq, 0)
}

// SetSeqState restores a sequence state into seq (which should be empty).
func (c *Context) SetSeqState(seq int, data []byte) error {
	return c.setSeqState("set seq state", seq, data, 0, "the sequence state")
}

// seqState returns seq's state as llama.cpp's state_seq_get_data_ext
// with flags gives it (llama.cpp's plain calls are flags 0).
func (c *Context) seqState(op string, dst []byte, seq int, flags uint32) ([]byte, error) {
	if err := c.acquire(op); err != nil {
		return nil, err
	}
	defer c.release()
	return c.seqStateHeld(op, dst, seq, flags)
}

// seqStateHeld is seqState for a caller that holds the context
// (Generate). The state is appended to dst.
func (c *Context) seqStateHeld(op string, dst []byte, seq int, flags uint32) ([]byte, error) {
	if err := c.lockMu(op); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if err := c.seqOK(op, seq, false); err != nil {
		return nil, err
	}
	out := dst
	err := c.model.rpcGuard(op, func() {
		n := capi.StateSeqGetSizeExt(c.ptr, int32(seq), flags)
		out = slices.Grow(dst, int(n))
		if n > 0 {
			buf := out[len(dst) : len(dst)+int(n)]
			out = out[:len(dst)+int(capi.StateSeqGetDataExt(c.ptr, unsafe.Pointer(&buf[0]), n, int32(seq), flags))]
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// setSeqState restores data into seq with llama.cpp's
// state_seq_set_data_ext and flags; what names the state in the error of
// data llama.cpp rejects.
func (c *Context) setSeqState(op string, seq int, data []byte, flags uint32, what string) error {
	if err := c.acquire(op); err != nil {
		return err
	}
	defer c.release()
	return c.setSeqStateHeld(op, seq, data, flags, what)
}

// setSeqStateHeld is setSeqState for a caller that holds the context.
func (c *Context) setSeqStateHeld(op string, seq int, data []byte, flags uint32, what string) error {
	if err := c.lockMu(op); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := c.seqOK(op, seq, false); err != nil {
		return err
	}
	if len(data) == 0 {
		return errorf(CodeInvalid, op, "empty state")
	}
	if err := c.model.rpcFailed(op); err != nil {
		return err
	}
	if !c.layoutFor(flags).CheckBytes(data, c.nCtx, c.nCtx) {
		return errorf(CodeLoad, op, "%s does not fit this context: a cell count or a size is wrong", what)
	}
	var n uintptr
	if err := c.model.rpcGuard(op, func() {
		n = capi.StateSeqSetDataExt(c.ptr, unsafe.Pointer(&data[0]), uintptr(len(data)), int32(seq), flags)
	}); err != nil {
		return err
	}
	if n == 0 {
		return errorf(CodeLoad, op, "llama.cpp rejected %s", what)
	}
	return nil
}

// layoutFor is the layout of the sequence states read with flags.
func (c *Context) layoutFor(flags uint32) seqstate.Layout {
	if flags&capi.StateSeqFlagsPartialOnly != 0 {
		return c.seqLayoutPartial
	}
	return c.seqLayout
}

// emptySeqState is the state of sequence seq of a context whose sequences
// are all empty (read as NewContext makes it), which tells the layout of
// its states.
func emptySeqState(ptr capi.Context, flags uint32) []byte {
	n := capi.StateSeqGetSizeExt(ptr, 0, flags)
	if n == 0 || n > 1<<20 {
		return nil
	}
	buf := make([]byte, n)
	return buf[:capi.StateSeqGetDataExt(ptr, unsafe.Pointer(&buf[0]), n, 0, flags)]
}

// checkSeqFile checks a sequence file's token count and state before
// llama.cpp reads it (see seqstate): the file is walked, not read whole.
func (c *Context) checkSeqFile(path string) error {
	return c.checkFile("load seq", path, func(state *io.SectionReader) bool {
		return c.seqLayout.Check(state, state.Size(), c.nCtx, c.nCtx)
	})
}

// checkStateFile checks a state file's token count and the length of the
// architecture's name that starts its state before llama.cpp reads it.
func (c *Context) checkStateFile(path string) error {
	return c.checkFile("load state", path, func(state *io.SectionReader) bool {
		var w [4]byte
		_, err := state.ReadAt(w[:], 0)
		return err == nil && plausibleArch(w[:], state.Size())
	})
}

// checkFile opens a state or sequence file (magic, version, token count,
// tokens, then the state), checks that its token count fits the context,
// and hands its state to stateOK.
func (c *Context) checkFile(op, path string, stateOK func(*io.SectionReader) bool) error {
	if err := c.model.rpcFailed(op); err != nil {
		return err
	}
	// A FIFO or a device is refused before it is opened: opening a FIFO
	// waits for a writer.
	if st, err := os.Stat(path); err != nil {
		return &Error{Code: CodeLoad, Op: op, Err: err}
	} else if !st.Mode().IsRegular() {
		return errorf(CodeLoad, op, "%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return &Error{Code: CodeLoad, Op: op, Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return &Error{Code: CodeLoad, Op: op, Err: err}
	}
	if !st.Mode().IsRegular() {
		return errorf(CodeLoad, op, "%s is not a regular file", path)
	}
	var hdr [12]byte // magic, version, token count
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return errorf(CodeLoad, op, "%s is not a state file: too short", path)
	}
	nTok := int64(binary.LittleEndian.Uint32(hdr[8:]))
	if nTok > int64(c.nCtx) {
		return errorf(CodeLoad, op, "%s holds %d tokens, more than the context's %d", path, nTok, c.nCtx)
	}
	off := 12 + 4*nTok
	if off >= st.Size() || !stateOK(io.NewSectionReader(f, off, st.Size()-off)) {
		return errorf(CodeLoad, op, "%s does not fit this context: a cell count or a size is wrong", path)
	}
	return nil
}

// plausibleArch reports whether a whole state of size bytes can start
// with w, the length of the model architecture's name: llama.cpp
// allocates and zeroes that length before it reads the name (4 GB for
// 0xFFFFFFFF).
func plausibleArch(w []byte, size int64) bool {
	if len(w) < 4 {
		return false
	}
	n := int64(binary.LittleEndian.Uint32(w))
	return n <= 256 && 4+n <= size
}

func tokPtr(t []Token) unsafe.Pointer {
	if len(t) == 0 {
		return nil
	}
	return unsafe.Pointer(&t[0])
}

// SeqStatePartial returns the part of seq's state that a windowed or
// recurrent memory cannot roll back: the sliding-window layers' cache of a
// windowed cache (Context.SlidingWindow), a recurrent model's state
// (llama.cpp's LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY). It is a checkpoint:
// restored with SetSeqStatePartial while the sequence's full-context
// layers still hold its positions, it lets the sequence go back to a
// position the window has moved past. It is much smaller than SeqState
// with long sequences; for a model whose memory has no such part it holds
// no cells.
func (c *Context) SeqStatePartial(seq int) ([]byte, error) {
	return c.seqState("seq state partial", nil, seq, capi.StateSeqFlagsPartialOnly)
}

// AppendSeqStatePartial is SeqStatePartial appending the state to dst: a
// caller that checkpoints often (speculative decoding on a recurrent
// model) reuses one buffer.
func (c *Context) AppendSeqStatePartial(dst []byte, seq int) ([]byte, error) {
	return c.seqState("seq state partial", dst, seq, capi.StateSeqFlagsPartialOnly)
}

// SetSeqStatePartial restores a state returned by SeqStatePartial into
// seq, replacing that part of its memory and leaving the rest (the
// full-context layers) as it is. The caller keeps the two consistent: the
// rest must still hold the positions the partial state was taken at
// (remove those past it afterwards, with Memory.Remove).
func (c *Context) SetSeqStatePartial(seq int, data []byte) error {
	return c.setSeqState("set seq state partial", seq, data, capi.StateSeqFlagsPartialOnly, "the partial sequence state")
}

// SaveStateFile writes the whole state and the tokens it holds to a file.
func (c *Context) SaveStateFile(path string, tokens []Token) error {
	if err := c.lock("save state"); err != nil {
		return err
	}
	defer c.unlock()
	var ok bool
	if err := c.model.rpcGuard("save state", func() {
		ok = capi.StateSaveFile(c.ptr, path, tokPtr(tokens), uintptr(len(tokens)))
	}); err != nil {
		return err
	}
	if !ok {
		return errorf(CodeLoad, "save state", "could not write %s", path)
	}
	return nil
}

// LoadStateFile restores a state written by SaveStateFile and returns its tokens.
func (c *Context) LoadStateFile(path string) ([]Token, error) {
	if err := c.lock("load state"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if err := c.checkStateFile(path); err != nil {
		return nil, err
	}
	toks := make([]Token, c.nCtx)
	var n uintptr
	var ok bool
	if err := c.model.rpcGuard("load state", func() {
		ok = capi.StateLoadFile(c.ptr, path, tokPtr(toks), uintptr(len(toks)), &n)
	}); err != nil {
		return nil, err
	}
	if !ok {
		return nil, errorf(CodeLoad, "load state", "llama.cpp rejected %s", path)
	}
	c.nOut = 0
	return toks[:n], nil
}

// SaveSeqFile writes one sequence's state and tokens to a file, returning
// the bytes written.
func (c *Context) SaveSeqFile(path string, seq int, tokens []Token) (int, error) {
	if err := c.lock("save seq"); err != nil {
		return 0, err
	}
	defer c.unlock()
	if err := c.seqOK("save seq", seq, false); err != nil {
		return 0, err
	}
	var n uintptr
	if err := c.model.rpcGuard("save seq", func() {
		n = capi.StateSeqSaveFile(c.ptr, path, int32(seq), tokPtr(tokens), uintptr(len(tokens)))
	}); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, errorf(CodeLoad, "save seq", "could not write %s", path)
	}
	return int(n), nil
}

// LoadSeqFile restores a sequence file into seq and returns its tokens.
func (c *Context) LoadSeqFile(path string, seq int) ([]Token, error) {
	if err := c.lock("load seq"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if err := c.seqOK("load seq", seq, false); err != nil {
		return nil, err
	}
	if err := c.checkSeqFile(path); err != nil {
		return nil, err
	}
	toks := make([]Token, c.nCtx)
	var n, read uintptr
	if err := c.model.rpcGuard("load seq", func() {
		read = capi.StateSeqLoadFile(c.ptr, path, int32(seq), tokPtr(toks), uintptr(len(toks)), &n)
	}); err != nil {
		return nil, err
	}
	if read == 0 {
		return nil, errorf(CodeLoad, "load seq", "llama.cpp rejected %s", path)
	}
	return toks[:n], nil
}
