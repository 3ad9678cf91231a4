package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

func tinySWA(t testing.TB) *llama.Model { return modeltest.TinySWA(t) }

// decodeRange decodes toks at positions [p0, p0+len) of sequence 0 in
// micro-batch-sized batches and returns the last token's logits.
func decodeRange(t testing.TB, c *llama.Context, toks []llama.Token, p0 int) []float32 {
	t.Helper()
	last := 0
	for i := 0; i < len(toks); i += 32 {
		b := llama.NewBatch(32, 1)
		end := min(i+32, len(toks))
		for j := i; j < end; j++ {
			require.NoError(t, b.Add(toks[j], p0+j, 0, j == len(toks)-1))
		}
		require.NoError(t, c.Decode(context.Background(), b))
		last = end - i - 1
	}
	l, err := c.Logits(last)
	require.NoError(t, err)
	return append([]float32(nil), l...)
}

func swaTokens(m *llama.Model, n int) []llama.Token {
	toks := make([]llama.Token, n)
	for i := range toks {
		toks[i] = llama.Token(100 + (i*37)%(m.VocabSize()-200))
	}
	return toks
}

func TestSlidingWindowCache(t *testing.T) {
	m := tinySWA(t)
	stories := modeltest.Shared(t, "stories260K.gguf", true)
	for _, tc := range []struct {
		name string
		m    *llama.Model
		opts llama.ContextOptions
		want int
	}{
		{"windowed by default", m, llama.ContextOptions{ContextSize: 1024, UBatchSize: 32}, 32},
		{"SWAFull", m, llama.ContextOptions{ContextSize: 1024, UBatchSize: 32, SWAFull: true}, 0},
		{"context within the window's cache", m, llama.ContextOptions{ContextSize: 256, UBatchSize: 32}, 0},
		{"no sliding-window layers", stories, llama.ContextOptions{ContextSize: 1024, UBatchSize: 32}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := modeltest.NewContext(t, tc.m, tc.opts)
			assert.Equal(t, tc.want, c.SlidingWindow())
			assert.Equal(t, tc.want == 0, c.Memory().CanShift(), "a windowed cache cannot shift")
		})
	}
}

// TestWindowedMemoryRefusals: what a windowed cache cannot do is an error
// matching ErrUnsupported, and the sequence is left as it was.
func TestWindowedMemoryRefusals(t *testing.T) {
	m := tinySWA(t)
	toks := swaTokens(m, 600)
	for _, full := range []bool{false, true} {
		c := modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 1024, UBatchSize: 32, SWAFull: full})
		decodeRange(t, c, toks, 0)
		lo, hi, err := c.Memory().PosRange(0)
		require.NoError(t, err)
		require.Equal(t, 599, hi)
		if full {
			require.Equal(t, 0, lo)
		} else {
			require.Greater(t, lo, 0, "the window's cache has overwritten the oldest positions")
		}
		for _, tc := range []struct {
			name   string
			p0, p1 int
			refuse bool
		}{
			{"middle span", 100, 120, true},
			{"tail the window lost", 100, -1, true},
			{"empty span", 100, 100, false},
			{"tail the window holds", 590, -1, false},
			{"whole sequence", 0, -1, false},
		} {
			ok, err := c.Memory().Remove(0, tc.p0, tc.p1)
			if tc.refuse && !full {
				require.ErrorIs(t, err, llama.ErrUnsupported, tc.name)
				l2, h2, err := c.Memory().PosRange(0)
				require.NoError(t, err)
				assert.Equal(t, []int{lo, hi}, []int{l2, h2}, "%s: the sequence is untouched", tc.name)
				continue
			}
			require.NoError(t, err, tc.name)
			require.True(t, ok, tc.name)
			if tc.p1 >= 0 {
				continue // nothing removed
			}
			decodeRange(t, c, toks[max(tc.p0, 0):], max(tc.p0, 0)) // put it back
			lo, hi, err = c.Memory().PosRange(0)
			require.NoError(t, err)
		}
		err = c.Memory().Shift(0, 10, 20, -5)
		if full {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, llama.ErrUnsupported)
		}
	}
}

// TestSeqStatePartialCheckpoint: a partial state (the window's part) taken
// at position 150 and restored later lets the sequence go back there:
// the logits after decoding on from it match a fresh decode.
func TestSeqStatePartialCheckpoint(t *testing.T) {
	m := tinySWA(t)
	toks := swaTokens(m, 600)
	want := decodeRange(t, modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 1024, UBatchSize: 32}), toks[:220], 0)

	c := modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 1024, UBatchSize: 32})
	require.Equal(t, 32, c.SlidingWindow())
	decodeRange(t, c, toks[:150], 0)
	ck, err := c.SeqStatePartial(0)
	require.NoError(t, err)
	full, err := c.SeqState(0)
	require.NoError(t, err)
	require.Less(t, len(ck), len(full), "the checkpoint holds the window only")
	appended, err := c.AppendSeqStatePartial([]byte("head"), 0)
	require.NoError(t, err)
	require.Equal(t, append([]byte("head"), ck...), appended)
	ckLo, ckHi, err := c.Memory().PosRange(0)
	require.NoError(t, err)
	require.Equal(t, 149, ckHi)
	decodeRange(t, c, toks[150:], 150)

	// Without the checkpoint the window cannot go back to 149.
	_, err = c.Memory().Remove(0, ckHi, -1)
	require.ErrorIs(t, err, llama.ErrUnsupported)

	require.NoError(t, c.SetSeqStatePartial(0, ck))
	lo, hi, err := c.Memory().PosRange(0)
	require.NoError(t, err)
	assert.Equal(t, ckHi, hi)
	assert.LessOrEqual(t, lo, ckHi-32+1, "the window of %d before %d", 32, ckHi)
	assert.GreaterOrEqual(t, lo, ckLo)
	ok, err := c.Memory().Remove(0, ckHi, -1)
	require.NoError(t, err)
	require.True(t, ok)
	got := decodeRange(t, c, toks[ckHi:220], ckHi)
	assert.InDeltaSlice(t, want, got, 1e-3)

	// Bad input.
	require.ErrorIs(t, c.SetSeqStatePartial(0, nil), llama.ErrInvalid)
	require.ErrorIs(t, c.SetSeqStatePartial(5, ck), llama.ErrInvalid)
	_, err = c.SeqStatePartial(-1)
	require.ErrorIs(t, err, llama.ErrInvalid)
}
