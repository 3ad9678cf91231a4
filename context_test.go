package llama_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

func TestStateRoundTrip(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Sequences: 2})
	ctx := context.Background()
	toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	want := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 24})

	// Decode the prompt, save the sequence, wipe, restore into seq 1, continue.
	b := llama.NewBatch(64, 1)
	require.NoError(t, c.Memory().Clear())
	require.NoError(t, b.AddSequence(toks, 0, 0, true))
	require.NoError(t, c.Decode(ctx, b))
	st, err := c.SeqState(0)
	require.NoError(t, err)
	require.NotEmpty(t, st)
	whole, err := c.State()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "seq.bin")
	n, err := c.SaveSeqFile(path, 0, toks)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Positive(t, n)
	assert.GreaterOrEqual(t, fi.Size(), int64(n), "the file holds the %d bytes of state", n)

	require.NoError(t, c.Memory().Clear())
	require.NoError(t, c.SetSeqState(1, st))
	lo, hi, err := c.Memory().PosRange(1)
	require.NoError(t, err)
	assert.Equal(t, 0, lo)
	assert.Equal(t, len(toks)-1, hi)
	// Continue seq 1 from its restored memory: re-feed the last prompt token.
	removed, err := c.Memory().Remove(1, len(toks)-1, -1)
	require.NoError(t, err)
	require.True(t, removed)
	var got strings.Builder
	for p, err := range c.GenerateTokens(ctx, toks[len(toks)-1:], llama.GenerateOptions{MaxTokens: 24, Seq: 1, Keep: true}).Seq() {
		require.NoError(t, err)
		got.WriteString(p.Text)
	}
	assert.Equal(t, want, got.String())

	require.NoError(t, c.Memory().Clear())
	loaded, err := c.LoadSeqFile(path, 0)
	require.NoError(t, err)
	assert.Equal(t, toks, loaded)
	require.NoError(t, c.SetState(whole))
	_, hi, _ = c.Memory().PosRange(0)
	assert.Equal(t, len(toks)-1, hi)
}

// Without a unified KV buffer each sequence has a buffer of its own and
// llama.cpp copies only whole ones (it aborts on a part): a part is an
// error, the whole sequence is copied.
func TestMemoryCopySeparateBuffers(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Sequences: 2})
	b := llama.NewBatch(16, 1)
	for i := range 8 {
		require.NoError(t, b.Add(llama.Token(10+i), i, 0, i == 7))
	}
	require.NoError(t, c.Decode(context.Background(), b))
	tests := []struct {
		name   string
		p0, p1 int
		ok     bool
	}{
		{"part from the start", 0, 4, false},
		{"part to the end", 3, -1, false},
		{"a middle part", 2, 5, false},
		{"huge end", 0, 1 << 40, false},
		{"whole", 0, -1, true},
		{"whole, negative start", -1, -1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Memory().Copy(0, 1, tc.p0, tc.p1)
			if !tc.ok {
				require.ErrorIs(t, err, llama.ErrUnsupported)
				return
			}
			require.NoError(t, err)
			lo, hi, err := c.Memory().PosRange(1)
			require.NoError(t, err)
			assert.Equal(t, []int{0, 7}, []int{lo, hi})
		})
	}
}

func TestMemoryOps(t *testing.T) {
	m := stories(t)
	// Tokens shared by several sequences need the unified KV buffer.
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Sequences: 3, KVUnified: true})
	b := llama.NewBatch(16, 3)
	for i := range 8 {
		require.NoError(t, b.AddShared(llama.Token(10+i), i, []int{0, 1}, i == 7))
	}
	require.NoError(t, c.Decode(context.Background(), b))
	for _, s := range []int{0, 1} {
		lo, hi, err := c.Memory().PosRange(s)
		require.NoError(t, err)
		assert.Equal(t, []int{0, 7}, []int{lo, hi})
	}
	require.NoError(t, c.Memory().Copy(0, 2, 0, 4))
	_, hi, _ := c.Memory().PosRange(2)
	assert.Equal(t, 3, hi)
	ok, err := c.Memory().Remove(1, 4, -1)
	require.NoError(t, err)
	assert.True(t, ok)
	_, hi, _ = c.Memory().PosRange(1)
	assert.Equal(t, 3, hi)
	require.True(t, c.Memory().CanShift())
	require.NoError(t, c.Memory().Shift(0, 4, -1, -2))
	lo, hi, _ := c.Memory().PosRange(0)
	assert.Equal(t, []int{0, 5}, []int{lo, hi}, "positions 4..7 shifted down by 2 over 2..3")
	require.NoError(t, c.Memory().Divide(0, 0, -1, 2))
	require.NoError(t, c.Memory().Keep(2))
	lo, _, _ = c.Memory().PosRange(0)
	assert.Equal(t, -1, lo)
}
