package engine

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"

	"github.com/x/llama/sampling"
)

// TestEngineBackendSampling: requests with BackendSampling sample inside the
// decode when llama.cpp can run their chain there: greedy ones give the
// tokens they give on the CPU, seeded ones repeat themselves, several at
// once share the steps; a grammar, n_probs or a sampler the backend lacks
// falls back to the CPU, and each request gets a new chain, so slots that
// go from one request to the next never attach a chain twice.
func TestEngineBackendSampling(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Parallel: 3, Context: llama.ContextOptions{ContextSize: 3 * 256}})
	prompt := engTokenize(t, m, "Once upon a time", true)
	task := func(bs bool, edit func(p *sampling.Params)) *Request {
		r := engGreedyTask(prompt, 24)
		r.Params.BackendSampling = bs
		if edit != nil {
			edit(&r.Params)
		}
		return r
	}
	seeded := func(p *sampling.Params) { p.Temperature, p.Seed, p.RepeatPenalty = 0.8, 42, 1.1 }
	backend := func() int {
		var n int
		require.NoError(t, e.do(func() { n = e.nBackend }))
		return n
	}
	for _, tc := range []struct {
		name    string
		edit    func(p *sampling.Params)
		offload bool
		sameCPU bool // the same tokens as on the CPU
	}{
		{"greedy", nil, true, true},
		{"seeded", seeded, true, false},
		{"ignore_eos and a bias", func(p *sampling.Params) {
			seeded(p)
			p.IgnoreEOS, p.LogitBias = true, map[llama.Token]float32{13: -2}
		}, true, false},
		{"grammar", func(p *sampling.Params) { p.Grammar = `root ::= [a-z ]+` }, false, true},
		{"n_probs", func(p *sampling.Params) { p.NProbs = 2 }, false, true},
		{"typical", func(p *sampling.Params) { seeded(p); p.TypicalP = 0.9 }, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpu := engRun(t, e, task(false, tc.edit))
			before := backend()
			a := engRun(t, e, task(true, tc.edit))
			b := engRun(t, e, task(true, tc.edit))
			if tc.offload {
				assert.Equal(t, before+2, backend(), "both sampled on the backend")
			} else {
				assert.Equal(t, before, backend(), "on the CPU")
			}
			assert.Equal(t, a.tokens, b.tokens, "the same request, the same tokens")
			assert.Len(t, a.tokens, 24)
			if tc.sameCPU {
				assert.Equal(t, cpu.tokens, a.tokens)
			}
		})
	}
	// Prompt probabilities (every prompt position an output, more than a
	// backend chain takes for a sequence): sampled on the CPU.
	before := backend()
	pp := task(true, nil)
	pp.PromptProbs = true
	r := engRun(t, e, pp)
	assert.Equal(t, before, backend(), "on the CPU")
	require.NotEmpty(t, r.events)
	require.Len(t, r.events[0].PromptProbs, len(prompt)-1)
	assert.Empty(t, r.events[0].PromptProbs[0].Top, "n_probs 0: no alternatives")
	assert.Equal(t, prompt[1], r.events[0].PromptProbs[0].Token.Token)
	// Three at once, greedy: the tokens each gives alone.
	alone := engRun(t, e, task(true, nil))
	var wg sync.WaitGroup
	res := make([]engResult, 3)
	for i := range res {
		wg.Go(func() {
			st, err := e.Submit(t.Context(), task(true, nil))
			if assert.NoError(t, err) {
				res[i] = engCollect(t, st)
			}
		})
	}
	wg.Wait()
	for _, r := range res {
		assert.NoError(t, r.done.Err)
		assert.Equal(t, alone.tokens, r.tokens)
	}
}
