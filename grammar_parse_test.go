package llama_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gbnf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

// grammarCase is a grammar and its start rule.
type grammarCase struct {
	name, src, root string
}

func TestParseGrammar(t *testing.T) {
	g, err := llama.ParseGrammar(context.Background(), "root ::= item+\nitem ::= [a-z] \" \"?\n", "")
	require.NoError(t, err)
	assert.Equal(t, "root", g.Root())
	assert.Equal(t, "root ::= item+\nitem ::= [a-z] \" \"?\n", g.Source())

	g, err = llama.ParseGrammar(context.Background(), `start ::= "x"`, "start")
	require.NoError(t, err)
	assert.Equal(t, "start", g.Root())

	for _, c := range []struct {
		name, src string
		line, col int
		kind      gbnf.Kind
	}{
		{"syntax", "root ::= \"a\"\nnext ::= (\"b\"", 2, 14, gbnf.KindSyntax},
		{"undefined", "root ::= \"a\" |\n  missing", 2, 3, gbnf.KindUndefined},
		{"left recursion", "root ::= x\nx ::= x \"a\" | \"b\"", 2, 1, gbnf.KindLeftRecursion},
		{"no root", `main ::= "a"`, 1, 1, gbnf.KindNoRoot},
		{"min above max", `root ::= "a"{3,1}`, 1, 13, gbnf.KindMinAboveMax},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := llama.ParseGrammar(context.Background(), c.src, "")
			require.Error(t, err)
			assert.Nil(t, g)
			var le *llama.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, llama.CodeGrammar, le.Code)
			assert.ErrorIs(t, err, llama.ErrGrammar)
			var ge *llama.GrammarError
			require.ErrorAs(t, err, &ge)
			assert.Equal(t, [2]int{c.line, c.col}, [2]int{ge.Line, ge.Column}, "%v", err)
			assert.Contains(t, err.Error(), "gbnf: line ")
			// The kind is the parser's, which ParseGrammar runs.
			var pe *gbnf.Error
			_, perr := gbnf.Parse(c.src, "")
			require.ErrorAs(t, perr, &pe)
			assert.Equal(t, c.kind, pe.Kind)
			assert.Equal(t, pe.Msg, ge.Msg)
		})
	}
}

var (
	gpFailure = regexp.MustCompile(`(?s)verify_failure\(R"""\((.*?)\)"""`)
	gpParsing = regexp.MustCompile(`(?s)verify_parsing\(R"""\((.*?)\)"""`)
	gpGrammar = regexp.MustCompile(`(?s)test_grammar\(\s*"[^"]*",\s*(?://[^\n]*\n\s*)*R"""\((.*?)\)"""`)
)

// grammarCases gathers llama.cpp's example grammars, the grammars of its
// parser and integration tests, and cases of our own.
func grammarCases(t *testing.T) []grammarCase {
	src := testenv.LlamaSrc(t)
	var cases []grammarCase
	files, err := filepath.Glob(filepath.Join(src, "grammars", "*.gbnf"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 8)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		cases = append(cases, grammarCase{filepath.Base(f), string(b), ""})
	}
	for _, x := range []struct {
		file string
		re   *regexp.Regexp
		n    int
	}{
		{"test-grammar-parser.cpp", gpFailure, 6},
		{"test-grammar-parser.cpp", gpParsing, 17},
		{"test-grammar-integration.cpp", gpGrammar, 14},
	} {
		b, err := os.ReadFile(filepath.Join(src, "tests", x.file))
		require.NoError(t, err)
		ms := x.re.FindAllStringSubmatch(string(b), -1)
		require.Len(t, ms, x.n)
		for i, m := range ms {
			cases = append(cases, grammarCase{x.file + "#" + string(rune('a'+i)), m[1], ""})
		}
	}
	own := []string{
		"root ::= rot\nrot ::= expr\nexpr ::= [0-9]+", "root ::= expr\nexpr ::= numero\nnumber ::= [0-9]+",
		`root ::= "a" | root "a"`, "root ::= asdf\nasdf ::= \"a\" | foo \"b\"\nfoo ::= \"c\" | empty asdf \"d\" | \"e\"\nempty ::= \"blah\" | ",
		`root ::= "a"`, "root ::= \"a\" |\n  \"b\"\n", "root ::= (\n  \"a\"\n  | \"b\"\n)\nx ::= root",
		"# head\nroot ::= a # tail\n# between\na ::= [a-z] # more", "root ::= a\r\na ::= \"x\"\r\n",
		`root ::= "\n\t\r\\\"\x41\u00e9\U0001F600\[\]\-"`, `root ::= [a-z] [^"\\] [\x00-\x1F] [-a] [a-] [\]] [é-ü] [^]`,
		`root ::= "" []`, `root ::= . .* "x"`, `root ::= "a"* "b"+ "c"? "d"{3} "e"{2,} "f"{1,4} "g"{0} "h"{ 2 , 3 }`,
		`root ::= "a"{0,5000}`, `root ::= "a"{1999}`, `root ::= "a"{2000}`, `root ::= "a"{2001}`,
		`root ::= <[1]> !<[2]> <s> !</s> <[4294967297]>`, `root ::= <abc>`, `root ::= <[99999999999999999999999]>`,
		"root ::= | \"a\"", "root ::= \"a\"\nroot ::= \"b\"", "root ::= 1x\n1x ::= \"a\"", "root ::= \"a\" root | \"\"",
		"root\t  ::=\n\n  \"a\"", "root ::= \"a\" # end", `root ::= "a"*?`, "# nothing\n  ", "root ::= a\na = \"x\"",
		"root\n::= \"a\"", "root ::= \"a\"\n  | \"b\"", "root ::= \"abc", "root ::= [a-", `root ::= "\q"`, `root ::= "\x4"`,
		`root ::= [\u12G4]`, "root ::= (\"a\"\n", `root ::= "a")`, `root ::= *`, `root ::= ""+`, `root ::= "a" | ?`,
		`root ::= "a"{,}`, `root ::= "a"{1,2`, `root ::= "a"{1;2}`, `root ::= "a"{99999999999999999999}`,
		`root ::= (("a"){0,50}){0,40}`, `root ::= (("a"){0,40}){0,49}`, `root ::= !"a"`, `root ::= <[x]>`, `root ::= <abc`,
		"root ::= a b\na ::= \"x\"", `main ::= "a"`, "root ::= a\na ::= b \"x\"\nb ::= | a", "root ::= (root \"x\")? \"y\"",
		"root ::= \"a\" ;", "root ::= \"\xc3\"", "root ::= \"\xe2\x82\"", "root ::= [\xf0]", "root ::= root_2 (\"a\")",
		"root ::= (\"a\")\nroot_1 ::= \"b\"", "root ::= x\nx ::= (\"a\" | ) x", "root ::= x? \"a\"\nx ::= root",
	}
	for i, s := range own {
		cases = append(cases, grammarCase{"own#" + string(rune('a'+i%26)) + string(rune('0'+i/26)), s, ""})
	}
	cases = append(cases,
		grammarCase{"root missing", `root ::= "foobar"`, "nonexistent"},
		grammarCase{"custom root", `foobar ::= "foobar"`, "foobar"},
		grammarCase{"helper rule as root", `root ::= ("a")`, "root_1"},
	)
	return cases
}

// mutate derives a grammar from src by a few random edits biased to the
// characters GBNF gives meaning to.
func mutate(r *rand.Rand, src string) string {
	const alphabet = "\"[]()|*+?{},:=<>!^-.\\\n\t #ax0129_"
	b := []byte(src)
	for range 1 + r.IntN(4)/3 {
		if len(b) == 0 {
			b = append(b, alphabet[r.IntN(len(alphabet))])
			continue
		}
		i := r.IntN(len(b))
		switch r.IntN(5) {
		case 0: // delete a byte
			b = append(b[:i], b[i+1:]...)
		case 1: // insert a byte
			b = append(b[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
		case 2: // replace a byte
			b[i] = alphabet[r.IntN(len(alphabet))]
		case 3: // duplicate a span
			j := min(len(b), i+1+r.IntN(8))
			b = append(b[:j], append(append([]byte(nil), b[i:j]...), b[j:]...)...)
		case 4: // delete a span
			j := min(len(b), i+1+r.IntN(8))
			b = append(b[:i], b[j:]...)
		}
	}
	return string(b)
}

// libraryCanJudge reports whether llama.cpp gives a verdict on src at all:
// it does not terminate on x{m,n} with m > n.
//
// The SDK also refuses, on purpose, grammars llama.cpp accepts but that
// would crash it (KindDepth) or can never match (KindUnmatchable, and
// KindTokenRange for a token id outside the model's vocabulary).
func libraryCanJudge(err error) bool {
	var ge *gbnf.Error
	if !errors.As(err, &ge) {
		return true
	}
	switch ge.Kind {
	case gbnf.KindMinAboveMax, gbnf.KindDepth, gbnf.KindUnmatchable, gbnf.KindTokenRange:
		return false
	}
	return true
}

func TestParseGrammarDifferential(t *testing.T) {
	m := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{})

	// verdicts returns llama.cpp's verdict through the library, ours with
	// the model's vocabulary for <name> tokens, and ParseGrammar's.
	verdicts := func(c grammarCase) (lib, withVocab, plain error, namedTokenRejected bool) {
		tok := func(s string) (uint32, bool) {
			id, ok := m.SingleToken(s)
			namedTokenRejected = namedTokenRejected || !ok
			return uint32(id), ok
		}
		_, withVocab = gbnf.ParseWith(c.src, gbnf.Options{Root: c.root, Token: tok, VocabSize: m.VocabSize()})
		_, plain = llama.ParseGrammar(context.Background(), c.src, c.root)
		// The SDK checks in Go first, so what llama.cpp cannot judge (it
		// would not terminate, or crash) never reaches it.
		g, err := llama.ParseGrammar(context.Background(), c.src, c.root)
		if err == nil {
			var chain *llama.SamplerChain
			if chain, err = llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, g.Sampler()); err == nil {
				chain.Close()
			}
		}
		lib = err
		return
	}
	check := func(t *testing.T, c grammarCase) {
		lib, withVocab, plain, tokRejected := verdicts(c)
		if !libraryCanJudge(withVocab) {
			var ge *gbnf.Error
			require.ErrorAs(t, withVocab, &ge)
			if ge.Kind != gbnf.KindTokenRange { // ParseGrammar has no vocabulary
				require.Error(t, plain)
			}
			require.ErrorIs(t, lib, llama.ErrInvalid, "the SDK's chain refuses it too")
			return
		}
		if c.src == "" {
			// llama.cpp treats an empty grammar as no constraint; the
			// parser (and ParseGrammar, so no chain is built) call it an
			// error.
			require.Error(t, withVocab)
			require.Error(t, plain)
			return
		}
		require.Equal(t, lib == nil, withVocab == nil, "library: %v\nours: %v\ngrammar: %q root %q", lib, withVocab, c.src, c.root)
		if !tokRejected {
			require.Equal(t, withVocab == nil, plain == nil, "ParseGrammar: %v", plain)
		} else {
			// ParseGrammar does not check <name> tokens; the parse with the
			// vocabulary stopped at the first one the model lacks.
			var ge *gbnf.Error
			require.ErrorAs(t, withVocab, &ge)
			require.Equal(t, gbnf.KindToken, ge.Kind)
		}
	}

	cases := grammarCases(t)
	accepted := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { check(t, c) })
		if _, err := llama.ParseGrammar(context.Background(), c.src, c.root); err == nil {
			accepted++
		}
	}
	t.Logf("%d fixed cases, %d accepted", len(cases), accepted)
	require.Greater(t, accepted, 30)
	require.Greater(t, len(cases)-accepted, 30)

	// Mutations of every case, from a fixed seed.
	r := rand.New(rand.NewPCG(1, 2))
	mutants, mutAccepted := 0, 0
	for mutants < 1000 {
		base := cases[r.IntN(len(cases))]
		c := grammarCase{name: base.name + "~", src: mutate(r, base.src), root: base.root}
		if strings.Contains(c.src, "\x00") {
			continue
		}
		mutants++
		check(t, c)
		if t.Failed() {
			return
		}
		if _, err := llama.ParseGrammar(context.Background(), c.src, c.root); err == nil {
			mutAccepted++
		}
	}
	t.Logf("%d mutants, %d accepted", mutants, mutAccepted)
	require.Greater(t, mutAccepted, 100)
	require.Greater(t, mutants-mutAccepted, 100)
}
