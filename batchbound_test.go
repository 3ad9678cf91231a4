package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// outputsBatch returns a batch of n tokens of sequence 0 from position 0;
// the entries listed in outputs ask for their output.
func outputsBatch(t *testing.T, n int, outputs ...int) *llama.Batch {
	t.Helper()
	b := llama.NewBatch(n, 1)
	for i := range n {
		require.NoError(t, b.Add(llama.Token(10+i), i, 0, false))
	}
	for _, i := range outputs {
		b.SetOutput(i, true)
	}
	return b
}

// TestNonCausalBatchBound: without causal attention (ContextOptions.
// Attention, SetCausalAttention(false)) llama.cpp computes a batch in one
// micro-batch, and a batch past UBatchSize ended the process in its
// GGML_ASSERT ("non-causal attention requires n_ubatch >= n_tokens");
// Decode refuses it with ErrInvalid, and a causal context still splits it.
func TestNonCausalBatchBound(t *testing.T) {
	m := stories(t)
	base := llama.ContextOptions{ContextSize: 256, BatchSize: 64, UBatchSize: 8, Threads: 1}
	nonCausal := base
	nonCausal.Attention = llama.AttentionNonCausal
	tests := []struct {
		name  string
		opts  llama.ContextOptions
		setup func(c *llama.Context) error
		n     int
		want  error
	}{
		{"causal, past the micro-batch", base, nil, 16, nil},
		{"Attention non-causal, past the micro-batch", nonCausal, nil, 16, llama.ErrInvalid},
		{"Attention non-causal, within the micro-batch", nonCausal, nil, 8, nil},
		{"SetCausalAttention(false), past the micro-batch", base, func(c *llama.Context) error { return c.SetCausalAttention(false) }, 16, llama.ErrInvalid},
		{"SetCausalAttention(true) again", nonCausal, func(c *llama.Context) error { return c.SetCausalAttention(true) }, 16, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCtx(t, m, tt.opts)
			if tt.setup != nil {
				require.NoError(t, tt.setup(c))
			}
			err := c.Decode(context.Background(), outputsBatch(t, tt.n, tt.n-1))
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			assert.ErrorContains(t, err, "micro-batch")
		})
	}
}
