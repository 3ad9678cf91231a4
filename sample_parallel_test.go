package llama_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// parallelStep decodes one batch of n sequences on a fresh context of
// llama-2-tiny-random (32k vocabulary), each its own prompt, and returns
// the context and the batch index of each sequence's output.
func parallelStep(t *testing.T, n int) (*llama.Model, *llama.Context, []int) {
	m := tinyRandom(t)
	c := modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 64 * n, Sequences: n, Threads: 2})
	b := llama.NewBatch(16*n, 1)
	var idx []int
	for s := range n {
		toks, err := m.Tokenize(fmt.Sprintf("Story %d: once upon a time", s), llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		for i, tok := range toks {
			require.NoError(t, b.Add(tok, i, s, i == len(toks)-1))
		}
		idx = append(idx, b.Len()-1)
	}
	require.NoError(t, c.Decode(context.Background(), b))
	return m, c, idx
}

// TestSampleParallel holds Context.SampleParallel against Sample called
// job after job on twin chains (same samplers, same seeds): the same
// tokens round after round (each round draws again from every chain's
// random state), for chains on the top-k fast path, on llama.cpp's own
// path, with a Go sampler, a chain given twice, and any worker count.
func TestSampleParallel(t *testing.T) {
	const n = 6
	m, c, idx := parallelStep(t, n)
	specs := map[string]func(seed uint32) []llama.Sampler{
		"fast": func(seed uint32) []llama.Sampler {
			return []llama.Sampler{llama.TopK(40), llama.TopP(0.95, 1), llama.MinP(0.05, 1), llama.Temp(0.8), llama.Dist(seed)}
		},
		"C path": func(seed uint32) []llama.Sampler {
			return []llama.Sampler{llama.Temp(1.2), llama.MinP(0.001, 1), llama.Dist(seed)}
		},
		"Go sampler": func(seed uint32) []llama.Sampler {
			return []llama.Sampler{llama.Custom(&banSampler{ban: 2}), llama.TopK(8), llama.Dist(seed)}
		},
	}
	for _, workers := range []int{0, 1, 2, 4} {
		for name, spec := range specs {
			t.Run(fmt.Sprintf("%s/workers=%d", name, workers), func(t *testing.T) {
				var serial, par []*llama.SamplerChain
				for s := range n {
					for _, set := range []*[]*llama.SamplerChain{&serial, &par} {
						ch, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, spec(uint32(100+s))...)
						require.NoError(t, err)
						t.Cleanup(func() { ch.Close() })
						*set = append(*set, ch)
					}
				}
				// The last job gives the first chain again, on another row:
				// it must run after the first job, as Sample would.
				jobs := make([]llama.SampleJob, n+1)
				for round := range 4 {
					want := make([]llama.Token, n+1)
					for s := range n {
						tok, err := serial[s].Sample(c, idx[s])
						require.NoError(t, err)
						want[s] = tok
					}
					tok, err := serial[0].Sample(c, idx[n-1])
					require.NoError(t, err)
					want[n] = tok
					for s := range n {
						jobs[s] = llama.SampleJob{Chain: par[s], Index: idx[s]}
					}
					jobs[n] = llama.SampleJob{Chain: par[0], Index: idx[n-1]}
					require.NoError(t, c.SampleParallel(jobs, workers))
					got := make([]llama.Token, n+1)
					for i, j := range jobs {
						require.NoError(t, j.Err, "job %d", i)
						got[i] = j.Token
					}
					assert.Equal(t, want, got, "round %d", round)
				}
			})
		}
	}
}

// TestSampleParallelErrors: a job's error stays in the job, the others
// are sampled; a closed context fails the call.
func TestSampleParallelErrors(t *testing.T) {
	m, c, idx := parallelStep(t, 3)
	chain := func() *llama.SamplerChain {
		ch, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.TopK(10), llama.Dist(1))
		require.NoError(t, err)
		t.Cleanup(func() { ch.Close() })
		return ch
	}
	closed := chain()
	require.NoError(t, closed.Close())
	jobs := []llama.SampleJob{
		{Chain: chain(), Index: idx[0]},
		{Chain: nil, Index: idx[1]},
		{Chain: chain(), Index: 1}, // a prompt token without output
		{Chain: closed, Index: idx[1]},
		{Chain: chain(), Index: idx[2]},
	}
	require.NoError(t, c.SampleParallel(jobs, 2))
	for i, wantErr := range []bool{false, true, true, true, false} {
		if wantErr {
			assert.Error(t, jobs[i].Err, "job %d", i)
			assert.Equal(t, llama.NoToken, jobs[i].Token, "job %d", i)
		} else {
			assert.NoError(t, jobs[i].Err, "job %d", i)
			assert.GreaterOrEqual(t, int(jobs[i].Token), 0, "job %d", i)
		}
	}
	require.NoError(t, c.Close())
	assert.Error(t, c.SampleParallel(jobs[:1], 2))
}
