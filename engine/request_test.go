package engine

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/sampling"
)

// TestSubmitLimitsSampling checks that an in-process caller gets the
// server's sampling limits: Submit clamps windows and counts to the slot
// context and the vocabulary, and refuses what cannot run, with an error
// matching llama.ErrInvalid.
func TestSubmitLimitsSampling(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256}})
	prompt := engTokenize(t, m, "Once upon a time", true)
	for _, c := range []struct {
		name  string
		set   func(p *sampling.Params)
		check func(t *testing.T, p *sampling.Params)
		fails bool
	}{
		{"windows clamped", func(p *sampling.Params) {
			p.RepeatLastN, p.DRYPenaltyLastN, p.TopK, p.NProbs = math.MaxInt32, -1, math.MaxInt32, math.MaxInt32
			p.RepeatPenalty, p.DRYMultiplier = 1.1, 0.5
		}, func(t *testing.T, p *sampling.Params) {
			assert.Equal(t, 256, p.RepeatLastN)
			assert.Equal(t, 256, p.DRYPenaltyLastN)
			assert.Equal(t, m.VocabSize(), p.TopK)
			assert.Equal(t, min(m.VocabSize(), sampling.MaxNProbs), p.NProbs)
		}, false},
		{"aliases run", func(p *sampling.Params) { p.Samplers = []string{"Top-K", "nucleus", "temp"} }, nil, false},
		{"not finite", func(p *sampling.Params) { p.MinP = float32(math.Inf(1)) }, nil, true},
		{"unknown sampler", func(p *sampling.Params) { p.Samplers = []string{"bogus"} }, nil, true},
		{"too many breakers", func(p *sampling.Params) { p.DRYSequenceBreakers = make([]string, sampling.MaxDRYBreakers+1) }, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := NewRequest(prompt)
			req.NPredict = 4
			c.set(&req.Params)
			st, err := e.Submit(context.Background(), req)
			if c.fails {
				require.ErrorIs(t, err, llama.ErrInvalid)
				var se *sampling.Error
				assert.ErrorAs(t, err, &se)
				return
			}
			require.NoError(t, err)
			r := engCollect(t, st)
			require.NoError(t, r.done.Err)
			assert.Equal(t, 4, r.done.Generated)
			if c.check != nil {
				// The engine limits its own copy, which the slot shows;
				// the caller's request is never written.
				var seen *sampling.Params
				for _, s := range e.SlotsInfo() {
					if s.Request != nil {
						seen = &s.Request.Params
					}
				}
				require.NotNil(t, seen, "no slot shows the request")
				c.check(t, seen)
				assert.Equal(t, math.MaxInt32, req.Params.TopK, "the caller's request was written")
			}
		})
	}
}

// TestNewRequest checks that NewRequest's defaults generate until the
// limit asked for, on any slot, as llama-server's requests do.
func TestNewRequest(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256}, Parallel: 2})
	req := NewRequest(engTokenize(t, m, "Once upon a time", true))
	assert.Equal(t, sampling.Defaults(), req.Params)
	req.NPredict = 8
	r := engRun(t, e, req)
	assert.Equal(t, 8, r.done.Generated)
	assert.NotEmpty(t, r.text)
}
