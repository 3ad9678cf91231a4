//go:build realmodel

package llama_test

import (
	"context"
	"testing"

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
