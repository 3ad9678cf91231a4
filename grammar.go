package llama

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"
	"unsafe"

	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/gbnf"
)

// Grammar is a GBNF grammar (llama.cpp's grammar format) that constrains
// generation. Make one with ParseGrammar, GrammarFromJSONSchema or
// schema.GrammarFor (package github.com/x/llama/schema); a Grammar is immutable and safe for concurrent use.
type Grammar struct {
	source   string
	root     string
	parsed   *gbnf.Grammar // by ParseGrammar (or made by the schema converter and parsed); nil: not yet
	maxToken int64         // largest <[id]> named, -1 if none (when parsed)
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
//
// The candidates are filtered in Go, not by llama.cpp: the engine checks
// each candidate path by path through its parse stacks, and where a
// grammar is ambiguous ([a-z]* [a-z]* ..., x{0,100} x{0,100} ...) the
// paths multiply with a candidate's length: one request held a core for
// minutes, in C, where nothing interrupts it. The Go filter
// (gbnf.Masker) follows the same stacks as sets, walks the vocabulary as
// a trie and keeps the masks of the states it has seen; it allows what
// the engine allows (tested token by token against it) and is faster
// than the engine on every grammar measured (BenchmarkGrammarFilter).
// The engine still accepts each chosen token, after its own check of
// that one token where that is cheap.
//
// The guard also follows the engine's parse stacks (in Go, by the engine's
// own algorithm) to bound its accept where the work grows with the text:
// some grammars that pass ParseGrammar's checks (x{0,1000} x{0,1000} ...,
// each repetition soon held in as many places as the text is long) make
// each token cost more than the last. A token whose accept would take the
// engine more than about a second, or whose filtering would take the Go
// filter more than about a second, fails the grammar the same way, with
// an error that says so; a grammar whose very first step would (its
// stacks thousands of rules deep, which the parser's check does not
// weigh) is NewSamplerChain's error.
func (g *Grammar) Sampler() Sampler {
	if g == nil {
		return invalid("grammar", "nil *Grammar")
	}
	return grammarSpec{source: g.source, root: g.root, parsed: g.parsed, maxToken: g.maxToken}
}

// LazySampler returns a sampler that lets the model write freely until a
// trigger fires (a token of tokens, or a match of one of the regular
// expressions in patterns over the text generated so far: the constrained
// text starts at the first non-empty capture group, or at the match; a
// pattern of the form ^...$ must match the whole text), and the grammar
// constrains everything from the trigger on. A literal word triggers when
// escaped with regexp.QuoteMeta. At least one trigger is needed. A pattern
// compiles to at most 65,536 regular expression instructions and the
// patterns together to 262,144 (repetitions count their copies:
// a{1000}{100} is 100,000), with at most 64 capture groups; larger ones
// are NewSamplerChain's error.
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
	return grammarSpec{source: g.source, root: g.root, parsed: g.parsed, maxToken: g.maxToken,
		lazy: true, patterns: patterns, tokens: tokens}
}

type grammarSpec struct {
	source, root string
	parsed       *gbnf.Grammar // already parsed in Go: only token ids remain to check
	maxToken     int64         // largest <[id]>, when parsed
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
	parsed := g.parsed
	switch {
	case g.source == "":
	case parsed != nil && g.maxToken < int64(m.nVocb) && !parsed.NamedTokens:
	default:
		// Not parsed yet, or parsed without the vocabulary that resolves
		// its token names (and says where an id is out of range).
		var err error
		if parsed, err = parseGrammar(context.Background(), g.source, root, m); err != nil {
			return 0, err
		}
	}
	gs := &grammarSampler{m: m, lazy: g.lazy, active: !g.lazy, tokens: map[Token]bool{}, parsed: parsed}
	for _, t := range g.tokens {
		if err := m.CheckToken(t); err != nil {
			return 0, err
		}
		gs.tokens[t] = true
	}
	size := 0
	for _, p := range g.patterns {
		if err := checkPattern(p); err != nil {
			return 0, err
		}
		if size += patternSize(p); size > maxTriggerPrograms {
			return 0, errorf(CodeInvalid, "grammar", "the trigger patterns are too large together (more than %d regular expression instructions)", maxTriggerPrograms)
		}
		re, _ := regexp.Compile(p)
		var whole *regexp.Regexp
		if len(p) > 1 && p[0] == '^' && p[len(p)-1] == '$' {
			whole, _ = regexp.Compile("^(?:" + p + ")$")
		}
		gs.patterns, gs.wholes = append(gs.patterns, re), append(gs.wholes, whole)
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
		var cost int64
		gs.start, cost = parsed.Start()
		if cost > gbnf.MaxStackWork {
			capi.SamplerFree(gs.inner)
			return 0, workError(true, "the grammar is too ambiguous: llama.cpp's grammar engine starts with %d parse states, and its first step would take more than %d stack comparisons", gs.start.Len(), int64(gbnf.MaxStackWork))
		}
		gs.stacks = gs.start.Clone()
		gs.vocab = m.grammarVocab()
		gs.mask = gbnf.NewMasker(parsed, gs.vocab.v)
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
	wholes   []*regexp.Regexp // by pattern of the form ^...$: it matching the whole text; nil otherwise
	tokens   map[Token]bool
	buf      []byte // text generated while awaiting a trigger
	bufEnds  []int  // by token of buf: where its text ends in buf
	bufToks  []Token
	piece    []byte
	// stacks follows the engine's parse stacks (start: before any text),
	// to stop before a step whose cost has grown with the text (see
	// gbnf.Stacks); why is the error of a grammar failed that way.
	start, stacks *gbnf.Stacks
	why           error
	tried         *tried // the last token tried on a copy of stacks (see try); nil: none since they moved
	// The candidates are filtered in Go (see Grammar.Sampler): mask
	// follows stacks through the vocabulary.
	parsed *gbnf.Grammar
	vocab  *grammarVocab
	mask   *gbnf.Masker
}

// grammarVocab is a model's vocabulary as grammars filter it.
type grammarVocab struct {
	v   *gbnf.Vocab
	eog []bool // end-of-generation tokens, which the filter allows where the text may end
}

// grammarVocab reads the vocabulary for grammars, once: every token's
// text as llama.cpp's grammar engine has it.
func (m *Model) grammarVocab() *grammarVocab {
	m.gvOnce.Do(func() {
		n := int(m.nVocb)
		var text []byte
		off := make([]int, n+1)
		gv := &grammarVocab{eog: make([]bool, n)}
		for t := range n {
			text = m.appendPiece(text, Token(t), true)
			off[t+1] = len(text)
			gv.eog[t] = isEOG(m, Token(t))
		}
		gv.v = gbnf.NewVocab(n, func(t int) []byte { return text[off[t]:off[t+1]:off[t+1]] })
		m.gv = gv
	})
	return m.gv
}

// tried is a token tried on a copy of a grammar sampler's stacks: the copy
// after it, and AcceptTokenLimit's error.
type tried struct {
	t    Token
	next *gbnf.Stacks
	err  error
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
			if !g.isEOG(d[i].ID) {
				d[i].Logit = float32(math.Inf(-1))
			}
		}
	case g.active && !g.none:
		if err := g.filter(c.Data()); err != nil {
			g.tooMuch(gbnf.MaxMaskWork)
			g.Apply(c)
		}
	}
}

// isEOG reports whether t ends generation.
func (g *grammarSampler) isEOG(t Token) bool {
	if g.vocab != nil && t >= 0 && int(t) < len(g.vocab.eog) {
		return g.vocab.eog[t]
	}
	return isEOG(g.m, t)
}

// filterFew is the most candidates filtered one by one; more are looked
// up in the mask of the whole vocabulary.
const filterFew = 32

// filter masks the candidates the grammar does not allow next, as
// llama.cpp's engine would (gbnf.Masker), or fails for the work.
func (g *grammarSampler) filter(d []TokenData) error {
	if g.stacks == nil {
		return nil
	}
	atEnd := g.stacks.AtEnd()
	eog := g.vocab.eog
	var mask []uint64
	if len(d) > filterFew {
		var err error
		if mask, err = g.mask.Mask(g.stacks); err != nil {
			return err
		}
	}
	var few [filterFew]int32
	var fewOK [filterFew]bool
	if mask == nil {
		for i := range d {
			few[i] = int32(d[i].ID)
		}
		if err := g.mask.Filter(g.stacks, few[:len(d)], fewOK[:len(d)]); err != nil {
			return err
		}
	}
	for i := range d {
		t := d[i].ID
		var ok bool
		switch {
		case t < 0 || int(t) >= len(eog):
		case eog[t]:
			ok = atEnd
		case mask != nil:
			ok = mask[t/64]&(1<<(t%64)) != 0
		default:
			ok = fewOK[i]
		}
		if !ok {
			d[i].Logit = float32(math.Inf(-1))
		}
	}
	return nil
}

// try returns the stacks after token t (a copy; nil when there are none)
// and AcceptTokenLimit's error, remembering the last token tried.
func (g *grammarSampler) try(t Token) (*gbnf.Stacks, error) {
	if g.tried != nil && g.tried.t == t {
		return g.tried.next, g.tried.err
	}
	next := g.stacks.Fork()
	// The engine's text of the token (llama_grammar_accept_impl's piece).
	g.piece = g.m.appendPiece(g.piece[:0], t, true)
	err := next.AcceptTokenLimit(int32(t), g.piece, gbnf.MaxAcceptWork)
	g.tried = &tried{t, next, err}
	return next, err
}

// maxCheckPaths bounds the paths llama.cpp's filter may follow for one
// token (gbnf.Stacks.FilterPaths) where take asks it, besides the Go
// filter, whether it allows the token.
const maxCheckPaths = 100_000

// allowed reports whether llama.cpp's engine allows t next (its filter on
// t alone).
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
		g.take(t)
		return
	}
	if g.tokens[t] {
		// As llama.cpp: the trigger token itself, which a token
		// reference in the grammar can match.
		g.active = true
		g.buf, g.bufToks, g.bufEnds = g.buf[:0], g.bufToks[:0], g.bufEnds[:0]
		g.take(t)
		return
	}
	g.piece = g.m.appendPiece(g.piece[:0], t, true)
	g.buf = append(g.buf, g.piece...)
	g.bufToks, g.bufEnds = append(g.bufToks, t), append(g.bufEnds, len(g.buf))
	began := time.Now()
	for i, re := range g.patterns {
		// As llama.cpp: a pattern ^...$ matching the whole text, else
		// (as any pattern) matching anywhere in it.
		// A match anywhere that spans the text is a whole match; one
		// that does not calls for the whole match only where it may
		// differ (where a search finds nothing, so does the whole match).
		loc := re.FindSubmatchIndex(g.buf)
		if w := g.wholes[i]; w != nil && loc != nil && (loc[0] != 0 || loc[1] != len(g.buf)) {
			if whole := w.FindSubmatchIndex(g.buf); whole != nil {
				loc = whole
			}
		}
		if took := time.Since(began); loc == nil && took > maxTriggerSearch {
			g.failed = true
			g.why = workError(true, "the trigger patterns took %v to search the %d bytes generated so far (at most %v a token); generation stops", took.Round(time.Millisecond), len(g.buf), maxTriggerSearch)
			return
		}
		if loc == nil {
			continue
		}
		start := loc[0]
		for k := 2; k+1 < len(loc); k += 2 {
			if loc[k] >= 0 && loc[k+1] > loc[k] {
				start = loc[k]
				break
			}
		}
		g.trigger(start)
		return
	}
}

// maxTriggerSearch bounds the time a lazy grammar's trigger patterns may
// take to search the text generated so far, at each token: the search
// reads the whole text each time, and a pattern whose program holds many
// live states at once (.* repeated a thousand times) costs that many steps
// a byte. Past it the grammar fails as for too much work (Grammar.Sampler).
// llama.cpp's own patterns take about 20 ms on 200 KB of text.
const maxTriggerSearch = 100 * time.Millisecond

// trigger starts constraining from buf[start:], the text a pattern
// matched, as llama.cpp does: the tokens within it go to the grammar as
// themselves, the part of a token cut by start as its bytes.
func (g *grammarSampler) trigger(start int) {
	g.active = true
	buf, toks, ends := g.buf, g.bufToks, g.bufEnds
	g.buf, g.bufToks, g.bufEnds = g.buf[:0], g.bufToks[:0], g.bufEnds[:0]
	from := 0
	for i, t := range toks {
		end := ends[i]
		if end <= start {
			from = end
			continue
		}
		if from >= start {
			if g.take(t); g.failed {
				return
			}
		} else {
			for _, b := range buf[start:end] {
				bt := g.m.byteTok[b]
				if bt == NoToken {
					g.failed = true
					return
				}
				if g.take(bt); g.failed {
					return
				}
			}
		}
		from = end
	}
}

// take gives token t to the engine when the grammar allows it, else fails
// the grammar. The stacks that follow the engine go first: where the
// engine's accept would pass gbnf.MaxAcceptWork comparisons, or the Go
// filter's check of t gbnf.MaxMaskWork, the grammar fails instead: the
// text has made the grammar's readings so many that llama.cpp would hold
// a core for seconds to hours on each token, in C, where nothing
// interrupts it. The engine's own check of t runs only where its paths
// are few (gbnf.Stacks.FilterPaths).
func (g *grammarSampler) take(t Token) {
	if g.stacks == nil {
		g.failed = true
		return
	}
	eog := g.vocab.eog[t]
	// The engine's accept leaves its stacks as they are for an
	// end-of-generation token (its filter allows one only where the text
	// may end).
	next, paths := g.stacks, int64(0)
	if !eog {
		var err error
		next, err = g.try(t)
		if errors.Is(err, gbnf.ErrWork) {
			g.tooMuch(gbnf.MaxAcceptWork)
			return
		}
		if err != nil {
			next = nil // no stack takes t: the engine should refuse it too
		}
		ok, err := g.mask.Allows(g.stacks, int32(t))
		if err != nil {
			g.tooMuch(gbnf.MaxMaskWork)
			return
		}
		if !ok {
			g.failed = true
			return
		}
		paths = g.stacks.FilterPaths(g.vocab.v.Piece(int(t)), maxCheckPaths)
	}
	// The engine's own verdict too, where its paths are few: its accept
	// of a token it refuses would abort the process.
	if paths <= maxCheckPaths && !g.allowed(t) {
		g.failed = true
		return
	}
	if next == nil {
		// The engine's filter allows a token that its mirror's accept
		// refuses: the engine's accept would abort. Not seen in tests.
		g.failed = true
		g.why = workError(false, "llama.cpp's grammar engine allows a token that its Go mirror refuses; generation stops (please report the grammar)")
		return
	}
	capi.SamplerAccept(g.inner, int32(t))
	g.stacks, g.tried = next, nil
}

// tooMuch fails the grammar for a step that would take more than limit
// units of work.
func (g *grammarSampler) tooMuch(limit int64) {
	g.failed = true
	g.why = workError(true, "the grammar is too ambiguous for the text so far: it holds %d parse states, and its next step would take more than %d steps (seconds to hours of work); generation stops", g.stacks.Len(), limit)
}

// workError is the error of a grammar refused or failed for the work its
// engine would do (see Grammar.Sampler): a grammar error that
// ApplyInPlace reports too; input marks it the caller's (ErrInvalid).
func workError(input bool, format string, args ...any) *Error {
	return &Error{Code: CodeGrammar, Op: "grammar", work: true, input: input, Msg: fmt.Sprintf(format, args...)}
}

func (g *grammarSampler) Reset() {
	if g.inner != 0 {
		capi.SamplerReset(g.inner)
	}
	g.active = !g.lazy && !g.none
	g.failed = false
	g.why = nil
	g.tried = nil
	g.buf, g.bufToks, g.bufEnds = g.buf[:0], g.bufToks[:0], g.bufEnds[:0]
	if g.start != nil {
		g.stacks = g.start.Clone()
	}
}

func (g *grammarSampler) Clone() CustomSampler {
	c := *g
	c.buf = append([]byte(nil), g.buf...)
	c.bufToks = append([]Token(nil), g.bufToks...)
	c.bufEnds = append([]int(nil), g.bufEnds...)
	c.piece = nil
	c.tried = nil
	if g.stacks != nil {
		c.stacks = g.stacks.Clone()
		c.mask = gbnf.NewMasker(g.parsed, g.vocab.v)
	}
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

// CheckTriggerPattern reports whether p is a trigger pattern LazySampler
// accepts (an error matching ErrInvalid otherwise).
func CheckTriggerPattern(p string) error { return checkPattern(p) }

// Bounds of trigger patterns' programs. A regular expression compiles to a
// program whose size its repetitions multiply: a{1000} repeated through a
// 4 KB pattern is millions of instructions, over 100 MB compiled (Go's
// own bound is 3.3 million). One pattern may have at most
// maxTriggerProgram instructions and a sampler's patterns together
// maxTriggerPrograms: a pattern listing a thousand tool names stays far
// below them.
const (
	maxTriggerProgram  = 1 << 16
	maxTriggerPrograms = 1 << 18
	// maxTriggerCaptures bounds a pattern's capture groups, and the
	// program size times groups plus one is bounded as the size is.
	maxTriggerCaptures = 64
)

// checkPattern refuses trigger patterns that are not RE2 syntax (Go's
// regexp; llama.cpp's std::regex is ECMAScript: RE2 has no backreferences
// or lookaround, and takes some classes and flags ECMAScript lacks, such
// as \p{Greek} and (?i)) and patterns past maxTriggerProgram, before they
// are compiled.
func checkPattern(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return errorf(CodeInvalid, "grammar", "trigger pattern has a NUL byte")
	}
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return errorf(CodeInvalid, "grammar", "trigger pattern %q: %v", truncate(p, 80), err)
	}
	n := progSize(re)
	if n > maxTriggerProgram {
		return errorf(CodeInvalid, "grammar", "trigger pattern %q is too large (more than %d regular expression instructions)", truncate(p, 80), maxTriggerProgram)
	}
	// A search keeps, for each live instruction, the positions of every
	// capture group: (.?){1000} with 1,900 empty groups took 1.2 GB.
	if caps := re.MaxCap(); caps > maxTriggerCaptures || n*(caps+1) > maxTriggerProgram {
		return errorf(CodeInvalid, "grammar", "trigger pattern %q has too many capture groups (%d) for its size", truncate(p, 80), caps)
	}
	return nil
}

// patternSize is the program size of a pattern checkPattern accepted.
func patternSize(p string) int {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0
	}
	return progSize(re)
}

// progSize estimates the instructions re compiles to, from above,
// saturating past maxTriggerPrograms: repetitions count their copies.
func progSize(re *syntax.Regexp) int {
	const limit = maxTriggerPrograms + 1
	sum := func(subs []*syntax.Regexp) int {
		n := 0
		for _, s := range subs {
			n = min(n+progSize(s), limit)
		}
		return n
	}
	switch re.Op {
	case syntax.OpLiteral:
		return min(len(re.Rune), limit)
	case syntax.OpConcat:
		return sum(re.Sub)
	case syntax.OpAlternate:
		return min(sum(re.Sub)+len(re.Sub), limit)
	case syntax.OpCapture:
		return min(progSize(re.Sub[0])+2, limit)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return min(progSize(re.Sub[0])+1, limit)
	case syntax.OpRepeat:
		copies := re.Max
		if copies < 0 {
			copies = re.Min + 1
		}
		return min((progSize(re.Sub[0])+1)*max(copies, 1), limit)
	}
	return 1
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
