package llama_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/sampling"
)

// tinyRandom loads llama-2-tiny-random (a 32,000-token vocabulary).
func tinyRandom(t testing.TB) *llama.Model { return loadModel(t, "llama-2-tiny-random.gguf") }

// TestTopKMatchesLlama holds the fast path's top-k selection against
// llama.cpp's top-k sampler (after its logit bias) on rows of every shape,
// tie-heavy ones above all: the same candidates, logits bit for bit, in
// the same order.
func TestTopKMatchesLlama(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := []struct {
		name string
		gen  func(r *rand.Rand, i int) float32
	}{
		{"normal", func(r *rand.Rand, _ int) float32 { return float32(r.NormFloat64() * 3) }},
		{"four values", func(r *rand.Rand, _ int) float32 { return float32(r.IntN(4)) }},
		{"all equal", func(_ *rand.Rand, _ int) float32 { return 1 }},
		{"eighths", func(r *rand.Rand, _ int) float32 { return float32(r.IntN(64)) / 8 }},
		{"ascending", func(_ *rand.Rand, i int) float32 { return float32(i) }},
		{"descending", func(_ *rand.Rand, i int) float32 { return float32(-i) }},
		{"ascending in steps", func(_ *rand.Rand, i int) float32 { return float32(i / 7) }},
		{"nan and inf", func(r *rand.Rand, _ int) float32 {
			switch r.IntN(20) {
			case 0:
				return nan
			case 1:
				return inf
			case 2:
				return -inf
			}
			return float32(r.IntN(8))
		}},
	}
	for _, md := range []struct {
		name string
		m    *llama.Model
	}{{"stories260K", stories(t)}, {"tiny-random", tinyRandom(t)}} {
		n := md.m.VocabSize()
		biases := []struct {
			name string
			bias map[llama.Token]float32
		}{
			{"no bias", nil},
			{"bans", map[llama.Token]float32{0: -inf, 1: -inf, 2: -inf, llama.Token(n - 1): -inf}},
			{"boosts", map[llama.Token]float32{3: 2, 100: 1, 101: 1, llama.Token(n / 2): 0.5, llama.Token(n - 2): 3}},
			{"in the first k", map[llama.Token]float32{0: 4, 39: -1, 40: 1, 41: 1}},
		}
		for _, row := range rows {
			for _, b := range biases {
				for _, k := range []int{1, 2, 3, 40, 41, 100, 128} {
					t.Run(fmt.Sprintf("%s/%s/%s/k=%d", md.name, row.name, b.name, k), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(k), uint64(len(row.name))))
						logits := make([]float32, n)
						cands := make([]llama.TokenData, n)
						for i := range logits {
							logits[i] = row.gen(r, i)
							cands[i] = llama.TokenData{ID: llama.Token(i), Logit: logits[i]}
						}
						var ss []llama.Sampler
						if b.bias != nil {
							ss = append(ss, llama.LogitBias(b.bias))
						}
						ss = append(ss, llama.TopK(k))
						c, err := llama.NewSamplerChain(md.m, llama.SamplerChainOptions{Filter: true}, ss...)
						require.NoError(t, err)
						defer c.Close()
						want, _, err := c.Apply(cands)
						require.NoError(t, err)
						got := llama.SelectTopK(logits, b.bias, k)
						require.Len(t, got, len(want))
						for i := range want {
							require.Equal(t, want[i].ID, got[i].ID, "candidate %d", i)
							require.Equal(t, math.Float32bits(want[i].Logit), math.Float32bits(got[i].Logit), "candidate %d", i)
						}
					})
				}
			}
		}
	}
}

// TestSampleFastPath samples the same generations through the fast path
// and through llama.cpp's llama_sampler_sample (a chain that collects
// timings takes the C path): the same token at every step, for the
// server's default chain, with a logit bias before it, with k = 1, and
// after Clone.
func TestSampleFastPath(t *testing.T) {
	checkFastPath(t, []namedModel{{"stories260K", stories(t)}, {"tiny-random", tinyRandom(t)}})
}

// namedModel is a model of a table test.
type namedModel struct {
	name string
	m    *llama.Model
}

// checkFastPath is TestSampleFastPath on models.
func checkFastPath(t *testing.T, models []namedModel) {
	chains := []struct {
		name     string
		samplers func(m *llama.Model) []llama.Sampler
		fast     bool
	}{
		{"default", func(*llama.Model) []llama.Sampler {
			return []llama.Sampler{llama.TopK(40), llama.TopP(0.95, 0), llama.MinP(0.05, 0), llama.TempExt(0.8, 0, 1), llama.Dist(7)}
		}, true},
		// llama-server's defaults as the engine builds them: the neutral
		// penalties and DRY stay out of the chain, which starts with the
		// ignore_eos bias and the top-k.
		{"server defaults, ignore_eos", func(m *llama.Model) []llama.Sampler {
			p := sampling.Defaults()
			p.Seed, p.IgnoreEOS = 5, true
			ss, _ := p.Chain(sampling.Env{NCtx: 256, EOG: []llama.Token{m.SpecialTokens().EOS}})
			return ss
		}, true},
		{"penalties first: C path", func(*llama.Model) []llama.Sampler {
			return []llama.Sampler{llama.Penalties(64, 1.1, 0, 0), llama.TopK(40), llama.Dist(7)}
		}, false},
		{"bias first", func(m *llama.Model) []llama.Sampler {
			bias := map[llama.Token]float32{m.SpecialTokens().EOS: float32(math.Inf(-1)), 300: 2, 301: 2}
			return []llama.Sampler{llama.LogitBias(bias), llama.TopK(20), llama.Temp(1.5), llama.Dist(9)}
		}, true},
		{"top-1", func(*llama.Model) []llama.Sampler { return []llama.Sampler{llama.TopK(1), llama.Dist(3)} }, true},
		{"k 128", func(*llama.Model) []llama.Sampler {
			return []llama.Sampler{llama.TopK(128), llama.MinP(0.01, 1), llama.Dist(11)}
		}, true},
		{"k 129: C path", func(*llama.Model) []llama.Sampler { return []llama.Sampler{llama.TopK(129), llama.Dist(11)} }, false},
		{"top-k second: C path", func(*llama.Model) []llama.Sampler {
			return []llama.Sampler{llama.Temp(0.9), llama.TopK(40), llama.Dist(5)}
		}, false},
	}
	for _, md := range models {
		ctx := newCtx(t, md.m, llama.ContextOptions{ContextSize: 256})
		for _, ch := range chains {
			t.Run(md.name+"/"+ch.name, func(t *testing.T) {
				fast, err := llama.NewSamplerChain(md.m, llama.SamplerChainOptions{}, ch.samplers(md.m)...)
				require.NoError(t, err)
				defer fast.Close()
				slow, err := llama.NewSamplerChain(md.m, llama.SamplerChainOptions{Perf: true}, ch.samplers(md.m)...)
				require.NoError(t, err)
				defer slow.Close()
				assert.Equal(t, ch.fast, llama.FastPath(fast))
				assert.False(t, llama.FastPath(slow))
				require.NoError(t, ctx.Memory().Clear())
				b := llama.NewBatch(8, 1)
				tok := md.m.SpecialTokens().BOS
				var seen []llama.Token
				for pos := range 150 {
					b.Clear()
					require.NoError(t, b.Add(tok, pos, 0, true))
					require.NoError(t, ctx.Decode(context.Background(), b))
					if pos == 60 {
						// clones carry the state (the RNG) and the plan
						f2, err := fast.Clone()
						require.NoError(t, err)
						defer f2.Close()
						s2, err := slow.Clone()
						require.NoError(t, err)
						defer s2.Close()
						assert.Equal(t, ch.fast, llama.FastPath(f2))
						fast, slow = f2, s2
					}
					a, err := fast.Sample(ctx, 0)
					require.NoError(t, err)
					want, err := slow.Sample(ctx, 0)
					require.NoError(t, err)
					require.Equal(t, want, a, "step %d", pos)
					seen = append(seen, a)
					tok = a
				}
				if ch.name != "top-1" {
					distinct := map[llama.Token]bool{}
					for _, s := range seen {
						distinct[s] = true
					}
					assert.Greater(t, len(distinct), 5, "the chain samples, not just the best token")
				}
			})
		}
	}
}

// BenchmarkSampleTopK is one Sample of the server's default chain (top-k
// 40, top-p, min-p, temperature, dist) over a 32,000-token vocabulary
// ($LLAMA_BENCH_MODEL=gemma3-270m: Gemma 3 270M's 262,144), through the
// fast path and through llama_sampler_sample (a chain that collects
// timings takes it), from the same logits, with its allocations.
func BenchmarkSampleTopK(b *testing.B) {
	m := tinyRandom(b)
	if os.Getenv("LLAMA_BENCH_MODEL") != "" {
		_, path := benchlimit.Model(b, "")
		m = loadModelPath(b, path)
	}
	ctx := newCtx(b, m, llama.ContextOptions{ContextSize: 64})
	batch := llama.NewBatch(1, 1)
	require.NoError(b, batch.Add(m.SpecialTokens().BOS, 0, 0, true))
	require.NoError(b, ctx.Decode(context.Background(), batch))
	for _, path := range []struct {
		name string
		perf bool
	}{{"go", false}, {"C", true}} {
		b.Run("path="+path.name, func(b *testing.B) {
			c, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Perf: path.perf},
				llama.TopK(40), llama.TopP(0.95, 0), llama.MinP(0.05, 0), llama.TempExt(0.8, 0, 1), llama.Dist(1))
			require.NoError(b, err)
			defer c.Close()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Sample(ctx, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loadModelPath loads the model at path for this test alone.
func loadModelPath(t testing.TB, path string) *llama.Model {
	t.Helper()
	return modeltest.LoadPath(t, path, llama.ModelOptions{})
}
