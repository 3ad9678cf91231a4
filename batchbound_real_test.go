//go:build realmodel

package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestEncoderDecodeBatchBound: a BERT-like model has no KV memory, so
// llama.cpp's decode is an encode, which asserted that the batch fits the
// micro-batch and ended the process; Decode refuses a larger batch with
// ErrInvalid, as Encode does.
func TestEncoderDecodeBatchBound(t *testing.T) {
	m := loadModelPath(t, testenv.RealModel(t, "all-minilm-l6-v2"))
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512, BatchSize: 256, UBatchSize: 64, Embeddings: true})
	for _, tt := range []struct {
		n    int
		want error
	}{{64, nil}, {100, llama.ErrInvalid}} {
		err := c.Decode(context.Background(), outputsBatch(t, tt.n, tt.n-1))
		if tt.want == nil {
			require.NoError(t, err, "%d tokens", tt.n)
		} else {
			require.ErrorIs(t, err, tt.want, "%d tokens", tt.n)
		}
	}
}
