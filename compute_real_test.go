//go:build realmodel

package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestComputeCanceledBusyEncode: Encode's guard, on an encoder (BERT-like)
// model.
func TestComputeCanceledBusyEncode(t *testing.T) {
	m := loadModelPath(t, testenv.RealModel(t, "all-minilm-l6-v2"))
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Embeddings: true, Pooling: llama.PoolingMean})
	b := promptBatch(t, m, "Once upon a time there was a little girl")
	checkComputeCanceledBusy(t, []computeCase{{
		name: "encode",
		run:  func(ctx context.Context) error { return c.Encode(ctx, b) },
	}})
}

// promptBatch returns a batch of text's tokens in sequence 0, the last
// one's output asked for.
func promptBatch(t *testing.T, m *llama.Model, text string) *llama.Batch {
	toks, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	b := llama.NewBatch(len(toks), 1)
	for i, tok := range toks {
		require.NoError(t, b.Add(tok, i, 0, i == len(toks)-1))
	}
	return b
}
