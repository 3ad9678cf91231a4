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
