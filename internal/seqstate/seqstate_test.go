package seqstate

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
)

// state builds sequence states as llama.cpp writes them.
type state struct{ b []byte }

func (s *state) u32(vs ...uint32) *state {
	for _, v := range vs {
		s.b = binary.LittleEndian.AppendUint32(s.b, v)
	}
	return s
}

func (s *state) u64(v uint64) *state {
	s.b = binary.LittleEndian.AppendUint64(s.b, v)
	return s
}

// kv appends an attention cache's section: per stream, cells at the given
// positions, one layer of 8-byte K rows and 8-byte V rows (vTrans 0), or
// V columns of 2 elements of 4 bytes (vTrans 1).
func (s *state) kv(vTrans uint32, streams ...[]uint32) *state {
	s.u32(uint32(len(streams)))
	for _, cells := range streams {
		s.u32(uint32(len(cells)))
		if len(cells) == 0 {
			continue
		}
		for _, p := range cells {
			s.u32(p, 1, 0) // position, one sequence, sequence 0
		}
		s.u32(vTrans, 1)
		s.u32(0).u64(8)
		s.b = append(s.b, make([]byte, 8*len(cells))...)
		if vTrans == 0 {
			s.u32(0).u64(8)
		} else {
			s.u32(0, 4, 2)
		}
		s.b = append(s.b, make([]byte, 8*len(cells))...)
	}
	return s
}

// rec appends a recurrent memory's section of n cells (headers and data
// left out beyond what Check reads).
func (s *state) rec(n uint32) *state {
	s.u32(n)
	for i := range n {
		s.u32(i, 0)
	}
	return s.u32(0, 1) // s_trans, n_layer, ...
}

func TestCheck(t *testing.T) {
	emptyKV := (&state{}).kv(0, nil).b
	emptyKV2 := (&state{}).kv(0, nil, nil).b
	emptySWA := (&state{}).kv(0, nil).kv(0, nil).b
	emptyRec := (&state{}).rec(0).b
	emptyHybrid := (&state{}).kv(0, nil).rec(0).b
	cells := []uint32{0, 1, 2}
	tests := []struct {
		name   string
		empty  []byte
		state  []byte
		maxPos int
		want   bool
	}{
		{"attention cache", emptyKV, (&state{}).kv(0, cells).b, -1, true},
		{"transposed V", emptyKV, (&state{}).kv(1, cells).b, -1, true},
		{"no cells", emptyKV, emptyKV, -1, true},
		{"two streams, cells in the second", emptyKV2, (&state{}).kv(0, nil, cells).b, -1, true},
		{"count past the cells", emptyKV, (&state{}).kv(0, cells).b, -1, true},
		{"count of 4 billion", emptyKV, setAt((&state{}).kv(0, cells).b, 4, 0xFFFFFFFF), -1, false},
		{"count past maxCells", emptyKV, (&state{}).kv(0, make([]uint32, 17)).b, -1, false},
		{"one cell more than written", emptyKV, setAt((&state{}).kv(0, cells).b, 4, 4), -1, false},
		{"trailing bytes", emptyKV, append((&state{}).kv(0, cells).b, 0), -1, false},
		{"truncated", emptyKV, (&state{}).kv(0, cells).b[:40], -1, false},
		{"stream count differs", emptyKV2, (&state{}).kv(0, cells).b, -1, false},
		{"position past maxPos", emptyKV, (&state{}).kv(0, []uint32{0, 99}).b, 64, false},
		{"negative position", emptyKV, (&state{}).kv(0, []uint32{0, 0xFFFFFFFF}).b, 64, false},
		{"positions within maxPos", emptyKV, (&state{}).kv(0, cells).b, 64, true},
		{"windowed: both caches", emptySWA, (&state{}).kv(0, cells).kv(0, cells[:1]).b, -1, true},
		{"windowed: the window's count of 4 billion", emptySWA, (&state{}).kv(0, cells).u32(1, 0xFFFFFFFF).b, -1, false},
		{"windowed: the window's cache missing", emptySWA, (&state{}).kv(0, cells).b, -1, false},
		{"recurrent", emptyRec, (&state{}).rec(1).b, -1, true},
		{"recurrent: count of 4 billion", emptyRec, (&state{}).u32(0xFFFFFFFF, 0, 0).b, -1, false},
		{"recurrent: two cells (llama.cpp asserts)", emptyRec, (&state{}).rec(2).b, -1, false},
		{"recurrent: a cell naming a sequence", emptyRec, (&state{}).u32(1, 0, 1, 0, 0, 1).b, -1, false},
		{"recurrent: no cell", emptyRec, (&state{}).rec(0).b, -1, true},
		{"recurrent: another layer count", emptyRec, (&state{}).u32(1, 0, 0, 0, 2).b, -1, false},
		{"hybrid", emptyHybrid, (&state{}).kv(0, cells).rec(1).b, -1, true},
		{"hybrid: the recurrent count of 4 billion", emptyHybrid, (&state{}).kv(0, cells).u32(0xFFFFFFFF, 0, 0).b, -1, false},
		{"unknown layout, small words", []byte{1, 2, 3}, (&state{}).u32(1, 3, 7).b, -1, true},
		{"unknown layout, a count of 4 billion", nil, (&state{}).u32(1, 0xFFFFFFFF).b, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ParseLayout(tt.empty)
			assert.Equal(t, tt.want, l.CheckBytes(tt.state, 16, tt.maxPos), "in memory")
			assert.Equal(t, tt.want, l.CheckBytes(WithHeader(tt.state, 3), 16, tt.maxPos), "with the buffer header")
			assert.Equal(t, tt.want, l.Check(bytes.NewReader(tt.state), int64(len(tt.state)), 16, tt.maxPos), "through a reader")
		})
	}
}

// TestCheckWindow: a state larger than the reader's window is walked
// across windows.
func TestCheckWindow(t *testing.T) {
	cells := make([]uint32, 20000)
	for i := range cells {
		cells[i] = uint32(i)
	}
	st := (&state{}).kv(0, cells).b
	l := ParseLayout((&state{}).kv(0, nil).b)
	assert.True(t, l.Check(bytes.NewReader(st), int64(len(st)), len(cells), len(cells)))
	assert.False(t, l.Check(bytes.NewReader(st), int64(len(st)), len(cells), len(cells)-1))
}

func setAt(b []byte, off int, v uint32) []byte {
	out := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(out[off:], v)
	return out
}

func TestHeader(t *testing.T) {
	st := []byte{1, 2, 3, 4}
	h := WithHeader(st, 5)
	cut, ok := CutHeader(h)
	assert.True(t, ok)
	assert.Equal(t, st, cut)
	cut, ok = CutHeader(st)
	assert.False(t, ok)
	assert.Equal(t, st, cut)
}
