package llama_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

// TestEverySampler builds each built-in sampler of v0.4.0 in a chain and
// samples with it; seeded chains are reproducible.
func TestEverySampler(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	g, err := llama.GrammarFromJSONSchema(context.Background(), []byte(`{"type":"string"}`))
	require.NoError(t, err)
	tests := []struct {
		name     string
		samplers []llama.Sampler
	}{
		{"greedy", []llama.Sampler{llama.Greedy()}},
		{"dist", []llama.Sampler{llama.Dist(1)}},
		{"top-k", []llama.Sampler{llama.TopK(5), llama.Dist(1)}},
		{"top-p", []llama.Sampler{llama.TopP(0.9, 1), llama.Dist(1)}},
		{"min-p", []llama.Sampler{llama.MinP(0.1, 1), llama.Dist(1)}},
		{"typical", []llama.Sampler{llama.Typical(0.9, 1), llama.Dist(1)}},
		{"temp", []llama.Sampler{llama.Temp(0.7), llama.Dist(1)}},
		{"temp-ext", []llama.Sampler{llama.TempExt(0.8, 0.3, 1), llama.Dist(1)}},
		{"xtc", []llama.Sampler{llama.XTC(0.5, 0.1, 1, 1), llama.Dist(1)}},
		{"top-n-sigma", []llama.Sampler{llama.TopNSigma(1.5), llama.Dist(1)}},
		{"mirostat", []llama.Sampler{llama.Mirostat(5, 0.1, 100, 1)}},
		{"mirostat-v2", []llama.Sampler{llama.MirostatV2(5, 0.1, 1)}},
		{"penalties", []llama.Sampler{llama.Penalties(64, 1.3, 0.1, 0.1), llama.Greedy()}},
		{"dry", []llama.Sampler{llama.DRY(0.8, 1.75, 2, -1, nil), llama.Greedy()}},
		{"logit-bias", []llama.Sampler{llama.LogitBias(map[llama.Token]float32{13: 100}), llama.Greedy()}},
		{"grammar", []llama.Sampler{g.Sampler(), llama.Greedy()}},
		{"lazy grammar", []llama.Sampler{g.LazySampler([]string{`"`}, nil), llama.Greedy()}},
		{"infill", []llama.Sampler{llama.Infill(), llama.Greedy()}},
		{"adaptive-p", []llama.Sampler{llama.AdaptiveP(0.5, 0.9, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func() string {
				s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tt.samplers...)
				require.NoError(t, err)
				defer s.Close()
				return generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 12, Sampler: s})
			}
			a := run()
			assert.NotEmpty(t, a)
			assert.Equal(t, a, run(), "same seed, same text")
		})
	}
	// The logit bias forces token 13 every time.
	s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.LogitBias(map[llama.Token]float32{13: 100}), llama.Greedy())
	require.NoError(t, err)
	defer s.Close()
	for p, err := range c.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 4, Sampler: s}).Seq() {
		require.NoError(t, err)
		assert.Equal(t, llama.Token(13), p.Token)
	}
}

// banSampler is a Go sampler that bans one token and counts what it sees.
type banSampler struct {
	ban      llama.Token
	accepted []llama.Token
	resets   int
}

func (b *banSampler) Name() string { return "ban" }
func (b *banSampler) Apply(c *llama.Candidates) {
	for i := range c.Data() {
		if c.Data()[i].ID == b.ban {
			c.Data()[i].Logit = float32(math.Inf(-1))
		}
	}
}
func (b *banSampler) Accept(t llama.Token) { b.accepted = append(b.accepted, t) }
func (b *banSampler) Reset()               { b.resets++ }

func TestCustomSampler(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	var greedy strings.Builder
	first := llama.NoToken
	for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 8}).Seq() {
		require.NoError(t, err)
		if first == llama.NoToken {
			first = p.Token
		}
		greedy.WriteString(p.Text)
	}
	bs := &banSampler{ban: first}
	s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Custom(bs), llama.Greedy())
	require.NoError(t, err)
	defer s.Close()
	out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 8, Sampler: s})
	assert.NotEqual(t, greedy.String(), out)
	assert.Len(t, bs.accepted, 8)
	assert.NotContains(t, bs.accepted, first)
	require.NoError(t, s.Reset())
	assert.Equal(t, 1, bs.resets)
	// banSampler is not a CloneableSampler: a clone would share its state.
	_, err = s.Clone()
	require.ErrorIs(t, err, llama.ErrUnsupported)

	// Apply on explicit candidates.
	res, sel, err := s.Apply([]llama.TokenData{{ID: first, Logit: 5}, {ID: 20, Logit: 1}})
	require.NoError(t, err)
	require.GreaterOrEqual(t, sel, 0)
	assert.Equal(t, llama.Token(20), res[sel].ID)
}

// ApplyInPlace gives Apply's result in the candidates' own memory (a
// prefix of them), with a grammar among the samplers or not, while Apply
// leaves its argument as it was.
func TestSamplerChainApplyInPlace(t *testing.T) {
	m := stories(t)
	g := mustGrammar(t, `root ::= "Once" | "The"`)
	row := func() []llama.TokenData {
		n := m.VocabSize()
		out := make([]llama.TokenData, n)
		for i := range out {
			out[i] = llama.TokenData{ID: llama.Token(i), Logit: float32((i * 7919) % 1000)}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		opts     llama.SamplerChainOptions
		samplers func() []llama.Sampler
	}{
		{"top-k and dist", llama.SamplerChainOptions{}, func() []llama.Sampler { return []llama.Sampler{llama.TopK(40), llama.Dist(7)} }},
		{"grammar then greedy", llama.SamplerChainOptions{}, func() []llama.Sampler { return []llama.Sampler{g.Sampler(), llama.Greedy()} }},
		{"grammar alone (a filter)", llama.SamplerChainOptions{Filter: true}, func() []llama.Sampler { return []llama.Sampler{g.Sampler()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := llama.NewSamplerChain(m, tc.opts, tc.samplers()...)
			require.NoError(t, err)
			defer a.Close()
			b, err := llama.NewSamplerChain(m, tc.opts, tc.samplers()...)
			require.NoError(t, err)
			defer b.Close()

			in := row()
			want, wantSel, err := a.Apply(in)
			require.NoError(t, err)
			assert.Equal(t, row(), in, "Apply leaves its candidates alone")

			got, sel, err := b.ApplyInPlace(in)
			require.NoError(t, err)
			assert.Equal(t, wantSel, sel)
			assert.Equal(t, want, got)
			require.NotEmpty(t, got)
			assert.Same(t, &in[0], &got[0], "the result is a prefix of the candidates")
		})
	}
	s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Greedy())
	require.NoError(t, err)
	defer s.Close()
	_, _, err = s.ApplyInPlace(nil)
	require.ErrorIs(t, err, llama.ErrInvalid)
	_, _, err = s.ApplyInPlace([]llama.TokenData{{ID: llama.Token(m.VocabSize())}})
	require.ErrorIs(t, err, llama.ErrInvalid)
}
