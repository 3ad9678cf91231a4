package llama

import (
	"context"
	"math"
	"regexp"
	"strings"
	"unsafe"

	"github.com/x/llama/internal/capi"
)

// Grammar is a GBNF grammar (llama.cpp's grammar format) that constrains
// generation. Make one with ParseGrammar, GrammarFromJSONSchema or
// schema.GrammarFor (package github.com/x/llama/schema); a Grammar is immutable and safe for concurrent use.
type Grammar struct {
	source   string
	root     string
	checked  bool  // parsed by ParseGrammar (or made by the schema converter and parsed)
	maxToken int64 // largest <[id]> named, -1 if none (when checked)
}

// Source returns the grammar text ("" for a nil Grammar).
func (g *Grammar) Source() string {
	if g == nil {
		return ""
	}
	return g.source
}

// Root returns the start rule's name ("" for a nil Grammar).
func (g *Grammar) Root() string {
	if g == nil {
		return ""
	}
	return g.root
}

// Sampler returns a sampler that masks every token the grammar does not
// allow. Put it first in a chain. A Grammar made by ParseGrammar is not
// parsed again when the chain is built; one made otherwise (by
// GrammarFromJSONSchema) is checked there as ParseGrammar would, and a
// malformed grammar is then NewSamplerChain's error. The zero Grammar
// constrains nothing.
//
// The sampler wraps llama.cpp's grammar engine with a guard: llama.cpp
// aborts the process when a token its grammar rejects is accepted, so
// every token is checked before it reaches the grammar's accept. A
// rejected token (from Accept, or a chain whose other samplers picked a
// token the grammar masked) puts the grammar in a failed state: from then
// on it allows only end-of-generation tokens, and Sample and Accept
// return an error matching ErrGrammar.
func (g *Grammar) Sampler() Sampler {
	if g == nil {
		return invalid("grammar", "nil *Grammar")
	}
	return grammarSpec{source: g.source, root: g.root, checked: g.checked, maxToken: g.maxToken}
}

// LazySampler returns a sampler that lets the model write freely until a
// trigger fires (a token of tokens, or a match of one of the regular
// expressions in patterns over the text generated so far: the constrained
// text starts at the first non-empty capture group, or at the match; a
// pattern of the form ^...$ must match the whole text), and the grammar
// constrains everything from the trigger on. A literal word triggers when
// escaped with regexp.QuoteMeta. At least one trigger is needed.
//
// Triggers are evaluated in Go (RE2: linear time, no stack growth on long
// outputs) and the triggered text is fed to the grammar one byte at a
// time, checked; text the grammar rejects fails the grammar as with
// Sampler instead of aborting the process as llama.cpp's own lazy
// grammars do.
func (g *Grammar) LazySampler(patterns []string, tokens []Token) Sampler {
	if g == nil {
		return invalid("grammar-lazy", "nil *Grammar")
	}
	return grammarSpec{source: g.source, root: g.root, checked: g.checked, maxToken: g.maxToken,
		lazy: true, patterns: patterns, tokens: tokens}
}

type grammarSpec struct {
	source, root string
	checked      bool  // already parsed in Go: only token ids remain to check
	maxToken     int64 // largest <[id]>, when checked
	lazy         bool
	patterns     []string
	tokens       []Token
}

func (g grammarSpec) String() string {
	if g.lazy {
		return "grammar-lazy"
	}
	return "grammar"
}

func (g grammarSpec) build(m *Model) (capi.Sampler, error) {
	root := g.root
	if root == "" {
		root = "root"
	}
	switch {
	case g.source == "":
	case g.checked:
		if g.maxToken >= int64(m.nVocb) {
			// Parse again for the position of the offending token id.
			if _, err := parseGrammar(context.Background(), g.source, root, int(m.nVocb)); err != nil {
				return 0, err
			}
		}
	default:
		if _, err := parseGrammar(context.Background(), g.source, root, int(m.nVocb)); err != nil {
			return 0, err
		}
	}
	gs := &grammarSampler{m: m, lazy: g.lazy, active: !g.lazy, tokens: map[Token]bool{}}
	for _, t := range g.tokens {
		if err := m.CheckToken(t); err != nil {
			return 0, err
		}
		gs.tokens[t] = true
	}
	for _, p := range g.patterns {
		if err := checkPattern(p); err != nil {
			return 0, err
		}
		re, _ := regexp.Compile(p)
		gs.patterns = append(gs.patterns, re)
		gs.full = append(gs.full, len(p) > 1 && p[0] == '^' && p[len(p)-1] == '$')
	}
	if g.lazy && len(gs.patterns) == 0 && len(gs.tokens) == 0 {
		return 0, errorf(CodeInvalid, "grammar", "a lazy grammar needs at least one trigger")
	}
	if g.source == "" {
		gs.active, gs.lazy = false, false
		gs.none = true
	} else {
		gs.inner = capi.SamplerInitGrammar(m.vocab, g.source, root)
		if gs.inner == 0 {
			return 0, errorf(CodeGrammar, "grammar", "llama.cpp rejected the grammar (unknown token name, or no rule %q)", root)
		}
	}
	m.byteTokens()
	return newGoSampler(gs, 0), nil
}

// grammarSampler is the guard around an eager llama.cpp grammar sampler.
type grammarSampler struct {
	m        *Model
	inner    capi.Sampler // eager grammar; 0 for an empty grammar
	none     bool         // empty grammar: no constraint
	lazy     bool
	active   bool // constraining (eager, or lazy and triggered)
	failed   bool
	patterns []*regexp.Regexp
	full     []bool
	tokens   map[Token]bool
	buf      []byte // text generated while awaiting a trigger
	piece    []byte
}

func (g *grammarSampler) Name() string {
	if g.lazy {
		return "grammar-lazy"
	}
	return "grammar"
}

func (g *grammarSampler) Apply(c *Candidates) {
	switch {
	case g.failed:
		d := c.Data()
		for i := range d {
			if !isEOG(g.m, d[i].ID) {
				d[i].Logit = float32(math.Inf(-1))
			}
		}
	case g.active && !g.none:
		capi.SamplerApply(g.inner, c.arr)
	}
}

// allowed reports whether the grammar accepts t next.
func (g *grammarSampler) allowed(t Token) bool {
	td := TokenData{ID: t}
	arr := capi.TokenDataArray{Data: unsafe.Pointer(&td), Size: 1, Selected: -1}
	capi.SamplerApply(g.inner, &arr)
	return !isNegInf(td.Logit)
}

func (g *grammarSampler) Accept(t Token) {
	if g.failed || g.none || t < 0 || int32(t) >= g.m.nVocb {
		return
	}
	if g.active {
		if !g.allowed(t) {
			g.failed = true
			return
		}
		capi.SamplerAccept(g.inner, int32(t))
		return
	}
	g.piece = g.m.appendPiece(g.piece[:0], t, true)
	if g.tokens[t] {
		g.trigger(g.piece)
		return
	}
	g.buf = append(g.buf, g.piece...)
	for i, re := range g.patterns {
		loc := re.FindSubmatchIndex(g.buf)
		if loc == nil || (g.full[i] && (loc[0] != 0 || loc[1] != len(g.buf))) {
			continue
		}
		start := loc[0]
		for k := 2; k+1 < len(loc); k += 2 {
			if loc[k] >= 0 && loc[k+1] > loc[k] {
				start = loc[k]
				break
			}
		}
		text := append([]byte(nil), g.buf[start:]...)
		g.trigger(text)
		return
	}
}

// trigger starts constraining, feeding the grammar the triggered text.
func (g *grammarSampler) trigger(text []byte) {
	g.active = true
	g.buf = g.buf[:0]
	for _, b := range text {
		t := g.m.byteTok[b]
		if t == NoToken || !g.allowed(t) {
			g.failed = true
			return
		}
		capi.SamplerAccept(g.inner, int32(t))
	}
}

func (g *grammarSampler) Reset() {
	if g.inner != 0 {
		capi.SamplerReset(g.inner)
	}
	g.active = !g.lazy && !g.none
	g.failed = false
	g.buf = g.buf[:0]
}

func (g *grammarSampler) Clone() CustomSampler {
	c := *g
	c.buf = append([]byte(nil), g.buf...)
	c.piece = nil
	if g.inner != 0 {
		c.inner = capi.SamplerClone(g.inner)
	}
	return &c
}

func (g *grammarSampler) free() {
	if g.inner != 0 {
		capi.SamplerFree(g.inner)
		g.inner = 0
	}
}

// checkPattern refuses trigger patterns that std::regex may not handle:
// Go's RE2 syntax is the common subset we accept.
func checkPattern(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return errorf(CodeInvalid, "grammar", "trigger pattern has a NUL byte")
	}
	if _, err := regexp.Compile(p); err != nil {
		return errorf(CodeInvalid, "grammar", "trigger pattern %q: %v", p, err)
	}
	return nil
}

// Match reports whether text is a complete sentence of the grammar, as
// llama.cpp's grammar engine (the one that constrains sampling) judges it
// with m's vocabulary. Text is fed one byte token at a time where the
// vocabulary has byte tokens (SentencePiece), else as its tokenization.
func (g *Grammar) Match(m *Model, text string) (bool, error) {
	if g == nil || m == nil {
		return false, errorf(CodeInvalid, "grammar match", "nil *Grammar or *Model")
	}
	toks, err := m.grammarTokens(text)
	if err != nil {
		return false, err
	}
	chain, err := NewSamplerChain(m, SamplerChainOptions{Filter: true}, g.Sampler())
	if err != nil {
		return false, err
	}
	defer chain.Close()
	allowed := func(t Token) (bool, error) {
		out, _, err := chain.Apply([]TokenData{{ID: t}})
		if err != nil {
			return false, err
		}
		return len(out) == 1 && !isNegInf(out[0].Logit), nil
	}
	for _, t := range toks {
		ok, err := allowed(t)
		if err != nil || !ok {
			return false, err
		}
		if err := chain.Accept(t); err != nil {
			return false, err
		}
	}
	eos := m.SpecialTokens().EOS
	if eos == NoToken {
		eos = m.SpecialTokens().EOT
	}
	return allowed(eos)
}

func isNegInf(f float32) bool { return f < -3.0e38 }

// byteTokens finds, once, a token for each byte whose piece is that one
// byte (SentencePiece byte tokens, byte-level BPE's base tokens), and
// reports whether all 256 exist.
func (m *Model) byteTokens() bool {
	m.byteOnce.Do(func() {
		for i := range m.byteTok {
			m.byteTok[i] = NoToken
		}
		n := 0
		var buf [16]byte
		for t := Token(0); t < Token(m.nVocb); t++ {
			p := m.appendPiece(buf[:0], t, false)
			if len(p) == 1 && m.byteTok[p[0]] == NoToken {
				m.byteTok[p[0]] = t
				n++
			}
		}
		m.hasBytes = n == 256
	})
	return m.hasBytes
}

// grammarTokens maps text to tokens whose pieces concatenate to it exactly.
func (m *Model) grammarTokens(text string) ([]Token, error) {
	if m.byteTokens() {
		out := make([]Token, len(text))
		for i := 0; i < len(text); i++ {
			out[i] = m.byteTok[text[i]]
		}
		return out, nil
	}
	return m.Tokenize(text, TokenizeOptions{})
}
