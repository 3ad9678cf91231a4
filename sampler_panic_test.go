package llama_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// panicSampler is a Go sampler that panics in the method named by on
// (while armed), and otherwise passes the candidates on untouched.
type panicSampler struct {
	on    string
	armed bool
}

func (p *panicSampler) Name() string { return "panicky" }
func (p *panicSampler) hit(m string) {
	if p.armed && p.on == m {
		panic("boom in " + m)
	}
}
func (p *panicSampler) Apply(*llama.Candidates) { p.hit("apply") }
func (p *panicSampler) Accept(llama.Token)      { p.hit("accept") }
func (p *panicSampler) Reset()                  { p.hit("reset") }
func (p *panicSampler) Clone() llama.CustomSampler {
	p.hit("clone")
	return &panicSampler{on: p.on}
}

// TestCustomSamplerPanic: a Go sampler's panic, in any method llama.cpp
// calls, comes back as the chain call's *PanicError naming the sampler,
// the method and the value, with the stack; the chain and the context
// work on once the sampler stops panicking, and a SampleParallel job whose
// chain panics fails alone.
func TestCustomSamplerPanic(t *testing.T) {
	m, c, idx := parallelStep(t, 3)
	for _, method := range []string{"apply", "accept", "reset", "clone"} {
		t.Run(method, func(t *testing.T) {
			ps := &panicSampler{on: method}
			ch, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Custom(ps), llama.Greedy())
			require.NoError(t, err)
			defer ch.Close()
			want, err := ch.Sample(c, idx[0])
			require.NoError(t, err)

			ps.armed = true
			switch method {
			case "apply", "accept":
				_, err = ch.Sample(c, idx[0])
			case "reset":
				err = ch.Reset()
			case "clone":
				_, err = ch.Clone()
			}
			var pe *llama.PanicError
			require.True(t, errors.As(err, &pe), "error %v", err)
			assert.Equal(t, "boom in "+method, pe.Value)
			assert.Contains(t, err.Error(), "custom sampler panicky: "+method+": panic: boom in "+method)
			assert.Contains(t, string(pe.Stack), "hit")

			ps.armed = false
			got, err := ch.Sample(c, idx[0])
			require.NoError(t, err)
			assert.Equal(t, want, got, "greedy sampling after the panic")
		})
	}
	t.Run("SampleParallel", func(t *testing.T) {
		var chains []*llama.SamplerChain
		var jobs []llama.SampleJob
		for i, at := range idx {
			ps := &panicSampler{on: "apply", armed: i == 1}
			ch, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Custom(ps), llama.Greedy())
			require.NoError(t, err)
			defer ch.Close()
			chains = append(chains, ch)
			jobs = append(jobs, llama.SampleJob{Chain: ch, Index: at})
		}
		require.NoError(t, c.SampleParallel(jobs, 2))
		for i, j := range jobs {
			if i == 1 {
				var pe *llama.PanicError
				require.True(t, errors.As(j.Err, &pe), "job %d: %v", i, j.Err)
				continue
			}
			require.NoError(t, j.Err, "job %d", i)
			want, err := chains[i].Sample(c, idx[i])
			require.NoError(t, err)
			assert.Equal(t, want, j.Token, fmt.Sprintf("job %d", i))
		}
	})
}
