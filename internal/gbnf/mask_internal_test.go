package gbnf

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refRejects is llama.cpp's filter of one candidate, path by path
// (llama_grammar_reject_candidates_for_stack), as the reference for the
// Masker: whether every path from stacks rejects the characters cps
// ending in the cut character p. A stack with a token element on top
// inside the token's characters rejects it (see Masker). budget bounds
// the paths.
func refRejects(s *Stacks, stacks []*node, cps []uint32, p partialUTF8, id int32, depth int, budget *int) bool {
	for _, st := range stacks {
		if *budget--; *budget < 0 {
			panic("reference: too many paths")
		}
		if !refRejectsOne(s, st, cps, p, id, depth, budget) {
			return false
		}
	}
	return true
}

func refRejectsOne(s *Stacks, st *node, cps []uint32, p partialUTF8, id int32, depth int, budget *int) bool {
	if st == nil {
		return len(cps) != 0 || p.remain != 0
	}
	r, i := st.top()
	e := s.rules[r][i]
	if isToken(e.kind) {
		if len(cps) == 0 {
			return p.remain != 0
		}
		return depth > 0 || (e.kind == eToken) != (e.val == uint32(id))
	}
	if len(cps) == 0 {
		return p.remain != 0 && !s.matchPartial(r, i, p)
	}
	ok, j := s.matchChar(r, i, cps[0])
	if !ok {
		return true
	}
	out := newStackSet()
	s.advance(s.after(st, j), out, newStackSet())
	return refRejects(s, out.list, cps[1:], p, id, depth+1, budget)
}

// refAllows is the engine's verdict on token id with text piece after s.
func refAllows(s *Stacks, piece []byte, id int32) bool {
	if len(piece) == 0 || piece[0] == 0 {
		return false
	}
	cps, p := decodeUTF8(piece, s.partial)
	budget := 1 << 20
	return !refRejects(s, s.live, cps, p, id, 0, &budget)
}

// testPieces is a small vocabulary with what a real one holds: words and
// their prefixes, multi-byte characters whole and cut, invalid bytes, a
// NUL, an empty text.
var testPieces = []string{
	"", "\x00a", "a", "b", "ab", "abc", "aab", "ba", " ", "  ", " a", "{", "}", "\"", "\"a", "a\"", ":", ",",
	"é", "\xc3", "\xa9", "\xa9a", "é\xc3", "\xe2\x82", "\xe2", "\x82\xac", "€", "\x80", "a\x80", "s", "as", "sa",
	"aaaa", "aaas", "x", "xy", "1", "12", "-", "\n", "日本", "\xf0\x9f", "\x98\x80", "a\x00b", "true", "null",
}

func testVocab() *Vocab {
	return NewVocab(len(testPieces), func(t int) []byte { return []byte(testPieces[t]) })
}

// TestMaskMatchesEngine follows random texts through grammars and, after
// each token, compares the Masker's full mask and its verdicts token by
// token with the engine's filter run path by path.
func TestMaskMatchesEngine(t *testing.T) {
	v := testVocab()
	for _, src := range []string{
		`root ::= "a" [bc]* | "ab" x{0,3}` + "\nx ::= [^\"]",
		`root ::= x{0,4} x{0,4} x{0,4}` + "\nx ::= [^s]",
		`root ::= "{" ws "\"a\"" ws ":" ws ("true" | "null" | [0-9]+) ws "}"` + "\nws ::= [ \\n]*",
		`root ::= "é" "a" | [€日] "本" | "\U0001F600"`,
		`root ::= [^a-z]* "x"`,
		`root ::= <[3]> "b" | !<[4]> "a" | "a" <[5]>`,
		`root ::= ( "a" | "aa" | "aaa" )* "s"`,
		`root ::= [\xa0-\U0010FFFF]+ | . "a"`,
		`root ::= "" | "a"`,
	} {
		t.Run(src, func(t *testing.T) {
			g, err := Parse(src, "")
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(1, uint64(len(src))))
			for walk := 0; walk < 20; walk++ {
				s := g.Stacks()
				m := NewMasker(g, v)
				for step := 0; step < 8; step++ {
					mask, err := m.Mask(s)
					require.NoError(t, err)
					var allowed []int
					for tok, piece := range testPieces {
						want := refAllows(s, []byte(piece), int32(tok))
						got := mask[tok/64]&(1<<(tok%64)) != 0
						require.Equal(t, want, got, "mask, token %q after %d tokens", piece, step)
						one, err := m.Allows(s, int32(tok))
						require.NoError(t, err)
						require.Equal(t, want, one, "Allows, token %q", piece)
						if want {
							allowed = append(allowed, tok)
						}
					}
					if len(allowed) == 0 {
						break
					}
					tok := allowed[rng.IntN(len(allowed))]
					require.True(t, s.AcceptToken(int32(tok), []byte(testPieces[tok])), "accept %q", testPieces[tok])
				}
			}
		})
	}
}

// TestMaskAmbiguous: a grammar of 16 ambiguous repetitions, where the
// engine's filter takes minutes on one refused candidate (its paths
// multiply), takes the Masker a few sets.
func TestMaskAmbiguous(t *testing.T) {
	g, err := Parse("root ::="+strings.Repeat(" x{0,100}", 16)+"\nx ::= [^s]\n", "")
	require.NoError(t, err)
	pieces := []string{"s", "a", "applications", "aaaaaaaaaaaaaaaas", strings.Repeat("b", 40) + "s", strings.Repeat("b", 40)}
	v := NewVocab(len(pieces), func(t int) []byte { return []byte(pieces[t]) })
	m := NewMasker(g, v)
	s := g.Stacks()
	for _, text := range []string{"", "abc", strings.Repeat("q", 50)} {
		require.True(t, text == "" || s.AcceptToken(0, []byte(text)))
		mask, err := m.Mask(s)
		require.NoError(t, err)
		for tok, p := range pieces {
			assert.Equal(t, !strings.Contains(p, "s"), mask[0]&(1<<tok) != 0, "%q after %q", p, text)
		}
		assert.Less(t, m.work, int64(MaxMaskWork/4), fmt.Sprintf("after %q", text))
	}
}

// TestFilterPaths: the engine's filter of one candidate follows every
// path, and where the grammar is ambiguous the paths multiply with the
// candidate's length; for a plain grammar they stay a few per character.
func TestFilterPaths(t *testing.T) {
	for _, c := range []struct {
		src, piece string
		atMost     int64 // -1: above the limit
	}{
		{`root ::= "{" [a-z]* "}"`, "{abc}", 20},
		{"root ::=" + strings.Repeat(" x{0,100}", 16) + "\nx ::= [^s]\n", "s", 200},
		{"root ::=" + strings.Repeat(" x{0,100}", 16) + "\nx ::= [^s]\n", "applications", -1},
	} {
		g, err := Parse(c.src, "")
		require.NoError(t, err)
		got := g.Stacks().FilterPaths([]byte(c.piece), 1_000_000)
		if c.atMost < 0 {
			assert.Greater(t, got, int64(1_000_000), c.piece)
		} else {
			assert.LessOrEqual(t, got, c.atMost, c.piece)
		}
	}
}

// FuzzMask compares the Masker with the engine's filter, path by path,
// on fuzzed grammars after fuzzed texts over the test vocabulary.
func FuzzMask(f *testing.F) {
	for _, c := range []struct {
		src  string
		walk []byte
	}{
		{`root ::= "a" [bc]* | "ab" x{0,3}` + "\nx ::= [^\"]", []byte{2, 4}},
		{`root ::= x* x* "s"` + "\nx ::= [^s] | \"aa\"", []byte{1, 2, 3}},
		{`root ::= "é" [^a] | <[3]> . | [\xc0-\xff]+`, []byte{19, 20}},
	} {
		f.Add(c.src, c.walk)
	}
	v := testVocab()
	f.Fuzz(func(t *testing.T, src string, walk []byte) {
		g, err := Parse(src, "")
		if err != nil || len(walk) > 8 {
			return
		}
		s := g.Stacks()
		m := NewMasker(g, v)
		for _, w := range walk {
			if s.Cost(1_000_000) > 1_000_000 {
				return
			}
			mask, err := m.Mask(s)
			if err != nil {
				return
			}
			var allowed []int
			for tok, piece := range testPieces {
				var want bool
				func() {
					defer func() {
						if recover() != nil { // the reference's path budget
							want = mask[tok/64]&(1<<(tok%64)) != 0
						}
					}()
					want = refAllows(s, []byte(piece), int32(tok))
				}()
				if got := mask[tok/64]&(1<<(tok%64)) != 0; got != want {
					t.Fatalf("token %q: mask %v, engine %v", piece, got, want)
				}
				if want {
					allowed = append(allowed, tok)
				}
			}
			if len(allowed) == 0 {
				return
			}
			tok := allowed[int(w)%len(allowed)]
			if !s.AcceptToken(int32(tok), []byte(testPieces[tok])) {
				t.Fatalf("the mask allows %q, which no stack accepts", testPieces[tok])
			}
		}
	})
}

// TestMaskerBounded: a generation whose every token leads to new states
// (a bounded repetition: each position is its own) keeps what the Masker
// holds within its limits, and a character class of thousands of
// characters counts its length.
func TestMaskerBounded(t *testing.T) {
	g, err := Parse(`root ::= [^"]{0,1999} "\""`, "")
	require.NoError(t, err)
	v := testVocab()
	m := NewMasker(g, v)
	s := g.Stacks()
	for step := 0; step < 600; step++ {
		_, err := m.Mask(s)
		require.NoError(t, err)
		require.LessOrEqual(t, m.entries, maskerMaxEntries)
		require.True(t, s.AcceptToken(2, []byte("a")))
	}
	var class strings.Builder
	for r := rune(0x4e00); r < 0x4e00+8000; r++ {
		class.WriteRune(r)
	}
	g, err = Parse("root ::= [^"+class.String()+"]+", "")
	require.NoError(t, err)
	m = NewMasker(g, v)
	_, err = m.Mask(g.Stacks())
	require.NoError(t, err)
	assert.Greater(t, m.work, int64(8000/classWeight))
}
