package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestSampleAllocs holds the per-token calls to no allocation: sampling a
// row or proposing a token (the fast path and llama.cpp's own chain), the
// end-of-generation check and reading a row's logits.
func TestSampleAllocs(t *testing.T) {
	if testenv.Race {
		t.Skip("the race detector's sync.Pool drops entries at random")
	}
	m := stories(t)
	ctx := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	b := llama.NewBatch(8, 1)
	require.NoError(t, b.Add(m.SpecialTokens().BOS, 0, 0, true))
	require.NoError(t, ctx.Decode(context.Background(), b))
	eos := m.SpecialTokens().EOS
	for _, tc := range []struct {
		name     string
		samplers []llama.Sampler
	}{
		{"fast path", []llama.Sampler{llama.TopK(40), llama.TopP(0.95, 0), llama.MinP(0.05, 0), llama.TempExt(0.8, 0, 1), llama.Dist(7)}},
		{"llama.cpp's chain", []llama.Sampler{llama.Penalties(64, 1.1, 0, 0), llama.TopK(40), llama.Dist(7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tc.samplers...)
			require.NoError(t, err)
			defer chain.Close()
			assert.Zero(t, testing.AllocsPerRun(100, func() {
				if _, err := chain.Sample(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}), "Sample")
			assert.Zero(t, testing.AllocsPerRun(100, func() {
				if _, err := chain.Propose(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}), "Propose")
		})
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { m.IsEOG(eos) }), "IsEOG")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := ctx.Logits(0); err != nil {
			t.Fatal(err)
		}
	}), "Logits")
}
