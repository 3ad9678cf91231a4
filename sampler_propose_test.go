package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// Propose then Accept is Sample: two chains of the same seed, one sampling
// and one proposing and accepting, pick the same tokens step after step,
// on the top-k fast path and on llama.cpp's; a proposal that is not
// accepted leaves the chain's history alone (the penalties see only what
// was accepted), and the random state moves on as in Sample.
func TestPropose(t *testing.T) {
	m := stories(t)
	ctx := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	for _, tc := range []struct {
		name     string
		samplers func() []llama.Sampler
		fast     bool
	}{
		{"fast path", func() []llama.Sampler {
			return []llama.Sampler{llama.TopK(40), llama.TopP(0.95, 0), llama.MinP(0.05, 0), llama.TempExt(0.8, 0, 1), llama.Dist(7)}
		}, true},
		{"llama.cpp's chain", func() []llama.Sampler {
			return []llama.Sampler{llama.Penalties(64, 1.3, 0, 0), llama.TopK(40), llama.Temp(0.9), llama.Dist(7)}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sample, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tc.samplers()...)
			require.NoError(t, err)
			defer sample.Close()
			propose, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tc.samplers()...)
			require.NoError(t, err)
			defer propose.Close()
			assert.Equal(t, tc.fast, llama.FastPath(propose))
			require.NoError(t, ctx.Memory().Clear())
			b := llama.NewBatch(8, 1)
			tok := m.SpecialTokens().BOS
			distinct := map[llama.Token]bool{}
			for pos := range 120 {
				b.Clear()
				require.NoError(t, b.Add(tok, pos, 0, true))
				require.NoError(t, ctx.Decode(context.Background(), b))
				if pos%10 == 5 {
					// A rejected proposal: both chains draw once and
					// accept nothing.
					_, err := propose.Propose(ctx, 0)
					require.NoError(t, err)
					_, err = sample.Propose(ctx, 0)
					require.NoError(t, err)
				}
				want, err := sample.Sample(ctx, 0)
				require.NoError(t, err)
				got, err := propose.Propose(ctx, 0)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d", pos)
				require.NoError(t, propose.Accept(got))
				distinct[got] = true
				tok = got
			}
			assert.Greater(t, len(distinct), 5, "the chain samples, not just the best token")
		})
	}
}
