package llama_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestGrammarStacksAgree walks grammars through random allowed tokens
// and, at each step, asks llama.cpp's grammar engine and the Go stacks
// that follow it (to bound the engine's cost) about every token of the
// vocabulary: they must agree on each, so that the stacks are the
// engine's. Tokens whose text is not whole UTF-8 are left out: the engine
// judges a cut character by what could complete it, which accepting it
// does not.
func TestGrammarStacksAgree(t *testing.T) {
	schema, err := llama.GrammarFromJSONSchema(context.Background(), []byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["name"]}`))
	require.NoError(t, err)
	grammars := map[string]string{
		"json schema":            schema.Source(),
		"bounded repetitions":    `root ::= [a-z ]{0,20} [a-z ]{0,20} "."`,
		"alternatives":           `root ::= ("Once" | "One" | "On") " " [a-z]+ (" " [a-z]+)*`,
		"negated and any":        `root ::= [^\n]{1,30} . [^a-e]*`,
		"unicode":                `root ::= ([a-zé€] | "ü")+`,
		"nullable optional runs": `root ::= "a"? "b"? "c"? [a-z]* ("x" | "y")?`,
	}
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		m := modeltest.Shared(t, name, false)
		// Every token of a small vocabulary; of a large one, those of one
		// or two characters (punctuation, single letters) and a sample of
		// the rest.
		var whole []llama.Token
		pick := rand.New(rand.NewPCG(7, 7))
		for tok := range llama.Token(m.VocabSize()) {
			p, err := m.TokenPiece(tok, true)
			if err == nil && p != "" && utf8.ValidString(p) && !strings.ContainsRune(p, 0) && !m.IsEOG(tok) &&
				(m.VocabSize() <= 4096 || utf8.RuneCountInString(p) <= 2 || pick.IntN(10) == 0) {
				whole = append(whole, tok)
			}
		}
		for gname, src := range grammars {
			t.Run(name+"/"+gname, func(t *testing.T) {
				g, err := llama.ParseGrammar(context.Background(), src, "")
				require.NoError(t, err)
				chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler())
				require.NoError(t, err)
				defer chain.Close()
				rng := rand.New(rand.NewPCG(1, uint64(len(src))))
				steps := 0
				for ; steps < 12; steps++ {
					var allowed []llama.Token
					for _, tok := range whole {
						engine, stacks, following := llama.GrammarVerdicts(chain, tok)
						require.True(t, following)
						require.Equal(t, engine, stacks, "token %d %q after %d steps", tok, piece(m, tok), steps)
						if engine {
							allowed = append(allowed, tok)
						}
					}
					if len(allowed) == 0 {
						break
					}
					require.NoError(t, chain.Accept(allowed[rng.IntN(len(allowed))]))
				}
				assert.Positive(t, steps)
			})
		}
	}
}

func piece(m *llama.Model, t llama.Token) string {
	p, _ := m.TokenPiece(t, true)
	return p
}

// TestGrammarGrowthGuard: a grammar whose readings multiply with the text
// (each of 128 bounded repetitions may start at any character) passes the
// parser's check, and generation stops with an ErrGrammar before
// llama.cpp's grammar engine holds a core for seconds a token.
func TestGrammarGrowthGuard(t *testing.T) {
	m := stories(t)
	g, err := llama.ParseGrammar(context.Background(), "root ::="+strings.Repeat(` [^"]{0,100}`, 128), "")
	require.NoError(t, err)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, g.Sampler(), llama.Greedy())
	require.NoError(t, err)
	defer s.Close()
	var gotErr error
	var text strings.Builder
	for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 200, Sampler: s}).Seq() {
		if err != nil {
			gotErr = err
			break
		}
		text.WriteString(p.Text)
	}
	require.ErrorIs(t, gotErr, llama.ErrGrammar)
	assert.Contains(t, gotErr.Error(), "too ambiguous for the text so far")
	assert.Less(t, len(text.String()), 100, "it stops within the first hundred characters")
}

// TestGrammarDeepStacks: a grammar whose stacks start thousands of rules
// deep passes the parser (its shape is harmless but for the depth), and
// every comparison of two stacks costs llama.cpp their depth: 41 s for
// the first token of the deepest here. The chain refuses it when built.
func TestGrammarDeepStacks(t *testing.T) {
	m := stories(t)
	for _, c := range []struct {
		depth, optional int
		ok              bool
	}{
		{0, 300, true}, {200, 100, true}, {2000, 200, false}, {5000, 300, false},
	} {
		var b strings.Builder
		b.WriteString("root ::= r0\n")
		for i := range c.depth {
			fmt.Fprintf(&b, "r%d ::= r%d \")\"\n", i, i+1)
		}
		fmt.Fprintf(&b, "r%d ::= %s \"y\"\n", c.depth, strings.Repeat(` "x"?`, c.optional))
		g, err := llama.ParseGrammar(context.Background(), b.String(), "")
		require.NoError(t, err)
		chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler())
		if c.ok {
			require.NoError(t, err, "depth %d", c.depth)
			chain.Close()
			continue
		}
		require.ErrorIs(t, err, llama.ErrGrammar, "depth %d", c.depth)
		assert.Contains(t, err.Error(), "too ambiguous")
	}
}

// TestGrammarStacksEndOfGeneration: an end-of-generation token leaves the
// engine's stacks as they are, and the stacks that follow it too.
func TestGrammarStacksEndOfGeneration(t *testing.T) {
	m := stories(t)
	g, err := llama.ParseGrammar(context.Background(), `root ::= "a"?`, "")
	require.NoError(t, err)
	chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler())
	require.NoError(t, err)
	defer chain.Close()
	require.NoError(t, chain.Accept(m.SpecialTokens().EOS))
	_, _, following := llama.GrammarVerdicts(chain, m.SpecialTokens().EOS)
	assert.True(t, following)
}
