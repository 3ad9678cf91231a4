package llama_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

// TestGrammarRefused: grammars that crash llama.cpp (deep nesting) or can
// never match are errors matching ErrInvalid (and ErrGrammar) from
// ParseGrammar or, for what needs the vocabulary, from NewSamplerChain;
// the process lives.
func TestGrammarRefused(t *testing.T) {
	m := stories(t)
	nest := func(n int) string { return "root ::= " + strings.Repeat("(", n) + `"a"` + strings.Repeat(")", n) }
	cases := []struct {
		name    string
		src     string
		parseOK bool // ParseGrammar accepts it (only the model can tell)
	}{
		{"nesting 20000 (crashed llama.cpp)", nest(20000), false},
		{"nesting above the bound", nest(llama.MaxGrammarNesting + 1), false},
		{"reversed range", `root ::= [z-a]`, false},
		{"reversed range among others", `root ::= [a-c z-a]`, false},
		{"token id beyond the vocabulary", `root ::= <[999999]>`, true},
		{"negated token id beyond the vocabulary", `root ::= "a" !<[512]>`, true},
		{"code point above U+10FFFF", `root ::= "\U99999999"`, false},
		{"NUL characters", `root ::= "\u0000\u0000"`, false},
		{"class of invalid code points", `root ::= [^\x00-\U0010FFFF]`, false},
		{"class of NUL only", `root ::= [\x00]`, false},
		{"class above U+10FFFF only", `root ::= [\U00110000-\U00200000]`, false},
		{"chain of 100000 leftmost references (crashed llama.cpp)", refChain(100000), false},
		{"leftmost paths exponential in llama.cpp's check", diamonds(40), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := llama.ParseGrammar(context.Background(), tc.src, "")
			if !tc.parseOK {
				require.ErrorIs(t, err, llama.ErrInvalid)
				require.ErrorIs(t, err, llama.ErrGrammar)
				return
			}
			require.NoError(t, err)
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, g.Sampler(), llama.Greedy())
			if err == nil {
				chain.Close()
			}
			require.ErrorIs(t, err, llama.ErrInvalid)
			require.ErrorIs(t, err, llama.ErrGrammar)
		})
	}
}

// refChain is a chain of n rules, each referring to the next at the start
// of an alternative.
func refChain(n int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := range n {
		fmt.Fprintf(&b, "r%d ::= \"a\" | r%d\n", i, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"b\"\n", n)
	return b.String()
}

// diamonds is n rules each referring twice to the next, leftmost: 2^n
// leftmost paths.
func diamonds(n int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := range n {
		fmt.Fprintf(&b, "r%d ::= r%d \"a\" | r%d \"b\"\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"c\"\n", n)
	return b.String()
}

// TestGrammarAccepted: the bounds leave real grammars alone, and llama.cpp
// handles what the SDK lets through.
func TestGrammarAccepted(t *testing.T) {
	m := stories(t)
	for _, src := range []string{
		"root ::= " + strings.Repeat("(", llama.MaxGrammarNesting) + `"a"` + strings.Repeat(")", llama.MaxGrammarNesting),
		`root ::= [^"\\\x7F\x00-\x1F]+`,
		`root ::= [\x00-\U0010FFFF]`,
		`root ::= [^\x01-\U0010FFFE]`, // U+10FFFF remains
		`root ::= <[511]> | !<[0]>`,
		`root ::= [a-a] "\U0010FFFF"`,
		refChain(2000),
		diamonds(12),
	} {
		t.Run(src[:min(len(src), 40)], func(t *testing.T) {
			g, err := llama.ParseGrammar(context.Background(), src, "")
			require.NoError(t, err)
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, g.Sampler(), llama.Greedy())
			require.NoError(t, err)
			require.NoError(t, chain.Close())
		})
	}
}

// bigGrammar returns a grammar of about size bytes of trivial rules.
func bigGrammar(size int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "r%d ::= \"a\" | \"b\" r%d\n", i, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"b\"\n", strings.Count(b.String(), "\n")-1)
	return b.String()
}

// TestGrammarLarge parses a 12 MB grammar (a million rules), which took
// quadratic time before; BenchmarkParseGrammar10MB measures it.
func TestGrammarLarge(t *testing.T) {
	src := bigGrammar(12 << 20)
	g, err := llama.ParseGrammar(context.Background(), src, "")
	require.NoError(t, err)
	assert.Equal(t, src, g.Source())
}

func BenchmarkParseGrammar10MB(b *testing.B) {
	src := bigGrammar(10 << 20)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := llama.ParseGrammar(context.Background(), src, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// nestedArrays is a schema of n nested arrays of strings.
func nestedArrays(n int) []byte {
	return []byte(strings.Repeat(`{"type":"array","items":`, n) + `{"type":"string"}` + strings.Repeat("}", n))
}

// TestSchemaBounds: deep schemas are clear errors (matching ErrInvalid),
// and the grammar grows linearly with the depth below the bound.
func TestSchemaBounds(t *testing.T) {
	cases := []struct {
		name   string
		schema []byte
		msg    string
	}{
		{"2000 nested arrays", nestedArrays(2000), "nested more than 1000 deep"},
		{"above MaxSchemaDepth", nestedArrays(llama.MaxSchemaDepth + 1), "levels deep"},
		{"deep const value", []byte(`{"const":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`), "nested more than 1000 deep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llama.GrammarFromJSONSchema(context.Background(), tc.schema)
			require.ErrorIs(t, err, llama.ErrInvalid)
			require.ErrorIs(t, err, llama.ErrGrammar)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	size := func(n int) int {
		g, err := llama.GrammarFromJSONSchema(context.Background(), nestedArrays(n))
		require.NoError(t, err)
		return len(g.Source())
	}
	s40, s80, s120 := size(40), size(80), size(120)
	// Linear: each 40 more levels add about the same.
	assert.InDelta(t, float64(s80-s40), float64(s120-s80), float64(s80-s40)/10, "sizes %d %d %d", s40, s80, s120)

	// MaxSchemaDepth schemas: that many minus one arrays around a string.
	m := stories(t)
	d := llama.MaxSchemaDepth - 1
	g, err := llama.GrammarFromJSONSchema(context.Background(), nestedArrays(d))
	require.NoError(t, err)
	ok, err := g.Match(m, strings.Repeat("[", d+1)+`"x"`+strings.Repeat("]", d+1))
	require.NoError(t, err)
	assert.False(t, ok, "one level too many")
	ok, err = g.Match(m, strings.Repeat("[", d)+`"x"`+strings.Repeat("]", d))
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestSchemaWide converts schemas whose conversion took quadratic time
// (thousands of optional properties, of alternatives); BenchmarkSchemaWide
// measures them.
func TestSchemaWide(t *testing.T) {
	for name, schema := range wideSchemas(5000) {
		t.Run(name, func(t *testing.T) {
			g, err := llama.GrammarFromJSONSchema(context.Background(), schema)
			require.NoError(t, err)
			_, err = llama.ParseGrammar(context.Background(), g.Source(), "")
			require.NoError(t, err)
		})
	}
}

func wideSchemas(n int) map[string][]byte {
	var props, alts []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"integer"}`, i))
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"q%d":{"type":"string"}},"required":["q%d"]}`, i, i))
	}
	return map[string][]byte{
		"optional properties": []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`),
		"alternatives":        []byte(`{"anyOf":[` + strings.Join(alts, ",") + `]}`),
	}
}

func BenchmarkSchemaWide(b *testing.B) {
	for name, schema := range wideSchemas(5000) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := llama.GrammarFromJSONSchema(context.Background(), schema); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSchemaDeep(b *testing.B) {
	s := nestedArrays(llama.MaxSchemaDepth - 1)
	for b.Loop() {
		if _, err := llama.GrammarFromJSONSchema(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPrepareCanceled: grammar parsing and schema conversion stop when
// their context ends.
func TestPrepareCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := llama.ParseGrammar(ctx, bigGrammar(1<<20), "")
	require.ErrorIs(t, err, llama.ErrCanceled)
	require.ErrorIs(t, err, context.Canceled)
	_, err = llama.GrammarFromJSONSchema(ctx, wideSchemas(1000)["optional properties"])
	require.ErrorIs(t, err, llama.ErrCanceled)
	require.ErrorIs(t, err, context.Canceled)

	// Ended while working: a context whose Err turns non-nil after some
	// calls (no timing involved).
	for name, run := range map[string]func(context.Context) error{
		"grammar": func(ctx context.Context) error {
			_, err := llama.ParseGrammar(ctx, bigGrammar(4<<20), "")
			return err
		},
		"schema": func(ctx context.Context) error {
			_, err := llama.GrammarFromJSONSchema(ctx, wideSchemas(20000)["optional properties"])
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := &countdownCtx{Context: context.Background(), left: 3}
			err := run(c)
			require.ErrorIs(t, err, llama.ErrCanceled)
			require.ErrorIs(t, err, context.Canceled)
			assert.LessOrEqual(t, c.left, 0, "the work checked the context while running")
		})
	}
}

// countdownCtx reports context.Canceled from its left-th call of Err on.
type countdownCtx struct {
	context.Context
	left int
}

func (c *countdownCtx) Err() error {
	c.left--
	if c.left <= 0 {
		return context.Canceled
	}
	return nil
}

// rss returns the resident set size of the process in bytes.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// TestSamplerSizesClamped: huge sizes (Penalties(MaxInt32) allocated 8.4
// GB) are clamped to the vocabulary or the training context; the chain is
// built and samples, and memory stays put.
func TestSamplerSizesClamped(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 128})
	const big = math.MaxInt32
	cases := []struct {
		name string
		s    llama.Sampler
	}{
		{"penalties", llama.Penalties(big, 1.1, 0.1, 0.1)},
		{"penalties -1", llama.Penalties(-1, 1.1, 0, 0)},
		{"dry", llama.DRY(0.8, 1.75, big, big, nil)},
		{"dry -1", llama.DRY(0.8, 1.75, 2, -1, nil)},
		{"top-k", llama.TopK(math.MaxInt)},
		{"top-p", llama.TopP(0.9, math.MaxInt)},
		{"min-p", llama.MinP(0.05, math.MaxInt)},
		{"typical", llama.Typical(0.9, math.MaxInt)},
		{"xtc", llama.XTC(0.5, 0.1, math.MaxInt, 1)},
		{"mirostat", llama.Mirostat(5, 0.1, math.MaxInt, 1)},
	}
	before := rss(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tc.s, llama.Dist(1))
			require.NoError(t, err)
			defer chain.Close()
			out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 8, Sampler: chain})
			assert.NotEmpty(t, out)
		})
	}
	assert.Less(t, rss(t)-before, int64(256<<20), "no sampler allocated out of proportion")
}

// forceSampler makes the model write a fixed token sequence, then EOS.
type forceSampler struct {
	toks []llama.Token
	eos  llama.Token
	i    int
}

func (f *forceSampler) Name() string { return "force" }
func (f *forceSampler) Apply(c *llama.Candidates) {
	want := f.eos
	if f.i < len(f.toks) {
		want = f.toks[f.i]
	}
	d := c.Data()
	for k := range d {
		if d[k].ID != want {
			d[k].Logit = float32(math.Inf(-1))
		}
	}
}
func (f *forceSampler) Accept(llama.Token) { f.i++ }
func (f *forceSampler) Reset()             { f.i = 0 }

// TestPieceTextValidUTF8: byte tokens that make invalid UTF-8 (f5 80 80 80,
// which a grammar [^\x00-\U0010FFFF] allowed) never reach Piece.Text; they
// become U+FFFD.
func TestPieceTextValidUTF8(t *testing.T) {
	m := stories(t)
	byteTok := func(b byte) llama.Token {
		for tk := range llama.Token(m.VocabSize()) {
			if p, err := m.TokenPiece(tk, false); err == nil && p == string([]byte{b}) {
				if txt, _ := m.TokenText(tk); strings.HasPrefix(txt, "<0x") {
					return tk
				}
			}
		}
		t.Fatalf("no byte token for %#x", b)
		return llama.NoToken
	}
	a := byteTok('a')
	cases := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"lenient 4-byte sequence above U+10FFFF", []byte{0xf5, 0x80, 0x80, 0x80, 'a'}, "\uFFFD"},
		{"lone continuation", []byte{'a', 0x80, 'a'}, "a\uFFFDa"},
		{"valid split character", []byte{0xe2, 0x9c, 0x93, 'a'}, "✓a"},
	}
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 128})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &forceSampler{eos: m.SpecialTokens().EOS}
			for _, b := range tc.bytes {
				if b == 'a' {
					fs.toks = append(fs.toks, a)
				} else {
					fs.toks = append(fs.toks, byteTok(b))
				}
			}
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Custom(fs), llama.Greedy())
			require.NoError(t, err)
			defer chain.Close()
			var all strings.Builder
			for p, err := range c.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 10, Sampler: chain}).Seq() {
				require.NoError(t, err)
				assert.True(t, utf8.ValidString(p.Text), "%q", p.Text)
				all.WriteString(p.Text)
			}
			assert.Contains(t, all.String(), tc.want)
			assert.True(t, strings.HasSuffix(all.String(), "a"))
		})
	}
}
