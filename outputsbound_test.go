package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestOutputsBound: llama.cpp reserves an output row for every sequence
// and every output, and asserted that they fit its n_outputs_max
// (OutputsMax, else the batch size), ending the process at NewContext or
// at the first Decode. Sequences past the batch size now raise it,
// OutputsMax below Sequences is refused, and a decode of more outputs than
// OutputsMax (every token is one with embeddings on) is an ErrInvalid.
func TestOutputsBound(t *testing.T) {
	m := stories(t)
	tests := []struct {
		name      string
		opts      llama.ContextOptions
		newErr    error
		batch     func(t *testing.T) *llama.Batch
		decodeErr error
	}{
		{"Sequences above BatchSize", llama.ContextOptions{ContextSize: 256, Sequences: 8, BatchSize: 4}, nil,
			func(t *testing.T) *llama.Batch { return outputsBatch(t, 2, 1) }, nil},
		{"Sequences above a small context", llama.ContextOptions{ContextSize: 64, Sequences: 256}, nil,
			func(t *testing.T) *llama.Batch { return outputsBatch(t, 4, 3) }, nil},
		{"OutputsMax below Sequences", llama.ContextOptions{ContextSize: 256, Sequences: 4, OutputsMax: 2}, llama.ErrInvalid, nil, nil},
		{"outputs past OutputsMax", llama.ContextOptions{ContextSize: 64, BatchSize: 32, OutputsMax: 2}, nil,
			func(t *testing.T) *llama.Batch { return outputsBatch(t, 8, 0, 1, 2, 3, 4, 5, 6, 7) }, llama.ErrInvalid},
		{"outputs within OutputsMax", llama.ContextOptions{ContextSize: 64, BatchSize: 32, OutputsMax: 2}, nil,
			func(t *testing.T) *llama.Batch { return outputsBatch(t, 8, 3, 7) }, nil},
		{"embeddings: every token is an output", llama.ContextOptions{ContextSize: 64, BatchSize: 32, OutputsMax: 2, Embeddings: true, Pooling: llama.PoolingNone}, nil,
			func(t *testing.T) *llama.Batch { return outputsBatch(t, 8, 7) }, llama.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Threads = 1
			c, err := m.NewContext(tt.opts)
			if tt.newErr != nil {
				require.ErrorIs(t, err, tt.newErr)
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			err = c.Decode(context.Background(), tt.batch(t))
			if tt.decodeErr != nil {
				require.ErrorIs(t, err, tt.decodeErr)
				return
			}
			require.NoError(t, err)
			var gen error
			for _, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 4, Seq: c.Sequences() - 1}).Seq() {
				if err != nil {
					gen = err
				}
			}
			require.NoError(t, gen)
		})
	}
}
