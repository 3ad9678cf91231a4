package gbnf_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gbnf"
	"github.com/x/llama/internal/testenv"
)

// upstreamCase is a grammar from llama.cpp's own tests with its verdict.
type upstreamCase struct {
	name   string
	src    string
	root   string
	accept bool
}

var (
	reFailure = regexp.MustCompile(`(?s)verify_failure\(R"""\((.*?)\)"""`)
	reParsing = regexp.MustCompile(`(?s)verify_parsing\(R"""\((.*?)\)"""`)
	reGrammar = regexp.MustCompile(`(?s)test_grammar\(\s*"[^"]*",\s*(?://[^\n]*\n\s*)*R"""\((.*?)\)"""`)
)

// upstreamCases reads the grammars of llama.cpp's test-grammar-parser.cpp
// and test-grammar-integration.cpp with the verdicts those tests assert.
func upstreamCases(t *testing.T) []upstreamCase {
	dir := filepath.Join(testenv.LlamaSrc(t), "tests")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return string(b)
	}
	var cases []upstreamCase
	add := func(file string, re *regexp.Regexp, accept bool, want int) {
		ms := re.FindAllStringSubmatch(read(file), -1)
		require.Len(t, ms, want, "cases in %s for %s", file, re)
		for i, m := range ms {
			cases = append(cases, upstreamCase{name: filepath.Base(file) + "/" + strings.SplitN(re.String(), `\(`, 2)[0][4:] + "/" + string(rune('a'+i%26)) + string(rune('0'+i/26)), src: m[1], accept: accept})
		}
	}
	add("test-grammar-parser.cpp", reFailure, false, 6)
	add("test-grammar-parser.cpp", reParsing, true, 17)
	add("test-grammar-integration.cpp", reGrammar, true, 14)
	// The failure tests of test-grammar-integration.cpp, written out.
	cases = append(cases,
		upstreamCase{"missing root", "\n        rot ::= expr\n        expr ::= term (\"+\" term)*\n        term ::= number\n        number ::= [0-9]+", "", false},
		upstreamCase{"missing reference", "root ::= expr\n        expr ::= term (\"+\" term)*\n        term ::= numero\n        number ::= [0-9]+", "", false},
		upstreamCase{"left recursion simple", `root ::= "a" | root "a"`, "", false},
		upstreamCase{"left recursion medium", "\n        root ::= asdf\n        asdf ::= \"a\" | asdf \"a\"\n        ", "", false},
		upstreamCase{"left recursion hard", "\n        root ::= asdf\n        asdf ::= \"a\" | foo \"b\"\n        foo ::= \"c\" | asdf \"d\" | \"e\"", "", false},
		upstreamCase{"left recursion hardest", "\n        root ::= asdf\n        asdf ::= \"a\" | foo \"b\"\n        foo ::= \"c\" | empty asdf \"d\" | \"e\"\n        empty ::= \"blah\" | ", "", false},
		upstreamCase{"missing root symbol", "\n        root ::= \"foobar\"\n    ", "nonexistent", false},
		upstreamCase{"custom root missing", "\n        foobar ::= \"foobar\"\n    ", "root", false},
		upstreamCase{"custom root", "\n        foobar ::= \"foobar\"\n    ", "foobar", true},
	)
	return cases
}

func TestUpstreamCases(t *testing.T) {
	cases := upstreamCases(t)
	require.Len(t, cases, 46)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := gbnf.Parse(c.src, c.root)
			if c.accept {
				require.NoError(t, err)
				root := c.root
				if root == "" {
					root = "root"
				}
				assert.Equal(t, root, g.Root)
				_, ok := g.Rule(root)
				assert.True(t, ok, "the start rule %q is among the rules", root)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestExampleGrammars(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.LlamaSrc(t), "grammars", "*.gbnf"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 8)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			g, err := gbnf.Parse(string(b), "")
			require.NoError(t, err)
			assert.Equal(t, "root", g.Root)
			r, ok := g.Rule("root")
			require.True(t, ok)
			assert.Positive(t, r.Line)
		})
	}
}

func TestValid(t *testing.T) {
	for _, c := range []struct {
		name, src string
		rules     []gbnf.Rule
	}{
		{"one rule", `root ::= "a"`, []gbnf.Rule{{"root", 1}}},
		{"continuation after |", "root ::= \"a\" |\n  \"b\"\n", []gbnf.Rule{{"root", 1}}},
		{"alternatives on new lines in a group", "root ::= (\n  \"a\"\n  | \"b\"\n)\nx ::= root", []gbnf.Rule{{"root", 1}, {"x", 5}}},
		{"comments", "# head\nroot ::= a # tail\n# between\na ::= [a-z] # more", []gbnf.Rule{{"root", 2}, {"a", 4}}},
		{"CRLF", "root ::= a\r\na ::= \"x\"\r\n", []gbnf.Rule{{"root", 1}, {"a", 2}}},
		{"escapes", `root ::= "\n\t\r\\\"\x41\u00e9\U0001F600\[\]\-"`, []gbnf.Rule{{"root", 1}}},
		{"classes", `root ::= [a-z] [^"\\] [\x00-\x1F] [-a] [a-] [\]] [é-ü] [^]`, []gbnf.Rule{{"root", 1}}},
		{"empty string and class", `root ::= "" []`, []gbnf.Rule{{"root", 1}}},
		{"any", `root ::= . .* "x"`, []gbnf.Rule{{"root", 1}}},
		{"repetitions", `root ::= "a"* "b"+ "c"? "d"{3} "e"{2,} "f"{1,4} "g"{0} "h"{ 2 , 3 }`, []gbnf.Rule{{"root", 1}}},
		{"large max becomes unbounded", `root ::= "a"{0,5000}`, []gbnf.Rule{{"root", 1}}},
		{"limit edge", `root ::= "a"{1999}`, []gbnf.Rule{{"root", 1}}},
		{"tokens", `root ::= <[1]> !<[2]> <s> !<|im_end|> <[4294967297]>`, []gbnf.Rule{{"root", 1}}},
		{"empty alternative", "root ::= | \"a\"", []gbnf.Rule{{"root", 1}}},
		{"redefinition", "root ::= \"a\"\nroot ::= \"b\"", []gbnf.Rule{{"root", 2}}},
		{"digit names", "root ::= 1x\n1x ::= \"a\"", []gbnf.Rule{{"root", 1}, {"1x", 2}}},
		{"right recursion", "root ::= \"a\" root | \"\"", []gbnf.Rule{{"root", 1}}},
		{"space before ::=", "root\t  ::=\n\n  \"a\"", []gbnf.Rule{{"root", 1}}},
		{"no final newline after comment", "root ::= \"a\" # end", []gbnf.Rule{{"root", 1}}},
		{"stacked repetition", `root ::= "a"*?`, []gbnf.Rule{{"root", 1}}},
		// Cycles of last references through rules that may match
		// nothing: llama.cpp's advance sees their stacks again and ends.
		{"repetition of a repetition", `root ::= ( [x]* )*`, []gbnf.Rule{{"root", 1}}},
		{"tail cycle through an empty rule", "root ::= a \"x\"\na ::= b a | \"z\"\nb ::= c\nc ::= \"\" | \"y\"", []gbnf.Rule{{"root", 1}, {"a", 2}, {"b", 3}, {"c", 4}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := gbnf.Parse(c.src, "")
			require.NoError(t, err)
			assert.Equal(t, c.rules, g.Rules)
		})
	}
}

func TestGeneratedRoot(t *testing.T) {
	// llama.cpp names helper rules NAME_N and accepts them as start rules.
	g, err := gbnf.Parse(`root ::= ("a")`, "root_1")
	require.NoError(t, err)
	assert.Equal(t, 1, g.Generated)
}

func TestInvalid(t *testing.T) {
	for _, c := range []struct {
		name, src, root string
		line, col       int
		kind            gbnf.Kind
		msg             string
	}{
		{"empty", "", "", 1, 1, gbnf.KindEmpty, "defines no rule"},
		{"only comments", "# nothing\n  ", "", 2, 3, gbnf.KindEmpty, "defines no rule"},
		{"missing ::=", "root ::= a\na = \"x\"", "", 2, 3, gbnf.KindSyntax, "expected ::="},
		{"name on next line", "root\n::= \"a\"", "", 1, 5, gbnf.KindSyntax, "expected ::="},
		{"alternative on a new line", "root ::= \"a\"\n  | \"b\"", "", 2, 3, gbnf.KindSyntax, "expected a rule name"},
		{"unclosed string", "root ::= \"abc", "", 1, 10, gbnf.KindSyntax, "not closed"},
		{"unclosed class", "root ::= [a-", "", 1, 10, gbnf.KindSyntax, "not closed"},
		{"unknown escape", `root ::= "\q"`, "", 1, 11, gbnf.KindSyntax, `unknown escape \q`},
		{"short hex", `root ::= "\x4"`, "", 1, 14, gbnf.KindSyntax, "2 hex digits"},
		{"short unicode", `root ::= [\u12G4]`, "", 1, 15, gbnf.KindSyntax, "4 hex digits"},
		{"unclosed group", "root ::= (\"a\"\n", "", 2, 1, gbnf.KindSyntax, "expected ')'"},
		{"stray paren", `root ::= "a")`, "", 1, 13, gbnf.KindSyntax, "expected newline or end"},
		{"repeat nothing", `root ::= *`, "", 1, 10, gbnf.KindSyntax, "no item before it"},
		{"repeat empty string", `root ::= ""+`, "", 1, 12, gbnf.KindSyntax, "no item before it"},
		{"repeat after alternative", `root ::= "a" | ?`, "", 1, 16, gbnf.KindSyntax, "no item before it"},
		{"brace without int", `root ::= "a"{,}`, "", 1, 14, gbnf.KindSyntax, "expected an integer"},
		{"brace unclosed", `root ::= "a"{1,2`, "", 1, 17, gbnf.KindSyntax, "expected '}'"},
		{"brace bad separator", `root ::= "a"{1;2}`, "", 1, 15, gbnf.KindSyntax, "expected ',' or '}'"},
		{"count over limit", `root ::= "a"{2001}`, "", 1, 13, gbnf.KindLimit, "above the limit"},
		{"count overflows", `root ::= "a"{99999999999999999999}`, "", 1, 14, gbnf.KindLimit, "out of range"},
		{"nested product over limit", `root ::= (("a"){0,50}){0,40}`, "", 1, 23, gbnf.KindLimit, "too many rules"},
		{"long literal repeated", `root ::= "` + strings.Repeat("a", 1000) + `"{1999}`, "", 1, 1012, gbnf.KindLimit, "too large"},
		{"repetitions add up", "root ::= " + strings.Repeat(`[a-z]{0,1999} `, 70), "", 1, 10 + 48*15 + 13, gbnf.KindLimit, "too large"},
		{"min above max", `root ::= "a"{5,2}`, "", 1, 13, gbnf.KindMinAboveMax, "above its maximum"},
		{"bang without token", `root ::= !"a"`, "", 1, 11, gbnf.KindSyntax, "expected '<'"},
		{"bad token id", `root ::= <[x]>`, "", 1, 12, gbnf.KindSyntax, "expected an integer"},
		{"unclosed token", `root ::= <abc`, "", 1, 10, gbnf.KindSyntax, "not closed with '>'"},
		{"undefined", "root ::= a b\na ::= \"x\"", "", 1, 12, gbnf.KindUndefined, `undefined rule "b"`},
		{"no root", `main ::= "a"`, "", 1, 1, gbnf.KindNoRoot, `no rule named "root"`},
		{"custom root missing", `root ::= "a"`, "main", 1, 1, gbnf.KindNoRoot, `no rule named "main"`},
		{"left recursion", "root ::= a\na ::= b \"x\"\nb ::= | a", "", 2, 1, gbnf.KindLeftRecursion, `"a" is left-recursive`},
		{"left recursion in group", "root ::= (root \"x\")? \"y\"", "", 1, 1, gbnf.KindLeftRecursion, "left-recursive"},
		// Cycles llama.cpp's own check misses (its rules are empty only
		// through other rules), which its stack advance grows until the
		// process runs out of memory.
		{"left recursion through a rule empty by another", "root ::= a\na ::= b a \"x\" | \"z\"\nb ::= c\nc ::= \"\" | \"y\"", "", 2, 1, gbnf.KindLeftRecursion, `"a" is left-recursive (through rules that can match nothing)`},
		{"left recursion through an optional group's rule", "root ::= a\na ::= e a \"x\" | \"z\"\ne ::= f f\nf ::= \"y\"?", "", 2, 1, gbnf.KindLeftRecursion, "through rules that can match nothing"},
		{"left recursion across two rules", "root ::= a\na ::= b \"x\" | \"z\"\nb ::= e a\ne ::= f\nf ::= \"\" | \"y\"", "", 2, 1, gbnf.KindLeftRecursion, "through rules that can match nothing"},
		{"NUL", "root ::= \"a\x00\"", "", 1, 12, gbnf.KindNUL, "NUL"},
		{"bad char after item", "root ::= \"a\" ;", "", 1, 14, gbnf.KindSyntax, "expected newline or end"},
		{"UTF-8 lead swallows the quote", "root ::= \"\xc3\"", "", 1, 10, gbnf.KindSyntax, "not closed"},
		{"groups too deep", "root ::= " + strings.Repeat("(", gbnf.MaxNesting+1) + `"a"` + strings.Repeat(")", gbnf.MaxNesting+1), "", 1, 10 + gbnf.MaxNesting, gbnf.KindDepth, "nested more than 1000"},
		{"reversed range", "root ::= \"x\"\na ::= [a-c z-a]", "", 2, 12, gbnf.KindUnmatchable, "range z-a is empty"},
		{"NUL escape", `root ::= "a\x00"`, "", 1, 12, gbnf.KindUnmatchable, "U+0000"},
		{"beyond U+10FFFF", `root ::= "\U00110000"`, "", 1, 11, gbnf.KindUnmatchable, "not a Unicode code point"},
		{"raw byte beyond U+10FFFF", "root ::= \"\xf5\x80\x80\x80\"", "", 1, 11, gbnf.KindUnmatchable, "not a Unicode code point"},
		{"class of invalid code points", `root ::= [^\x00-\U0010FFFF]`, "", 1, 10, gbnf.KindUnmatchable, "excludes every Unicode character"},
		{"negated class in pieces", `root ::= [^\x01-\x7f\x80-\U0010FFFF]`, "", 1, 10, gbnf.KindUnmatchable, "excludes every"},
		{"class of NUL", `root ::= "a" [\x00]`, "", 1, 14, gbnf.KindUnmatchable, "matches no character"},
		{"leftmost chain", "root ::= a0\n" + chain(gbnf.MaxRefDepth+1), "", 2, 1, gbnf.KindDepth, "more than 20000 leftmost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gbnf.Parse(c.src, c.root)
			require.Error(t, err)
			var ge *gbnf.Error
			require.True(t, errors.As(err, &ge), "%T", err)
			assert.Equal(t, c.line, ge.Line, "line: %v", err)
			assert.Equal(t, c.col, ge.Col, "col: %v", err)
			assert.Equal(t, c.kind, ge.Kind, "kind: %v", err)
			assert.Contains(t, ge.Msg, c.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "gbnf: line "), err.Error())
		})
	}
}

// chain is n rules a0 ... a(n-1), each referring to the next leftmost.
func chain(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("a" + strconv.Itoa(i) + " ::= \"x\" | a" + strconv.Itoa(i+1) + "\n")
	}
	b.WriteString("a" + strconv.Itoa(n) + " ::= \"y\"\n")
	return b.String()
}

func TestVocabSize(t *testing.T) {
	for _, c := range []struct {
		src string
		ok  bool
	}{
		{`root ::= <[511]> !<[0]>`, true},
		{`root ::= <[512]>`, false},
		{`root ::= "a" !<[4294967297]>`, false}, // llama.cpp would keep the low 32 bits: 1
	} {
		g, err := gbnf.ParseWith(c.src, gbnf.Options{VocabSize: 512})
		if c.ok {
			require.NoError(t, err)
			assert.Equal(t, int64(511), g.MaxTokenID)
			continue
		}
		var ge *gbnf.Error
		require.ErrorAs(t, err, &ge)
		assert.Equal(t, gbnf.KindTokenRange, ge.Kind)
		g, err = gbnf.Parse(c.src, "")
		require.NoError(t, err, "without a vocabulary size, ids are not checked")
		assert.GreaterOrEqual(t, g.MaxTokenID, int64(512), "the id as written, so that a check against the vocabulary later refuses it too")
	}
}

func TestLines(t *testing.T) {
	g, err := gbnf.Parse("# c\r\nroot ::= a\r\n\ra ::= \"x\"\nb ::= a\n", "")
	require.NoError(t, err)
	assert.Equal(t, []gbnf.Rule{{Name: "root", Line: 2}, {Name: "a", Line: 4}, {Name: "b", Line: 5}}, g.Rules)
}

func TestParseContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := gbnf.ParseContext(ctx, `root ::= "a"`, gbnf.Options{})
	require.ErrorIs(t, err, context.Canceled)
}

// BenchmarkParse10MB parses 10 MB of rules (quadratic before: 60,000 rules
// took 66 s).
func BenchmarkParse10MB(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("root ::= r0\n")
	for i := 0; sb.Len() < 10<<20; i++ {
		sb.WriteString("r" + strconv.Itoa(i) + " ::= \"a\" | \"b\" r" + strconv.Itoa(i+1) + "\n")
	}
	sb.WriteString("r" + strconv.Itoa(strings.Count(sb.String(), "\n")-1) + " ::= \"c\"\n")
	src := sb.String()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := gbnf.Parse(src, ""); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTokenOption(t *testing.T) {
	var seen []string
	tok := func(s string) (uint32, bool) { seen = append(seen, s); return 9, s == "<s>" }
	g, err := gbnf.ParseWith(`root ::= <s> !<s> <[7]>`, gbnf.Options{Token: tok})
	require.NoError(t, err)
	assert.Equal(t, []string{"<s>", "<s>"}, seen)
	assert.True(t, g.NamedTokens)
	// The ids are the vocabulary's: token 9 starts the text, !9 follows.
	s := g.Stacks()
	assert.False(t, s.Clone().AcceptToken(7, nil))
	require.True(t, s.AcceptToken(9, nil))
	assert.False(t, s.Clone().AcceptToken(9, nil))
	require.True(t, s.AcceptToken(8, nil))
	require.True(t, s.AcceptToken(7, nil))
	assert.True(t, s.AtEnd())
	g, err = gbnf.Parse(`root ::= <[7]>`, "")
	require.NoError(t, err)
	assert.False(t, g.NamedTokens)
	_, err = gbnf.ParseWith("root ::= <s> |\n  <x y>", gbnf.Options{Token: tok})
	var ge *gbnf.Error
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, gbnf.KindToken, ge.Kind)
	assert.Equal(t, [2]int{2, 3}, [2]int{ge.Line, ge.Col})
}

func TestErrorFormat(t *testing.T) {
	_, err := gbnf.Parse("root ::= a\n\nb c", "")
	require.EqualError(t, err, `gbnf: line 3, col 3: expected ::= after rule name "b", found 'c'`)
	assert.Equal(t, "left recursion", gbnf.KindLeftRecursion.String())
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`root ::= "a"`, `root ::= [a-z]+ ("," [0-9]{1,3})*`, "root ::= (\n \"a\"\n | b\n)\nb ::= .?",
		`root ::= <[1]> !<[2]> <s>`, `root ::= "\x41\u00e9\U0001F600"`, `root ::= "a"{5,2}`,
	} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, src, root string) {
		g, err := gbnf.Parse(src, root)
		if err != nil {
			var ge *gbnf.Error
			if !errors.As(err, &ge) || ge.Line < 1 || ge.Col < 1 {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		if root == "" {
			root = "root"
		}
		if g.Root != root {
			t.Fatalf("root %q, want %q", g.Root, root)
		}
	})
}

// nested is a grammar of levels rules, each a sequence of fan references to
// the next, the last one "x"*: every "x" may come from any of fan^levels
// places, which llama.cpp's grammar engine keeps as as many stacks.
func nested(levels, fan int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := range levels {
		b.WriteString("r" + strconv.Itoa(i) + " ::=" + strings.Repeat(" r"+strconv.Itoa(i+1), fan) + "\n")
	}
	b.WriteString("r" + strconv.Itoa(levels) + " ::= \"x\"*\n")
	return b.String()
}

func TestParseStates(t *testing.T) {
	alts := make([]string, 512)
	for i := range alts {
		alts[i] = `"{\"name\": \"tool` + strconv.Itoa(i) + `\"}"`
	}
	enum := make([]string, 3000)
	for i := range enum {
		enum[i] = `"\"value` + strconv.Itoa(i) + `\""`
	}
	props := make([]string, 256)
	for i := range props {
		props[i] = `("\"p` + strconv.Itoa(i) + `\": " [a-z]* ", ")?`
	}
	for _, c := range []struct {
		name, src string
		ok        bool
	}{
		{"fan of 10 over 2 levels", nested(2, 10), true},
		{"fan of 10 over 3 levels", nested(3, 10), false},
		{"fan of 10 over 4 levels", nested(4, 10), false},
		// Filtering the candidates after one "x" advances each of the n
		// stacks, and each of theirs: about n⁴/12 comparisons. With
		// stories260K's vocabulary 256 held a core 3 s a token, 1000
		// optional items 455 s.
		{"fan of 128", nested(1, 128), true},
		{"fan of 256", nested(1, 256), false},
		{"fan of 512", nested(1, 512), false},
		{"200 optional items", "root ::= " + strings.Repeat(`"x"? `, 200), true},
		{"500 optional items", "root ::= " + strings.Repeat(`"x"? `, 500), false},
		{"1000 optional items", "root ::= " + strings.Repeat(`"x"? `, 1000), false},
		{"optional items grow with the text", "root ::= \"a\" root \"b\"? | \"\"", false},
		{"a required item after the recursion", "root ::= \"a\" root \"b\" | \"\"", true},
		{"512 alternatives", "root ::= " + strings.Join(alts, " | "), true},
		{"enum of 3000 values", `root ::= "{\"c\": " (` + strings.Join(enum, " | ") + `) " "? "}"`, true},
		{"256 optional properties", `root ::= "{" ` + strings.Join(props, " ") + ` "}"`, true},
		{"nested bounded repetition", `root ::= ("a" [b-z]?){0,900}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gbnf.Parse(c.src, "")
			if c.ok {
				require.NoError(t, err)
				return
			}
			var ge *gbnf.Error
			require.True(t, errors.As(err, &ge), "%v", err)
			assert.Equal(t, gbnf.KindLimit, ge.Kind)
			assert.Contains(t, ge.Msg, "too ambiguous")
		})
	}
}
