package gbnf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gbnf"
	"github.com/x/llama/internal/testenv"
)

// feed accepts text one character a token, and reports whether stacks
// remain after each.
func feed(s *gbnf.Stacks, text string) bool {
	for _, c := range text {
		if !s.AcceptToken(0, []byte(string(c))) {
			return false
		}
	}
	return true
}

func TestStacksCount(t *testing.T) {
	for _, c := range []struct {
		name, src, text string
		want            int // stacks after text; 0: the text is refused
	}{
		{"start", `root ::= "a" | "ab"`, "", 2},
		{"one ends, one goes on", `root ::= "a" | "ab"`, "a", 2}, // the empty stack and "b"
		{"the ended one dropped", `root ::= "a" | "ab"`, "ab", 1},
		{"refused", `root ::= "a" | "ab"`, "b", 0},
		{"a star holds one", `root ::= [a]* [a]*`, strings.Repeat("a", 50), 3},
		// After k characters the first repetition is at k, the second
		// at each of 1..k or about to start, and the text may end: k+3.
		{"bounded repetitions grow", `root ::= x{0,1000} x{0,1000}` + "\nx ::= [a]", strings.Repeat("a", 5), 8},
		{"and grow", `root ::= x{0,1000} x{0,1000}` + "\nx ::= [a]", strings.Repeat("a", 100), 103},
		{"a class stops them", `root ::= "\"" [^"]{0,1000} "\""`, `"` + strings.Repeat("a", 100), 2},
		{"multi-byte characters", `root ::= [é]+ "ü"`, "ééü", 1},
		{"a negated class", `root ::= [^a-c]+`, "xyz", 2},
		{"any character", `root ::= .{2}`, "é€", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := gbnf.Parse(c.src, "")
			require.NoError(t, err)
			s := g.Stacks()
			ok := feed(s, c.text)
			if c.want == 0 {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, c.want, s.Len())
		})
	}
}

func TestStacksTokens(t *testing.T) {
	g, err := gbnf.Parse(`root ::= <[5]> "x" | !<[5]>`, "")
	require.NoError(t, err)
	s := g.Stacks()
	c := s.Clone()
	require.True(t, s.AcceptToken(5, []byte("whatever")))
	assert.Equal(t, 1, s.Len(), "only the first alternative takes token 5")
	require.True(t, s.AcceptToken(9, []byte("x")))
	assert.Equal(t, 1, s.Len(), "the empty stack")
	require.True(t, c.AcceptToken(6, []byte("y")), "the clone did not move")
	assert.False(t, c.AcceptToken(6, []byte("y")), "the text is complete")
}

// TestStacksLimit: the limit holds on every path, the stacks under a
// token element included, and Cost leaves Work alone.
func TestStacksLimit(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"characters", `root ::= "a" body` + "\nbody ::=" + strings.Repeat(` "x"?`, 200) + ` "y"`},
		{"a token element", `root ::= <[5]> body` + "\nbody ::=" + strings.Repeat(` "x"?`, 200) + ` "y"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := gbnf.Parse(c.src, "")
			require.NoError(t, err)
			s := g.Stacks()
			require.ErrorIs(t, s.Fork().AcceptTokenLimit(5, []byte("a"), 10), gbnf.ErrWork)
			require.NoError(t, s.AcceptTokenLimit(5, []byte("a"), gbnf.MaxAcceptWork))
			w := s.Work()
			assert.Greater(t, w, int64(10))
			assert.Greater(t, s.Cost(gbnf.MaxStackWork), int64(0))
			assert.Equal(t, w, s.Work())
		})
	}
}

// TestStacksLongRules: the engine reads a whole rule to find its
// alternatives each time it expands it, so 3,000 stacks expanding a rule
// of 100,000 elements cost it 3·10⁸ reads for one character; the work
// counts them (and the parser and the stacks do not read the rule each
// time).
func TestStacksLongRules(t *testing.T) {
	src := "root ::= ( [a] B" + strings.Repeat(" | [a] B", 2999) + " )\nB ::= \"\" | \"" + strings.Repeat("y", 100000) + "\"\n"
	g, err := gbnf.Parse(src, "")
	require.NoError(t, err)
	s := g.Stacks()
	assert.Equal(t, 3000, s.Len())
	require.ErrorIs(t, s.Fork().AcceptTokenLimit(0, []byte("a"), gbnf.MaxAcceptWork), gbnf.ErrWork)
}

func TestStacksUTF8(t *testing.T) {
	g, err := gbnf.Parse(`root ::= "é" "a"`, "")
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		pieces []string
		ok     bool
		len    int
	}{
		{"whole", []string{"é", "a"}, true, 1},
		{"split across tokens", []string{"\xc3", "\xa9a"}, true, 1},
		{"a cut character takes nothing yet", []string{"\xc3"}, true, 1},
		// llama.cpp drops a piece with an invalid byte (none of its
		// characters count) and stops reading at a NUL byte.
		{"invalid byte", []string{"\x80é"}, true, 1},
		{"NUL ends the text", []string{"é\x00b", "a"}, true, 1},
		{"wrong character", []string{"e"}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := g.Stacks()
			ok := true
			for _, p := range c.pieces {
				ok = s.AcceptToken(0, []byte(p))
				if !ok {
					break
				}
			}
			require.Equal(t, c.ok, ok)
			if ok {
				assert.Equal(t, c.len, s.Len())
			}
		})
	}
}

// TestStacksCost: a grammar whose repetitions can each start at any
// character passes the parser's bound, and the work of accepting a character
// grows past the accept bound with the text (one more character: 3·10⁷
// after 5 characters, 1.2·10⁹ after 40).
func TestStacksCost(t *testing.T) {
	g, err := gbnf.Parse("root ::="+strings.Repeat(` [^"]{0,100}`, 128), "")
	require.NoError(t, err)
	s := g.Stacks()
	word := []byte("a")
	require.True(t, feed(s, strings.Repeat("a", 5)))
	assert.Less(t, s.Cost(gbnf.MaxStackWork), int64(gbnf.MaxStackWork))
	assert.NoError(t, s.Fork().AcceptTokenLimit(0, word, gbnf.MaxAcceptWork))
	require.True(t, feed(s, strings.Repeat("a", 35)))
	assert.Greater(t, s.Len(), 4000)
	assert.ErrorIs(t, s.Fork().AcceptTokenLimit(0, word, gbnf.MaxAcceptWork), gbnf.ErrWork)

	// A JSON string with a length bound stays at two stacks.
	g, err = gbnf.Parse(`root ::= "\"" [^"]{0,1000} "\""`, "")
	require.NoError(t, err)
	s = g.Stacks()
	require.True(t, feed(s, `"`+strings.Repeat("a", 999)))
	assert.Less(t, s.Cost(gbnf.MaxStackWork), int64(100))
}

// TestStartShared: Start makes the first stacks and their cost once and
// hands every caller, on any goroutine, its own copy: the copies follow
// the text apart and match Stacks.
func TestStartShared(t *testing.T) {
	g, err := gbnf.Parse(`root ::= "a" [bc]* | "ab" x{0,9}`+"\nx ::= [^\"]", "")
	require.NoError(t, err)
	want := g.Stacks()
	wantCost := want.Cost(gbnf.MaxStackWork)
	texts := []string{"a", "ab", "abc", "abb", "ac", "abxyz"}
	done := make(chan *gbnf.Stacks, len(texts))
	for _, text := range texts {
		go func() {
			s, cost := g.Start()
			if cost != wantCost || s.Len() != want.Len() || !feed(s, text) {
				s = nil
			}
			done <- s
		}()
	}
	lens := map[int]bool{}
	for range texts {
		s := <-done
		require.NotNil(t, s)
		lens[s.Len()] = true
	}
	assert.Greater(t, len(lens), 1, "the copies followed different texts")
	s, _ := g.Start()
	assert.Equal(t, want.Len(), s.Len(), "the kept stacks are untouched")
}

func FuzzStacks(f *testing.F) {
	for _, c := range []struct{ src, text string }{
		{`root ::= "a" | "ab"`, "ab"}, {`root ::= x{0,5} x{0,5}` + "\nx ::= [a]", "aaaa"},
		{`root ::= <[1]> [^a]* "é"`, "bcé"}, {`root ::= . .? "\u00e9"*`, "\xc3\xa9\xc3"},
	} {
		f.Add(c.src, c.text, uint8(2))
	}
	f.Fuzz(func(t *testing.T, src, text string, cut uint8) {
		g, err := gbnf.Parse(src, "")
		if err != nil {
			return
		}
		s := g.Stacks()
		step := int(cut%7) + 1
		for i := 0; i < len(text); i += step {
			piece := text[i:min(i+step, len(text))]
			before := s.Clone()
			n := before.Len()
			if !s.AcceptToken(int32(i), []byte(piece)) {
				if before.Len() != n {
					t.Fatal("a clone changed with its original")
				}
				break
			}
			if s.Cost(1<<20) < 0 || s.Work() < 0 {
				t.Fatal("negative cost")
			}
		}
	})
}

// BenchmarkStacks follows llama.cpp's JSON grammar through a JSON text in
// pieces of three bytes, with the cost estimate after each, as a grammar
// sampler does for every token: the Go work the guard adds to a token.
func BenchmarkStacks(b *testing.B) {
	src, err := os.ReadFile(filepath.Join(testenv.LlamaSrc(b), "grammars", "json.gbnf"))
	require.NoError(b, err)
	g, err := gbnf.Parse(string(src), "")
	require.NoError(b, err)
	text := `{"name": "Ada Lovelace", "born": 1815, "tags": ["math", "engines"], "notes": {"first": true, "ratio": 0.5}}`
	b.ReportMetric(float64(len(text)+2)/3, "tokens/op")
	for b.Loop() {
		s := g.Stacks()
		for i := 0; i < len(text); i += 3 {
			next := s.Fork()
			if err := next.AcceptTokenLimit(0, []byte(text[i:min(i+3, len(text))]), gbnf.MaxAcceptWork); err != nil {
				b.Fatal(err)
			}
			s = next
			if s.Cost(gbnf.MaxStackWork) > gbnf.MaxStackWork {
				b.Fatal("cost")
			}
		}
	}
}
