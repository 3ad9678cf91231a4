package llama_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestSeqStateCountsChecked: llama.cpp reserves memory for a sequence
// state's cell count before it checks it (about 21 bytes a cell), so one
// corrupt count in a 5 KB state made it take 850 MB, and 0xFFFFFFFF asks
// for 85 GB; a recurrent memory's state of two cells ended the process in
// an assert. SetSeqState, SetSeqStatePartial and LoadSeqFile walk the
// state in Go first: for each memory (an attention cache, a windowed
// model's two, a recurrent and a hybrid model's), a state it wrote
// restores, and one whose first count is raised, a recurrent one of two
// cells, and attention cells at positions outside the context are
// refused (ErrLoad) before llama.cpp sees them.
func TestSeqStateCountsChecked(t *testing.T) {
	models := []struct {
		name string
		load func(testing.TB) *llama.Model
		// countAt: where the first cell count is in a whole (and a
		// partial) state with its buffer header: an attention cache
		// writes its stream count first, a recurrent memory its count.
		countAt, partialAt int
		// recurrent: the partial state is a recurrent memory's section.
		recurrent bool
	}{
		{"attention cache", stories, 12, -1, false},
		{"windowed (gemma3)", modeltest.TinySWA, 12, 12, false},
		{"recurrent (mamba)", modeltest.TinyRecurrent, 8, 8, true},
		{"hybrid (jamba)", modeltest.TinyHybrid, 12, 8, true},
	}
	for _, mt := range models {
		t.Run(mt.name, func(t *testing.T) {
			m := mt.load(t)
			for _, unified := range []bool{false, true} {
				c := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Sequences: 2, KVUnified: unified, Threads: 1})
				toks, err := m.Tokenize("Once upon a time there was a little girl", llama.TokenizeOptions{AddSpecial: true})
				require.NoError(t, err)
				b := llama.NewBatch(len(toks), 1)
				b.AddSequence(toks, 0, 0, true)
				require.NoError(t, c.Decode(context.Background(), b))

				whole, err := c.SeqState(0)
				require.NoError(t, err)
				partial, err := c.SeqStatePartial(0)
				require.NoError(t, err)
				file := filepath.Join(t.TempDir(), "seq.bin")
				_, err = c.SaveSeqFile(file, 0, toks)
				require.NoError(t, err)

				// What the context wrote restores.
				require.NoError(t, c.SetSeqState(1, whole))
				if mt.partialAt >= 0 {
					require.NoError(t, c.SetSeqStatePartial(1, partial))
				}
				got, err := c.LoadSeqFile(file, 1)
				require.NoError(t, err)
				assert.Equal(t, toks, got)

				for _, count := range []uint32{uint32(len(toks)) + 1<<16, 40_000_000, 0xFFFFFFFF} {
					bad := setU32(whole, mt.countAt, count)
					err := c.SetSeqState(1, bad)
					require.ErrorIs(t, err, llama.ErrLoad, "count %d", count)
					assert.ErrorContains(t, err, "cell count")
					if mt.partialAt >= 0 {
						err = c.SetSeqStatePartial(1, setU32(partial, mt.partialAt, count))
						require.ErrorIs(t, err, llama.ErrLoad, "partial, count %d", count)
					}
					raw, err := os.ReadFile(file)
					require.NoError(t, err)
					// The file: magic, version, token count, tokens, then
					// the state without its buffer header.
					badFile := filepath.Join(t.TempDir(), "bad.bin")
					require.NoError(t, os.WriteFile(badFile, setU32(raw, 12+4*len(toks)+mt.countAt-8, count), 0o600))
					_, err = c.LoadSeqFile(badFile, 1)
					require.ErrorIs(t, err, llama.ErrLoad, "file, count %d", count)
					assert.ErrorContains(t, err, "cell count")
				}
				if mt.recurrent {
					// A sequence lives in one cell of a recurrent memory:
					// llama.cpp asserted (the process ended) on a state of
					// two.
					two := append([]byte(nil), partial[:mt.partialAt+12]...)
					two = append(two, partial[mt.partialAt+4:]...)
					err := c.SetSeqStatePartial(1, setU32(two, mt.partialAt, 2))
					require.ErrorIs(t, err, llama.ErrLoad)
					assert.ErrorContains(t, err, "cell count")
				}
				if mt.countAt == 12 {
					// An attention cell's position must be in the context.
					for _, pos := range []uint32{0xFFFFFFF0, 1 << 20} {
						err := c.SetSeqState(1, setU32(whole, mt.countAt+4, pos))
						require.ErrorIs(t, err, llama.ErrLoad, "position %d", pos)
					}
				}
				// A truncated state and a token count past the context.
				require.ErrorIs(t, c.SetSeqState(1, whole[:len(whole)-1]), llama.ErrLoad)
				raw, err := os.ReadFile(file)
				require.NoError(t, err)
				badFile := filepath.Join(t.TempDir(), "toks.bin")
				require.NoError(t, os.WriteFile(badFile, setU32(raw, 8, 1<<30), 0o600))
				_, err = c.LoadSeqFile(badFile, 1)
				require.ErrorIs(t, err, llama.ErrLoad)
				// And what was written still restores.
				require.NoError(t, c.SetSeqState(1, whole))
			}
		})
	}
}

// setU32 returns a copy of b with the little-endian word at off set to v.
func setU32(b []byte, off int, v uint32) []byte {
	out := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(out[off:], v)
	return out
}

// TestStateArchChecked: a whole state starts with the length of the
// model architecture's name, which llama.cpp allocates and zeroes before
// it reads the name: 0xFFFFFFFF took 4 GB. SetState and LoadStateFile
// bound it first (ErrLoad); what the context wrote still restores.
func TestStateArchChecked(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Threads: 1})
	toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	b := llama.NewBatch(len(toks), 1)
	b.AddSequence(toks, 0, 0, true)
	require.NoError(t, c.Decode(context.Background(), b))
	state, err := c.State()
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "state.bin")
	require.NoError(t, c.SaveStateFile(file, toks))
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	archAt := 12 + 4*len(toks) // magic, version, token count, tokens

	require.NoError(t, c.SetState(state))
	got, err := c.LoadStateFile(file)
	require.NoError(t, err)
	assert.Equal(t, toks, got)
	for _, n := range []uint32{0xFFFFFFFF, 1 << 20, uint32(len(state))} {
		err := c.SetState(setU32(state, 0, n))
		require.ErrorIs(t, err, llama.ErrLoad, "length %d", n)
		assert.ErrorContains(t, err, "architecture")
		bad := filepath.Join(t.TempDir(), "bad.bin")
		require.NoError(t, os.WriteFile(bad, setU32(raw, archAt, n), 0o600))
		_, err = c.LoadStateFile(bad)
		require.ErrorIs(t, err, llama.ErrLoad, "file, length %d", n)
		assert.ErrorContains(t, err, "does not fit")
	}
	require.ErrorIs(t, c.SetState(state[:3]), llama.ErrLoad)
	require.NoError(t, c.SetState(state))
}
