package llama_test

import (
	"context"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// TestEverySampler builds each built-in sampler of v0.4.0 in a chain and
// samples with it; seeded chains are reproducible.
func TestEverySampler(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	g, err := llama.GrammarFromJSONSchema([]byte(`{"type":"string"}`))
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
		{"mirostat", []llama.Sampler{llama.Mirostat(1, 5, 0.1, 100)}},
		{"mirostat-v2", []llama.Sampler{llama.MirostatV2(1, 5, 0.1)}},
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
	for p, err := range c.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 4, Sampler: s}) {
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
	for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 8}) {
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

func TestStateRoundTrip(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Sequences: 2})
	ctx := context.Background()
	toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	want := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 24})

	// Decode the prompt, save the sequence, wipe, restore into seq 1, continue.
	b := llama.NewBatch(64, 1)
	require.NoError(t, c.ClearMemory())
	require.NoError(t, b.AddSequence(toks, 0, 0, true))
	require.NoError(t, c.Decode(ctx, b))
	st, err := c.SeqState(0)
	require.NoError(t, err)
	require.NotEmpty(t, st)
	whole, err := c.State()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "seq.bin")
	_, err = c.SaveSeqFile(path, 0, toks)
	require.NoError(t, err)

	require.NoError(t, c.ClearMemory())
	require.NoError(t, c.SetSeqState(1, st))
	lo, hi, err := c.PosRange(1)
	require.NoError(t, err)
	assert.Equal(t, 0, lo)
	assert.Equal(t, len(toks)-1, hi)
	// Continue seq 1 from its restored memory: re-feed the last prompt token.
	_, err = c.RemoveTokens(1, len(toks)-1, -1)
	require.NoError(t, err)
	var got strings.Builder
	for p, err := range c.GenerateTokens(ctx, toks[len(toks)-1:], llama.GenerateOptions{MaxTokens: 24, Seq: 1, Keep: true}).Seq() {
		require.NoError(t, err)
		got.WriteString(p.Text)
	}
	assert.Equal(t, want, got.String())

	require.NoError(t, c.ClearMemory())
	loaded, err := c.LoadSeqFile(path, 0)
	require.NoError(t, err)
	assert.Equal(t, toks, loaded)
	require.NoError(t, c.SetState(whole))
	_, hi, _ = c.PosRange(0)
	assert.Equal(t, len(toks)-1, hi)
}

func TestMemoryOps(t *testing.T) {
	m := stories(t)
	// Tokens shared by several sequences need the unified KV buffer.
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Sequences: 3, KVUnified: true})
	b := llama.NewBatch(16, 3)
	for i := range 8 {
		require.NoError(t, b.AddShared(llama.Token(10+i), i, []int{0, 1}, i == 7))
	}
	require.NoError(t, c.Decode(context.Background(), b))
	for _, s := range []int{0, 1} {
		lo, hi, err := c.PosRange(s)
		require.NoError(t, err)
		assert.Equal(t, []int{0, 7}, []int{lo, hi})
	}
	require.NoError(t, c.CopyTokens(0, 2, 0, 4))
	_, hi, _ := c.PosRange(2)
	assert.Equal(t, 3, hi)
	ok, err := c.RemoveTokens(1, 4, -1)
	require.NoError(t, err)
	assert.True(t, ok)
	_, hi, _ = c.PosRange(1)
	assert.Equal(t, 3, hi)
	require.True(t, c.CanShift())
	require.NoError(t, c.ShiftTokens(0, 4, -1, -2))
	lo, hi, _ := c.PosRange(0)
	assert.Equal(t, []int{0, 5}, []int{lo, hi}, "positions 4..7 shifted down by 2 over 2..3")
	require.NoError(t, c.DivideTokens(0, 0, -1, 2))
	require.NoError(t, c.KeepSequence(2))
	lo, _, _ = c.PosRange(0)
	assert.Equal(t, -1, lo)
}

func TestEmbeddings(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Embeddings: true, Pooling: llama.PoolingMean, Sequences: 2})
	assert.Equal(t, llama.PoolingMean, c.Pooling())
	b := llama.NewBatch(64, 1)
	for s, text := range []string{"Once upon a time", "The cat sat"} {
		toks, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		require.NoError(t, b.AddSequence(toks, 0, s, true))
	}
	require.NoError(t, c.Decode(context.Background(), b))
	var vecs [][]float32
	for s := range 2 {
		e, err := c.SeqEmbeddings(s)
		require.NoError(t, err)
		require.Len(t, e, 64)
		v := llama.Normalize(append([]float32(nil), e...), 2)
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		assert.InDelta(t, 1, n, 1e-4)
		vecs = append(vecs, v)
	}
	assert.NotEqual(t, vecs[0], vecs[1])
}

func TestLoadProgressAndCancel(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	var seen []float32
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{Progress: func(p float32) { seen = append(seen, p) }})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.NotEmpty(t, seen)
	assert.True(t, sort.SliceIsSorted(seen, func(i, j int) bool { return seen[i] < seen[j] }))
	assert.InDelta(t, 1, seen[len(seen)-1], 1e-6)

	ctx, cancel := context.WithCancel(context.Background())
	_, err = llama.LoadModel(ctx, path, llama.ModelOptions{Progress: func(float32) { cancel() }})
	assert.ErrorIs(t, err, llama.ErrCanceled)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestKVOverride(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{
		KVOverrides: map[string]any{"llama.context_length": 1000, "general.name": "renamed"}})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, 1000, m.TrainContext())
}

// TestLoRA writes a LoRA adapter for stories260K, applies it at several
// scales and removes it, without reloading the model.
func TestLoRA(t *testing.T) {
	m := stories(t)
	f, err := gguf.Open(m.Path())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(path, f, nil, 4, 8, 1, 1))
	a, err := m.LoadAdapter(path)
	require.NoError(t, err)
	defer a.Close()
	typ, ok := a.Meta("adapter.type")
	assert.True(t, ok)
	assert.Equal(t, "lora", typ)

	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	base := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16})
	require.NoError(t, c.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 4}}))
	with := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16})
	assert.NotEqual(t, base, with)
	require.NoError(t, c.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 0}}))
	assert.Equal(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))
	require.NoError(t, c.SetAdapters(nil))
	assert.Equal(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))

	// A control vector changes the output, and clearing it restores it.
	cv := make([]float32, 64*4)
	for i := range cv {
		cv[i] = float32(i%7) - 3
	}
	require.NoError(t, c.SetControlVector(cv, 1, 4))
	assert.NotEqual(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))
	require.NoError(t, c.SetControlVector(nil, 0, 0))
	assert.Equal(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))
	assert.ErrorIs(t, c.SetControlVector(make([]float32, 63), 1, 2), llama.ErrInvalid)
}

func TestPerfAndDevices(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Perf: true})
	generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 8})
	p, err := c.Perf()
	require.NoError(t, err)
	assert.Equal(t, 7, p.EvalTokens, "8 sampled, 7 decoded one at a time")
	assert.Greater(t, p.PromptTokens, 0)
	devs, err := llama.Devices()
	require.NoError(t, err)
	require.NotEmpty(t, devs)
	assert.Equal(t, "cpu", devs[0].Type)
	info, err := llama.SystemInfo()
	require.NoError(t, err)
	assert.Contains(t, info, "CPU")
}
