package llama_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

func TestEmbed(t *testing.T) {
	m := stories(t)
	for _, unified := range []bool{true, false} {
		embedCase(t, m, unified)
	}
}

func embedCase(t *testing.T, m *llama.Model, unified bool) {
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Embeddings: true, Pooling: llama.PoolingMean, Sequences: 2, KVUnified: unified})
	texts := []string{"Once upon a time", "The cat sat on the mat", "Once upon a time", "A dog"}
	vecs, err := c.Embed(context.Background(), texts, llama.EmbedOptions{})
	require.NoError(t, err)
	require.Len(t, vecs, 4)
	for _, v := range vecs {
		require.Len(t, v, 64)
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		assert.InDelta(t, 1, math.Sqrt(n), 1e-4)
	}
	assert.InDeltaSlice(t, vecs[0], vecs[2], 1e-5, "same text, same vector, across batches")
	assert.NotEqual(t, vecs[0], vecs[1])
	// One at a time gives the same vectors.
	one, err := c.Embed(context.Background(), texts[1:2], llama.EmbedOptions{})
	require.NoError(t, err)
	assert.InDeltaSlice(t, vecs[1], one[0], 1e-5)

	if unified {
		return
	}
	_, err = c.Embed(context.Background(), []string{""}, llama.EmbedOptions{})
	assert.ErrorIs(t, err, llama.ErrInvalid)
	plain := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	_, err = plain.Embed(context.Background(), texts, llama.EmbedOptions{})
	assert.ErrorIs(t, err, llama.ErrUnsupported)
}

func TestEmbeddings(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Embeddings: true, Pooling: llama.PoolingMean, Sequences: 2})
	assert.Equal(t, llama.PoolingMean, c.Pooling())
	b := llama.NewBatch(64, 1)
	for s, text := range []string{"Once upon a time", "The cat sat"} {
		toks, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		require.NoError(t, b.AddSequence(toks, 0, s, true))
	}
	require.NoError(t, c.Decode(context.Background(), b))
	var vecs [][]float32
	for s := range 2 {
		e, err := c.SeqEmbeddings(s)
		require.NoError(t, err)
		require.Len(t, e, 64)
		v := llama.Normalize(append([]float32(nil), e...), 2)
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		assert.InDelta(t, 1, n, 1e-4)
		vecs = append(vecs, v)
	}
	assert.NotEqual(t, vecs[0], vecs[1])
}

// TestEmbedNorms: each Norm gives the vector llama.Normalize gives with
// llama.cpp's embd_normalize number, the raw vector included, and an
// unknown one is refused.
func TestEmbedNorms(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Embeddings: true, Pooling: llama.PoolingMean})
	text := []string{"The cat sat on the mat"}
	raw, err := c.Embed(context.Background(), text, llama.EmbedOptions{Normalize: llama.NormNone})
	require.NoError(t, err)
	for _, tc := range []struct {
		norm llama.Norm
		p    int
		size func([]float32) float64 // 1 for L2 and L1, 32760 for max-abs
		want float64
	}{
		{llama.NormL2, 2, func(v []float32) float64 {
			var s float64
			for _, x := range v {
				s += float64(x) * float64(x)
			}
			return math.Sqrt(s)
		}, 1},
		{llama.NormL1, 1, func(v []float32) float64 {
			var s float64
			for _, x := range v {
				s += math.Abs(float64(x))
			}
			return s
		}, 1},
		{llama.NormMaxAbs, 0, func(v []float32) float64 {
			var s float64
			for _, x := range v {
				s = math.Max(s, math.Abs(float64(x)))
			}
			return s
		}, 32760},
	} {
		assert.Equal(t, tc.p, tc.norm.EmbdNormalize())
		got, err := c.Embed(context.Background(), text, llama.EmbedOptions{Normalize: tc.norm})
		require.NoError(t, err)
		assert.InDeltaSlice(t, llama.Normalize(append([]float32(nil), raw[0]...), tc.p), got[0], 1e-3, "norm %d", tc.norm)
		assert.InDelta(t, tc.want, tc.size(got[0]), tc.want*1e-4, "norm %d", tc.norm)
	}
	assert.Equal(t, -1, llama.NormNone.EmbdNormalize())
	assert.NotEqual(t, raw[0], llama.Normalize(append([]float32(nil), raw[0]...), 2), "the raw vector is not unit length already")
	_, err = c.Embed(context.Background(), text, llama.EmbedOptions{Normalize: 7})
	assert.ErrorIs(t, err, llama.ErrInvalid)
}
