package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestTopProbsOrder: many entries are found by sorting the row and few by
// insertion; both give the same order, ties by token id.
func TestTopProbsOrder(t *testing.T) {
	_, e := newEngTestEngine(t, Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 256}})
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 500)
	for i := range logits {
		logits[i] = float32(rng.IntN(40)) / 4 // many ties
	}
	var all []TokenProb
	require.NoError(t, e.do(func() { all, _ = e.topProbs(logits, len(logits), 3) }))
	require.Len(t, all, len(logits))
	for _, n := range []int{1, 10, topProbsInsert, topProbsInsert + 1, 200} {
		var few []TokenProb
		var sampled *TokenProb
		require.NoError(t, e.do(func() { few, sampled = e.topProbs(logits, n, 3) }))
		require.Equal(t, all[:n], few, "n=%d", n)
		require.Equal(t, llama.Token(3), sampled.Token)
	}
}
