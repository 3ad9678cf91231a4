package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// backendRun decodes n tokens on sequences 0 and 1 of c from the prompt
// toks (both sequences get it), sampling sequence s with chains[s], and
// returns the tokens of each.
func backendRun(t *testing.T, c *llama.Context, chains []*llama.SamplerChain, toks []llama.Token, n int) [][]llama.Token {
	t.Helper()
	require.NoError(t, c.Memory().Clear())
	b := llama.NewBatch(64, 1)
	for s := range chains {
		for i, tok := range toks {
			require.NoError(t, b.Add(tok, i, s, i == len(toks)-1))
		}
	}
	out := make([][]llama.Token, len(chains))
	idx := []int{len(toks) - 1, 2*len(toks) - 1}
	for pos := len(toks); len(out[0]) < n; pos++ {
		require.NoError(t, c.Decode(context.Background(), b))
		b.Clear()
		for s, ch := range chains {
			tok, err := ch.Sample(c, idx[s])
			require.NoError(t, err)
			out[s] = append(out[s], tok)
			require.NoError(t, b.Add(tok, pos, s, true))
			idx[s] = s
		}
	}
	return out
}

// TestSetSampler: chains attached with SetSampler sample inside the decode;
// greedy gives the CPU's argmax tokens, a seeded chain repeats itself, and
// misuse (chains that cannot run there, a second sequence, another model,
// closing while attached) errs or detaches without crashing.
func TestSetSampler(t *testing.T) {
	m := stories(t)
	toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	chain := func(ss ...llama.Sampler) *llama.SamplerChain {
		c, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, ss...)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	random := func(seed uint32) []llama.Sampler {
		return []llama.Sampler{llama.Penalties(64, 1.1, 0, 0), llama.LogitBias(map[llama.Token]float32{2: -1}),
			llama.TopK(40), llama.TopP(0.95, 1), llama.MinP(0.05, 1), llama.TempExt(0.8, 0, 1), llama.Dist(seed)}
	}
	for _, tc := range []struct {
		name  string
		chain func(seq int) *llama.SamplerChain
	}{
		{"greedy", func(int) *llama.SamplerChain { return chain(llama.Greedy()) }},
		{"seeded", func(seq int) *llama.SamplerChain { return chain(random(uint32(7 + seq))...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpuC := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Sequences: 2})
			cpu := backendRun(t, cpuC, []*llama.SamplerChain{tc.chain(0), tc.chain(1)}, toks, 24)
			var runs [][][]llama.Token
			for range 2 {
				c := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Sequences: 2})
				chains := []*llama.SamplerChain{tc.chain(0), tc.chain(1)}
				for s, ch := range chains {
					require.True(t, ch.Offloadable())
					require.NoError(t, c.SetSampler(s, ch))
				}
				runs = append(runs, backendRun(t, c, chains, toks, 24))
				_, err := c.Logits(0)
				assert.Error(t, err, "no logits for a backend-sampled output")
			}
			assert.Equal(t, runs[0], runs[1], "the same seeds, the same tokens")
			for _, seq := range runs[0] {
				for _, tok := range seq {
					assert.NoError(t, m.CheckToken(tok))
				}
			}
			if tc.name == "greedy" {
				assert.Equal(t, cpu, runs[0], "greedy on the backend is the CPU's argmax")
			}
		})
	}

	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Sequences: 2})
	other := loadModel(t, "stories260K.gguf")
	otherChain, err := llama.NewSamplerChain(other, llama.SamplerChainOptions{}, llama.Greedy())
	require.NoError(t, err)
	defer otherChain.Close()
	perf, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Perf: true}, llama.Greedy())
	require.NoError(t, err)
	defer perf.Close()
	g := chain(llama.Greedy())
	for _, tc := range []struct {
		name  string
		seq   int
		chain *llama.SamplerChain
		want  error
	}{
		{"typical", 0, chain(llama.Typical(0.9, 1), llama.Dist(1)), llama.ErrUnsupported},
		{"grammar", 0, chain(mustGrammar(t, `root ::= "a"`).Sampler(), llama.Greedy()), llama.ErrUnsupported},
		{"timings", 0, perf, llama.ErrUnsupported},
		{"another model", 0, otherChain, llama.ErrInvalid},
		{"sequence out of range", 2, g, llama.ErrInvalid},
		{"negative sequence", -1, g, llama.ErrInvalid},
	} {
		assert.ErrorIs(t, c.SetSampler(tc.seq, tc.chain), tc.want, tc.name)
	}
	require.NoError(t, c.SetSampler(0, g))
	require.NoError(t, c.SetSampler(0, g), "attaching again is a no-op")
	assert.ErrorIs(t, c.SetSampler(1, g), llama.ErrInvalid, "one chain, one sequence")

	// Closing an attached chain detaches it: the context decodes and
	// samples on the CPU again.
	require.NoError(t, g.Close())
	cpuG := chain(llama.Greedy())
	out := backendRun(t, c, []*llama.SamplerChain{cpuG, chain(llama.Greedy())}, toks, 4)
	assert.Len(t, out[0], 4)
	// Replacing and detaching.
	a, b := chain(llama.Greedy()), chain(llama.Greedy())
	require.NoError(t, c.SetSampler(0, a))
	require.NoError(t, c.SetSampler(0, b))
	// llama.cpp prepares a chain for the graph once (it aborts on a second
	// time): a replaced or detached chain is refused.
	assert.ErrorIs(t, c.SetSampler(1, a), llama.ErrInvalid, "a replaced chain")
	require.NoError(t, c.SetSampler(0, nil))
	assert.ErrorIs(t, c.SetSampler(0, b), llama.ErrInvalid, "a detached chain")
	// and no longer samples at all: llama.cpp's own apply would skip the
	// samplers that ran on the backend (and abort).
	out = backendRun(t, c, []*llama.SamplerChain{chain(llama.Greedy()), chain(llama.Greedy())}, toks, 1)
	assert.Len(t, out[0], 1, "fresh chains sample on the CPU there")
	_, err = a.Sample(c, 0)
	assert.ErrorIs(t, err, llama.ErrInvalid, "sample with a detached chain")
	_, _, err = b.Apply([]llama.TokenData{{ID: 1, Logit: 1}})
	assert.ErrorIs(t, err, llama.ErrInvalid, "apply with a detached chain")
	_, err = b.Clone()
	assert.ErrorIs(t, err, llama.ErrInvalid, "clone of a detached chain")
	// Sampling a backend-sampled output with another chain errs.
	x, y := chain(llama.Greedy()), chain(llama.Greedy())
	require.NoError(t, c.SetSampler(0, x))
	require.NoError(t, c.SetSampler(1, y))
	bt := llama.NewBatch(8, 1)
	require.NoError(t, c.Memory().Clear())
	require.NoError(t, bt.Add(toks[0], 0, 0, true))
	require.NoError(t, bt.Add(toks[0], 0, 1, true))
	require.NoError(t, c.Decode(context.Background(), bt))
	_, err = y.Sample(c, 0)
	assert.ErrorIs(t, err, llama.ErrInvalid, "output 0 is sequence 0's")
	_, err = cpuG.Sample(c, 1)
	assert.ErrorIs(t, err, llama.ErrInvalid, "a chain not attached")
	_, err = x.Sample(c, 0)
	assert.NoError(t, err)
	// Two outputs of one backend-sampled sequence in a batch: llama.cpp
	// samples one output a sequence; refused before it sees the batch.
	bt.Clear()
	require.NoError(t, bt.Add(toks[1], 1, 0, true))
	require.NoError(t, bt.Add(toks[2], 2, 0, true))
	assert.ErrorIs(t, c.Decode(context.Background(), bt), llama.ErrInvalid)
	bt.Clear()
	require.NoError(t, bt.Add(toks[1], 1, 0, true))
	require.NoError(t, c.Decode(context.Background(), bt), "the context decodes on")
	_, err = x.Sample(c, 0)
	assert.NoError(t, err)
	// Closing the context first, then the chain: nothing is freed twice.
	c2, err := m.NewContext(llama.ContextOptions{ContextSize: 512, Sequences: 2, Threads: 1})
	require.NoError(t, err)
	z, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Greedy())
	require.NoError(t, err)
	require.NoError(t, c2.SetSampler(0, z))
	require.NoError(t, c2.Close())
	require.NoError(t, z.Close())
	_, err = z.Sample(c, 0)
	assert.ErrorIs(t, err, llama.ErrClosed)
}
