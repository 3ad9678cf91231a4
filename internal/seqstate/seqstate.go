// Package seqstate reads the shape of llama.cpp's sequence states (what
// llama_state_seq_get_data and llama_state_seq_save_file write) so that
// their cell counts are checked before llama.cpp reads them: llama.cpp
// reserves memory for a sequence's cells (about 21 bytes a cell) from the
// count before it checks anything else, so a corrupt four-byte count of
// billions makes it allocate and fill gigabytes, and the process is killed
// for memory.
//
// A state is a row of sections, one per memory: an attention cache's (a
// windowed model has two: the full-context layers', then the window's),
// then, for a recurrent or hybrid model, the recurrent memory's. Which
// sections a context writes is read once from the state of an empty
// sequence (ParseLayout); Check walks a state's cells section by section.
package seqstate

import (
	"bytes"
	"encoding/binary"
	"io"
)

// BufferMagic starts the sequence state that llama_state_seq_get_data
// returns, followed by the sequence id as int32; files hold the state
// without these 8 bytes.
const BufferMagic = 0xaf143cd8

// CutHeader removes the buffer header from a sequence state, and reports
// whether it had one.
func CutHeader(state []byte) ([]byte, bool) {
	if len(state) >= 8 && binary.LittleEndian.Uint32(state) == BufferMagic {
		return state[8:], true
	}
	return state, false
}

// WithHeader puts the buffer header of sequence seq before a state read
// from a file.
func WithHeader(state []byte, seq int) []byte {
	out := make([]byte, 8, 8+len(state))
	binary.LittleEndian.PutUint32(out, BufferMagic)
	binary.LittleEndian.PutUint32(out[4:], uint32(int32(seq)))
	return append(out, state...)
}

// Layout is the row of sections a context's sequence states hold.
type Layout struct {
	kv        []int // each attention cache's stream count, in order
	recurrent bool  // a recurrent memory's section ends the state
	// recHead: what follows the recurrent memory's cells (its
	// transposition flag, layer count and first layer's type and row
	// size), the same in every state of the context.
	recHead []byte
	known   bool // the empty state was read as sections
}

// ParseLayout reads the layout from the state (with or without its buffer
// header) of an empty sequence: each attention cache writes its stream
// count and a zero cell count per stream, a recurrent memory a zero cell
// count and its layers' headers. A state it cannot read gives a layout
// that Check knows only the first counts of.
func ParseLayout(empty []byte) Layout {
	empty, _ = CutHeader(empty)
	var l Layout
	o := 0
	for o+4 <= len(empty) {
		n := int(binary.LittleEndian.Uint32(empty[o:]))
		if n == 0 {
			// A recurrent memory: its cell count, then headers only.
			l.recurrent, l.known = true, true
			l.recHead = bytes.Clone(empty[o+4 : min(len(empty), o+4+20)])
			return l
		}
		if n > 1<<16 || o+4*(1+n) > len(empty) {
			return Layout{}
		}
		for i := 1; i <= n; i++ {
			if binary.LittleEndian.Uint32(empty[o+4*i:]) != 0 {
				return Layout{}
			}
		}
		l.kv = append(l.kv, n)
		o += 4 * (1 + n)
	}
	if o != len(empty) || len(l.kv) == 0 {
		return Layout{}
	}
	l.known = true
	return l
}

// Check reports whether the state in r (size bytes, without its buffer
// header) can be one of layout l with at most maxCells cells in any
// section: each attention cache's cells are walked (position, sequences,
// the M-RoPE extension if the walk needs it, then the K and V rows), and
// the walk must end where the state does or where its recurrent section
// starts, which holds at most the one cell a sequence lives in. maxPos >= 0
// also bounds every attention cell's position to [0, maxPos). A layout
// ParseLayout could not read checks the state's first two words only
// (the first cell count of an attention cache, or a recurrent memory's
// count and first position).
func (l Layout) Check(r io.ReaderAt, size int64, maxCells, maxPos int) bool {
	return l.check(func() *reader { return &reader{r: r, size: size} }, maxCells, maxPos)
}

func (l Layout) check(newReader func() *reader, maxCells, maxPos int) bool {
	if !l.known {
		rd := newReader()
		a, ok1 := rd.u32()
		b, ok2 := rd.u32()
		return !ok1 || !ok2 || (a <= uint64(maxCells) && b <= uint64(maxCells))
	}
	for _, ext := range []uint64{0, 12} { // llama_kv_cell_ext: x, y, token
		rd := newReader()
		ok := true
		for _, ns := range l.kv {
			if ok = rd.kvSection(ns, ext, maxCells, maxPos); !ok {
				break
			}
		}
		if ok && l.recurrent {
			ok = rd.recurrentSection(l.recHead)
		} else if ok {
			ok = rd.off == rd.size
		}
		if ok {
			return true
		}
	}
	return false
}

// CheckBytes is Check on a state in memory, with or without its buffer
// header.
func (l Layout) CheckBytes(state []byte, maxCells, maxPos int) bool {
	state, _ = CutHeader(state)
	// The window is the whole state: nothing is copied or read again.
	return l.check(func() *reader { return &reader{size: int64(len(state)), win: state} }, maxCells, maxPos)
}

// reader reads little-endian words from a state, through a window.
type reader struct {
	r      io.ReaderAt
	size   int64
	off    int64
	win    []byte
	winOff int64
}

// read returns the n bytes at the offset, or false past the end or on a
// read error.
func (rd *reader) read(n int64) ([]byte, bool) {
	if n > rd.size-rd.off {
		return nil, false
	}
	if rd.off < rd.winOff || rd.off+n > rd.winOff+int64(len(rd.win)) {
		m := min(rd.size-rd.off, 64<<10)
		if cap(rd.win) < int(m) {
			rd.win = make([]byte, m)
		}
		rd.win = rd.win[:m]
		if _, err := rd.r.ReadAt(rd.win, rd.off); err != nil && err != io.EOF {
			rd.win = rd.win[:0]
			return nil, false
		}
		rd.winOff = rd.off
	}
	b := rd.win[rd.off-rd.winOff : rd.off-rd.winOff+n]
	rd.off += n
	return b, true
}

func (rd *reader) u32() (uint64, bool) {
	b, ok := rd.read(4)
	if !ok {
		return 0, false
	}
	return uint64(binary.LittleEndian.Uint32(b)), true
}

func (rd *reader) u64() (uint64, bool) {
	b, ok := rd.read(8)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b), true
}

func (rd *reader) skip(n uint64) bool {
	if n > uint64(rd.size-rd.off) {
		return false
	}
	rd.off += int64(n)
	return true
}

// kvSection walks an attention cache's section of nStream streams.
func (rd *reader) kvSection(nStream int, ext uint64, maxCells, maxPos int) bool {
	if ns, ok := rd.u32(); !ok || ns != uint64(nStream) {
		return false
	}
	for range nStream {
		cc, ok := rd.u32()
		if !ok || cc > uint64(maxCells) {
			return false
		}
		if cc == 0 {
			continue
		}
		// Each cell takes at least its position and sequence count.
		if 8*cc > uint64(rd.size-rd.off) {
			return false
		}
		for range cc {
			pos, ok1 := rd.u32()
			nSeq, ok2 := rd.u32()
			if !ok1 || !ok2 || maxPos >= 0 && (int32(pos) < 0 || int64(pos) >= int64(maxPos)) {
				return false
			}
			// A sequence's state has its cells of that sequence alone.
			if nSeq != 1 || !rd.skip(ext+4) {
				return false
			}
		}
		vTrans, ok1 := rd.u32()
		nLayer, ok2 := rd.u32()
		if !ok1 || !ok2 || nLayer > uint64(rd.size) {
			return false
		}
		for range nLayer { // K rows: type, row size, rows
			row, ok := rd.typedU64()
			if !ok || row > uint64(rd.size) || !rd.skip(row*cc) {
				return false
			}
		}
		for range nLayer { // V rows, or V columns when transposed
			var n uint64
			if vTrans == 0 {
				row, ok := rd.typedU64()
				if !ok {
					return false
				}
				n = row
			} else {
				if !rd.skip(4) {
					return false
				}
				el, ok1 := rd.u32()
				ne, ok2 := rd.u32()
				if !ok1 || !ok2 {
					return false
				}
				n = el * ne
			}
			if n > uint64(rd.size) || !rd.skip(n*cc) {
				return false
			}
		}
	}
	return true
}

// typedU64 reads a layer's type (skipped) and the size that follows.
func (rd *reader) typedU64() (uint64, bool) {
	if !rd.skip(4) {
		return 0, false
	}
	return rd.u64()
}

// recurrentSection checks a recurrent memory's section: a sequence lives
// in one cell (llama.cpp asserts as much, ending the process, on a count
// of 2), whose position and empty sequence list must follow, and then
// head, as in the context's empty state.
func (rd *reader) recurrentSection(head []byte) bool {
	cc, ok := rd.u32()
	if !ok || cc > 1 {
		return false
	}
	for range cc {
		_, ok1 := rd.u32()
		nSeq, ok2 := rd.u32()
		if !ok1 || !ok2 || nSeq != 0 {
			return false
		}
	}
	b, ok := rd.read(int64(len(head)))
	return ok && bytes.Equal(b, head)
}
