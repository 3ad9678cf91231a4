package llama_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestGrammarFilterMatchesEngine walks grammars through random allowed
// tokens and, at each step, compares the Go filter with llama.cpp's
// grammar engine over the whole vocabulary: end-of-generation tokens,
// tokens with cut characters and token references included.
func TestGrammarFilterMatchesEngine(t *testing.T) {
	schema, err := llama.GrammarFromJSONSchema(context.Background(), []byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["name"]}`))
	require.NoError(t, err)
	grammars := []string{
		schema.Source(),
		`root ::= [a-z ]{0,20} [a-z ]{0,20} "."`,
		`root ::= ("Once" | "One" | "On") " " [a-z]+ (" " [a-z]+)*`,
		`root ::= [^\n]{1,30} . [^a-e]*`,
		`root ::= ([a-zé€] | "ü" | [日本語])+ "!"?`,
		`root ::= "a"? "b"? "c"? [a-z]* ("x" | "y")?`,
		`root ::= [\x80-\U0010FFFF]+ | "x" [^x]*`,
		`root ::= <[5]> [a-z]* | !<[6]> " " <[7]> | "T" <[8]>`,
		`root ::= (<s> | "a") [a-z]* | !<s> " " <s> | "T" <s> <unk>`,
		"root ::=" + strings.Repeat(" x{0,9}", 4) + "\nx ::= [^s]",
	}
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		m := modeltest.Shared(t, name, false)
		for gi, src := range grammars {
			t.Run(name+"/"+src[:min(len(src), 40)], func(t *testing.T) {
				g, err := llama.ParseGrammar(context.Background(), src, "")
				require.NoError(t, err)
				chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler())
				require.NoError(t, err)
				defer chain.Close()
				rng := rand.New(rand.NewPCG(3, uint64(gi)))
				for walk := 0; walk < 2; walk++ {
					chain.Reset()
					for step := 0; step < 8; step++ {
						engine, filter := llama.GrammarMasks(chain)
						var allowed []llama.Token
						for tok := range engine {
							require.Equal(t, engine[tok], filter[tok], "token %d %q after %d steps", tok, piece(m, llama.Token(tok)), step)
							if engine[tok] && !m.IsEOG(llama.Token(tok)) {
								allowed = append(allowed, llama.Token(tok))
							}
						}
						if len(allowed) == 0 {
							break
						}
						require.NoError(t, chain.Accept(allowed[rng.IntN(len(allowed))]))
					}
				}
			})
		}
	}
}

// BenchmarkGrammarFilter is a step's filter of llama-2-tiny-random's
// whole vocabulary (32,000 tokens) by a JSON Schema's grammar, at the
// start of the object and inside a string, by llama.cpp's engine and by
// the Go filter (which keeps the masks of the states it has seen: "again").
func BenchmarkGrammarFilter(b *testing.B) {
	benchmarkGrammarFilter(b, modeltest.Shared(b, "llama-2-tiny-random.gguf", false))
}

func benchmarkGrammarFilter(b *testing.B, m *llama.Model) {
	schema, err := llama.GrammarFromJSONSchema(context.Background(), []byte(`{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"number"}},"required":["name"]}`))
	require.NoError(b, err)
	for _, at := range []struct{ name, text string }{{"start", ""}, {"string", `{"name":"ab`}} {
		toks := charTokens(b, m, at.text)
		for _, by := range []string{"engine", "go", "go again"} {
			b.Run(at.name+"/"+by, func(b *testing.B) {
				chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, schema.Sampler())
				require.NoError(b, err)
				defer func() { chain.Close() }()
				for _, t := range toks {
					require.NoError(b, chain.Accept(t))
				}
				row := llama.GrammarRow(chain)
				d := make([]llama.TokenData, len(row))
				for b.Loop() {
					if by == "go" {
						b.StopTimer()
						chain.Close() // a new Go filter, no masks kept
						chain, err = llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, schema.Sampler())
						require.NoError(b, err)
						for _, t := range toks {
							require.NoError(b, chain.Accept(t))
						}
						b.StartTimer()
					}
					copy(d, row)
					if by == "engine" {
						llama.GrammarFilterEngine(chain, d)
					} else if err := llama.GrammarFilterGo(chain, d); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// charTokens returns a token for each character of text: one whose text is
// that character.
func charTokens(tb testing.TB, m *llama.Model, text string) []llama.Token {
	var out []llama.Token
	for _, r := range text {
		found := llama.NoToken
		for tok := range llama.Token(m.VocabSize()) {
			if piece(m, tok) == string(r) {
				found = tok
				break
			}
		}
		require.NotEqual(tb, llama.NoToken, found, "no token for %q", r)
		out = append(out, found)
	}
	return out
}

// TestGrammarAmbiguousFilter generates under grammars whose candidates
// llama.cpp's filter checks along exponentially many paths (it held a
// core for minutes on the first candidate it refused): filtered in Go,
// they generate, or stop with a grammar error saying they are too
// ambiguous.
func TestGrammarAmbiguousFilter(t *testing.T) {
	m := modeltest.Shared(t, "llama-2-tiny-random.gguf", false)
	for _, src := range []string{
		`root ::= "x"` + strings.Repeat(" [a-z]*", 40),
		"root ::=" + strings.Repeat(" x{0,100}", 16) + "\nx ::= [^s]",
		"root ::=" + strings.Repeat(" ([a-z]* | [a-z]+)", 100),
	} {
		t.Run(src[:30], func(t *testing.T) {
			g, err := llama.ParseGrammar(context.Background(), src, "")
			require.NoError(t, err)
			c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
			s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, g.Sampler(), llama.Greedy())
			require.NoError(t, err)
			defer s.Close()
			n := 0
			for _, err := range c.Generate(context.Background(), "The applications", llama.GenerateOptions{MaxTokens: 8, Sampler: s}).Seq() {
				if err != nil {
					require.ErrorIs(t, err, llama.ErrGrammar)
					require.ErrorContains(t, err, "too ambiguous")
					break
				}
				n++
			}
			t.Logf("%d tokens", n)
		})
	}
}

// TestGrammarFilterCutCharacter: after a token that leaves a character
// cut, the next token's bytes complete it, and a stack with a token
// element on top takes that token by id, as llama.cpp's filter does
// (the token's bytes alone are no valid UTF-8).
func TestGrammarFilterCutCharacter(t *testing.T) {
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		m := modeltest.Shared(t, name, false)
		c3 := charTokensBytes(t, m, "\xc3")
		for _, src := range []string{`root ::= [é] | !<[0]> !<[0]>`, `root ::= ("é" | !<[0]>)+`} {
			g, err := llama.ParseGrammar(context.Background(), src, "")
			require.NoError(t, err)
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler())
			require.NoError(t, err)
			require.NoError(t, chain.Accept(c3))
			engine, filter := llama.GrammarMasks(chain)
			for tok := range engine {
				require.Equal(t, engine[tok], filter[tok], "%s %q: token %d %q", name, src, tok, piece(m, llama.Token(tok)))
			}
			chain.Close()
		}
	}
}

// charTokensBytes returns the token whose text is the byte string b.
func charTokensBytes(tb testing.TB, m *llama.Model, b string) llama.Token {
	for tok := range llama.Token(m.VocabSize()) {
		if piece(m, tok) == b {
			return tok
		}
	}
	tb.Fatalf("no token for %q", b)
	return llama.NoToken
}

// FuzzGrammarFilterEngine compares the Go filter with llama.cpp's grammar
// engine over stories260K's vocabulary, for fuzzed grammars after a fuzzed
// walk through allowed tokens. The one difference allowed is deliberate:
// the engine's filter allows a token that reaches a token element inside
// its text (its accept would then throw), which the Go filter refuses.
func FuzzGrammarFilterEngine(f *testing.F) {
	for _, src := range []string{
		`root ::= "a" [bc]* | "ab" x{0,3}` + "\nx ::= [^\"]",
		`root ::= ("Once" | "One" | "On") " " [a-z]+ (" " [a-z]+)*`,
		`root ::= ([a-zé€] | "ü" | [日本語])+ "!"?`,
		`root ::= (<s> | "a") [a-z]* | !<s> " " <s> | "T" <s> <unk>`,
		`root ::= [^\n]{1,5} . [^a-e]*`,
		`root ::= "é" [^a] | <[3]> . | [\xc0-\xff]+`,
	} {
		f.Add(src, []byte{1, 7, 3, 200})
	}
	m := modeltest.Shared(f, "stories260K.gguf", false)
	f.Fuzz(func(t *testing.T, src string, walk []byte) {
		if len(src) > 300 || len(walk) > 8 {
			return
		}
		g, err := llama.ParseGrammar(context.Background(), src, "")
		if err != nil {
			return
		}
		chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler())
		if err != nil {
			return
		}
		defer chain.Close()
		for _, w := range walk {
			if llama.GrammarEngineWork(chain, 200_000) > 200_000 {
				return // the engine's filter would take too long
			}
			engine, filter, err := llama.GrammarMasksErr(chain)
			if err != nil {
				return // too much work for the Go filter too
			}
			var allowed []llama.Token
			for tok := range engine {
				if engine[tok] != filter[tok] && !(engine[tok] && !llama.GrammarTakes(chain, llama.Token(tok))) {
					t.Fatalf("%q: token %d %q: engine %v, Go filter %v", src, tok, piece(m, llama.Token(tok)), engine[tok], filter[tok])
				}
				if filter[tok] && !m.IsEOG(llama.Token(tok)) {
					allowed = append(allowed, llama.Token(tok))
				}
			}
			if len(allowed) == 0 {
				return
			}
			if err := chain.Accept(allowed[int(w)%len(allowed)]); err != nil {
				return
			}
		}
	})
}
