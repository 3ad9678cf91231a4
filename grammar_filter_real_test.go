//go:build realmodel

package llama_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestRealModelGrammarFilter compares the Go filter with llama.cpp's
// grammar engine on Gemma 3's vocabulary of 262,144 tokens (byte-level
// pieces, multi-byte characters cut across tokens, long runs of spaces),
// token by token over random texts of a JSON Schema's grammar and a
// free-text one.
func TestRealModelGrammarFilter(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.RealModel(t, "gemma3-270m"), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	schema, err := llama.GrammarFromJSONSchema(context.Background(), []byte(`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","tags"]}`))
	require.NoError(t, err)
	for gi, src := range []string{schema.Source(), `root ::= ([^\n] | "\n\n")+ [.!?]`, `root ::= [ \t]* ("日本" | "ü" | [a-z])+`} {
		g, err := llama.ParseGrammar(context.Background(), src, "")
		require.NoError(t, err)
		chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler())
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(5, uint64(gi)))
		for step := 0; step < 12; step++ {
			engine, filter := llama.GrammarMasks(chain)
			var allowed []llama.Token
			for tok := range engine {
				require.Equal(t, engine[tok], filter[tok], "grammar %d, token %d %q after %d steps", gi, tok, piece(m, llama.Token(tok)), step)
				if engine[tok] && !m.IsEOG(llama.Token(tok)) {
					allowed = append(allowed, llama.Token(tok))
				}
			}
			if len(allowed) == 0 {
				break
			}
			require.NoError(t, chain.Accept(allowed[rng.IntN(len(allowed))]))
		}
		chain.Close()
	}
}

// BenchmarkRealModelGrammarFilter is a step's filter of Gemma 3's whole
// vocabulary by a JSON Schema's grammar, at the start of the object and
// inside a string, by llama.cpp's engine and by the Go filter.
func BenchmarkRealModelGrammarFilter(b *testing.B) {
	m, err := llama.LoadModel(context.Background(), testenv.RealModel(b, "gemma3-270m"), llama.ModelOptions{})
	require.NoError(b, err)
	defer m.Close()
	benchmarkGrammarFilter(b, m)
}
