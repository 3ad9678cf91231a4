package engine

// Slot files: SaveSlot, RestoreSlot and EraseSlot. The file is written and
// read by Go, not by llama.cpp, so that:
//
//   - it is read without following a symbolic link (O_NOFOLLOW) and
//     without blocking on a FIFO (O_NONBLOCK), and written under an
//     exclusive temporary name renamed over it: it must be a regular file;
//   - a malformed file is an error (SlotFileError), never an abort in
//     llama.cpp (which asserts on some malformed files);
//   - the file work happens outside the engine loop, which only copies
//     the slot's state in or out.
//
// The format is llama.cpp's sequence state file (llama_state_seq_save_file):
// the magic "ggsq" and version as uint32, the token count as uint32, the
// tokens as int32, then the sequence state; all little-endian. Files are
// interchangeable with llama-server's.
//
// An action on a slot that is processing a request waits for it to go idle
// (as llama-server defers it), at most SlotWaitTimeout; then it fails with
// ErrSlotBusy.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/seqstate"
)

const (
	slotFileMagic   = 0x67677371 // "ggsq", LLAMA_STATE_SEQ_MAGIC
	slotFileVersion = 3          // LLAMA_STATE_SEQ_VERSION
	slotHeaderBytes = 12
)

// SlotWaitTimeout bounds how long a slot action waits for a busy slot.
const SlotWaitTimeout = 10 * time.Second

// ErrSlotBusy is the error of a slot action on a slot that stayed busy
// for SlotWaitTimeout.
var ErrSlotBusy = errors.New("engine: the slot is processing a request")

// SlotFileError is the error of RestoreSlot on a file that is not a slot
// file of the engine's model. Msg names the file by its base name only.
type SlotFileError struct {
	Msg string
}

// Error returns Msg.
func (e *SlotFileError) Error() string { return e.Msg }

// Is makes errors.Is(err, llama.ErrInvalid) true.
func (e *SlotFileError) Is(target error) bool { return target == llama.ErrInvalid }

// openSlotFile opens path without following a final symbolic link and
// without blocking, and checks that it is a regular file.
func openSlotFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|openNoFollow, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, syscall.EISDIR
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, syscall.ENXIO
	}
	return f, nil
}

// writeSlotFile writes tokens and state to path in llama.cpp's format and
// returns the bytes written. The file is written under a temporary name
// (created exclusively, so never through a link) and renamed over path,
// so that a restore running at the same time reads the old file or the
// new one, never half of one. The file is the owner's only (0600): it
// holds a conversation's tokens and KV state. An existing path must be a regular file: a
// symbolic link, a directory or a FIFO there is refused.
func writeSlotFile(path string, tokens []llama.Token, state []byte) (int, error) {
	if st, err := os.Lstat(path); err == nil {
		switch {
		case st.Mode()&os.ModeSymlink != 0:
			return 0, syscall.ELOOP
		case st.IsDir():
			return 0, syscall.EISDIR
		case !st.Mode().IsRegular():
			return 0, syscall.ENXIO
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	buf := make([]byte, slotHeaderBytes+4*len(tokens), slotHeaderBytes+4*len(tokens)+len(state))
	binary.LittleEndian.PutUint32(buf[0:], slotFileMagic)
	binary.LittleEndian.PutUint32(buf[4:], slotFileVersion)
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(tokens)))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[slotHeaderBytes+4*i:], uint32(t))
	}
	buf = append(buf, state...)
	f, err := os.CreateTemp(filepath.Dir(path), ".slot-*.tmp")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	_, err = f.Write(buf)
	if err2 := f.Chmod(0o600); err == nil {
		err = err2
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, err
	}
	return len(buf), nil
}

// readSlotFile reads a slot file of at most maxTokens tokens of m's
// vocabulary, returning the tokens, the state and the file's size.
// layout is the layout of the engine's sequence states: the state is walked
// in the file (seqstate.Layout.Check) before it is read, so that a file
// whose size its structure does not account for (a sparse or padded file
// of any size) is refused without allocating its size.
func readSlotFile(path, name string, maxTokens int, m *llama.Model, layout seqstate.Layout) ([]llama.Token, []byte, int, error) {
	f, err := openSlotFile(path, os.O_RDONLY)
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	bad := func(why string) error {
		return &SlotFileError{Msg: fmt.Sprintf("Unable to restore slot: %q is not a slot file of this model (%s)", name, why)}
	}
	var hdr [slotHeaderBytes]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return nil, nil, 0, bad("too short")
	}
	if binary.LittleEndian.Uint32(hdr[0:]) != slotFileMagic || binary.LittleEndian.Uint32(hdr[4:]) != slotFileVersion {
		return nil, nil, 0, bad("unknown magic or version")
	}
	n := int64(binary.LittleEndian.Uint32(hdr[8:]))
	tooLong := func(n int64) error {
		return &SlotFileError{Msg: fmt.Sprintf("Unable to restore slot: %q holds %d tokens, more than the slot's context (%d tokens)", name, n, maxTokens)}
	}
	if n >= int64(maxTokens)+slotTokensOverhead {
		return nil, nil, 0, tooLong(n)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, nil, 0, err
	}
	rest := st.Size() - slotHeaderBytes - 4*n
	if rest <= 0 {
		return nil, nil, 0, bad("truncated")
	}
	raw := make([]byte, 4*n)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, nil, 0, bad("truncated")
	}
	stored := make([]llama.Token, n)
	for i := range stored {
		stored[i] = llama.Token(int32(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	toks, err := decodeSlotTokens(stored)
	if err != nil {
		return nil, nil, 0, bad("unknown token list")
	}
	if len(toks) >= maxTokens {
		return nil, nil, 0, tooLong(int64(len(toks)))
	}
	for _, t := range toks {
		if m.CheckToken(t) != nil {
			return nil, nil, 0, bad("token out of the vocabulary")
		}
	}
	off := slotHeaderBytes + 4*n
	if !layout.Check(io.NewSectionReader(f, off, rest), rest, maxTokens, maxTokens) {
		return nil, nil, 0, bad("malformed state")
	}
	state := make([]byte, rest)
	if _, err := io.ReadFull(f, state); err != nil {
		return nil, nil, 0, bad("truncated")
	}
	return toks, state, int(st.Size()), nil
}

// slotTokensOverhead is how many more tokens encodeSlotTokens stores than
// the slot holds: llama-server's packed token state (see slotstate.go).
const slotTokensOverhead = 4

// encodeSlotTokens is the token list a slot file stores for a slot's
// tokens, in llama-server's packed form, and decodeSlotTokens its inverse
// (which also reads the plain lists of older files).
var (
	encodeSlotTokens = packSlotTokens
	decodeSlotTokens = unpackSlotTokens
)

// slotReleased returns a channel closed when a slot next goes idle.
func (e *Engine) slotReleased() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.idleCh == nil {
		e.idleCh = make(chan struct{})
	}
	return e.idleCh
}

// idleSlot returns slot id when no request uses it.
func (e *Engine) idleSlot(id int) (*engSlot, error) {
	if id < 0 || id >= len(e.slots) {
		return nil, fmt.Errorf("engine: invalid slot id %d: %w", id, llama.ErrInvalid)
	}
	s := e.slots[id]
	if s.tk != nil {
		return nil, ErrSlotBusy
	}
	return s, nil
}

// onIdleSlot runs f on the loop with slot id once it is idle, waiting for
// a busy slot to be released (at most SlotWaitTimeout: ErrSlotBusy).
func (e *Engine) onIdleSlot(id int, f func(s *engSlot) error) error {
	var timeout <-chan time.Time
	for {
		released := e.slotReleased()
		var err error
		if err2 := e.do(func() {
			var s *engSlot
			if s, err = e.idleSlot(id); err == nil {
				err = f(s)
			}
		}); err2 != nil {
			return err2
		}
		if !errors.Is(err, ErrSlotBusy) {
			return err
		}
		if timeout == nil {
			t := time.NewTimer(SlotWaitTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-released:
		case <-timeout:
			return fmt.Errorf("slot %d is still processing a request; try again later: %w", id, ErrSlotBusy)
		case <-e.done:
			return ErrClosed
		}
	}
}

// SaveSlot writes slot id's KV memory and tokens to path (see the
// package notes above on slot files).
func (e *Engine) SaveSlot(id int, path string) (nTokens int, nBytes int, err error) {
	var toks []llama.Token
	var state []byte
	err = e.onIdleSlot(id, func(s *engSlot) error {
		toks = append([]llama.Token(nil), s.cache...)
		var err error
		state, err = e.lctx.SeqState(id)
		state, _ = seqstate.CutHeader(state)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	n, err := writeSlotFile(path, encodeSlotTokens(toks), state)
	if err != nil {
		return 0, 0, err
	}
	return len(toks), n, nil
}

// RestoreSlot loads a slot file into slot id, tokens included, so that a
// following request with CachePrompt reuses it. The slot's context
// checkpoints are dropped (a file holds none), so with a windowed cache a
// following prompt keeps the restored tokens only where the window still
// holds what it needs.
func (e *Engine) RestoreSlot(id int, path string) (nTokens int, nBytes int, err error) {
	name := path[strings.LastIndexAny(path, `/\`)+1:]
	toks, state, size, err := readSlotFile(path, name, e.nCtxSlot, e.model, e.slotLayout)
	if err != nil {
		return 0, 0, err
	}
	err = e.onIdleSlot(id, func(s *engSlot) error {
		// The slot's checkpoints go, as llama-server clears the slot's
		// prompt (tokens and checkpoints) before it loads a file: one
		// taken on a prefix the restored tokens share (a lone BOS) would
		// otherwise let the next prompt keep that prefix where
		// llama-server decodes it again.
		e.lctx.Memory().Remove(id, 0, -1)
		s.cache, s.ckpts = s.cache[:0], nil
		// readSlotFile walked the state with the slots' layout, its
		// counts and positions against the slot's context (a negative
		// position would outlive the slot's erasure).
		if e.slotHeaded {
			state = seqstate.WithHeader(state, id)
		}
		if err := e.lctx.SetSeqState(id, state); err != nil {
			e.lctx.Memory().Remove(id, 0, -1)
			return &SlotFileError{Msg: fmt.Sprintf("Unable to restore slot: %q does not hold a state this server can load", name)}
		}
		s.cache = append(s.cache, toks...)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return len(toks), size, nil
}

// EraseSlot empties slot id's memory.
func (e *Engine) EraseSlot(id int) (nErased int, err error) {
	err = e.onIdleSlot(id, func(s *engSlot) error {
		nErased = len(s.cache)
		_, err := e.lctx.Memory().Remove(id, 0, -1)
		s.cache, s.ckpts = s.cache[:0], nil
		return err
	})
	if err != nil {
		return 0, err
	}
	return nErased, nil
}
