// Package gbnf parses and checks GBNF grammars (the grammar format of
// llama.cpp) in pure Go, so that a malformed grammar is reported with its
// line and column before llama.cpp ever sees it.
//
// The parser follows llama.cpp's own grammar parser (version pinned by the
// module) byte for byte: it accepts exactly the text llama.cpp accepts,
// including its quirks (an empty string literal or character class is
// allowed and matches nothing, a rule may be defined twice and the last
// definition wins, names may start with a digit), and applies the same
// checks after parsing: every referenced rule is defined, the start rule
// exists, and no rule is left-recursive.
//
// Two inputs get no verdict from llama.cpp; the parser rejects them with
// their own [Kind] so callers can tell: a bounded repetition whose minimum is
// above its maximum ("x"{5,2}, on which llama.cpp does not terminate), and a
// NUL byte (llama.cpp reads the text as a C string and stops there).
package gbnf

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Kind classifies an [Error].
type Kind int

// The kinds of grammar error.
const (
	KindSyntax        Kind = iota // the text does not follow the GBNF syntax
	KindEmpty                     // the grammar defines no rule
	KindUndefined                 // a referenced rule is never defined
	KindNoRoot                    // the start rule does not exist
	KindLeftRecursion             // a rule can reach itself without consuming input
	KindLimit                     // a repetition exceeds llama.cpp's limits
	KindToken                     // a <token> reference is not one token of the vocabulary
	KindMinAboveMax               // x{m,n} with m > n: llama.cpp would not terminate
	KindNUL                       // a NUL byte: llama.cpp would stop reading there
	KindDepth                     // groups nested deeper than MaxNesting: llama.cpp's recursive parser would overflow its stack
	KindUnmatchable               // a literal or class no generated text can match (U+0000, code points above U+10FFFF, a reversed range)
	KindTokenRange                // a <[id]> token id outside the vocabulary
)

// MaxNesting bounds how deeply parenthesized groups may nest. llama.cpp
// parses groups by recursion on the C stack and overflows an 8 MB stack
// (killing the process) somewhere between 10,000 and 20,000 levels; 1,000
// keeps a margin of ten for threads with smaller stacks and for the grammar
// engine, which recurses through nested groups too. Real grammars nest a
// handful of levels.
const MaxNesting = 1000

var kindNames = [...]string{"syntax", "empty", "undefined", "no root", "left recursion", "limit", "token", "min above max", "NUL byte", "depth", "unmatchable", "token range"}

// String returns a short name of the kind.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is a grammar error with its 1-based line and column in the source.
// Columns count characters (UTF-8 sequences), not bytes.
type Error struct {
	Line, Col int
	Kind      Kind
	Msg       string
}

// Error formats the error as "gbnf: line L, col C: message".
func (e *Error) Error() string {
	return fmt.Sprintf("gbnf: line %d, col %d: %s", e.Line, e.Col, e.Msg)
}

// Grammar is a parsed and checked grammar.
type Grammar struct {
	// Rules are the named rules in the order of their first definition.
	Rules []Rule
	// Root is the start rule's name.
	Root string
	// Generated counts the helper rules that groups and repetitions add
	// (llama.cpp's rule count is len(Rules)+Generated).
	Generated int
	// MaxTokenID is the largest token id the grammar names as <[id]> or
	// !<[id]>, as written (not the low 32 bits llama.cpp keeps: an id is
	// checked against a vocabulary as written, see Options.VocabSize), -1
	// when it names none.
	MaxTokenID int64
	// NamedTokens reports whether the grammar has token references by
	// name (<name>, !<name>): without Options.Token their ids are 0, and
	// the grammar must be parsed again with the vocabulary before use.
	NamedTokens bool

	rules [][]elem  // llama.cpp's form, by rule id
	alts  [][]int32 // by rule id: where each alternative starts
	start uint32
	first *firstStep // the engine's first stacks and their cost, made once
}

// Rule is one named rule of a grammar.
type Rule struct {
	Name string
	// Line is the 1-based line of the definition in force (the last one
	// when a name is defined twice).
	Line int
}

// Rule returns the named rule.
func (g *Grammar) Rule(name string) (Rule, bool) {
	for _, r := range g.Rules {
		if r.Name == name {
			return r, true
		}
	}
	return Rule{}, false
}

// Options tunes [ParseWith].
type Options struct {
	// Root is the start rule's name; "" means "root".
	Root string
	// Token returns the token that text (such as "<|im_end|>", brackets
	// included) is in the vocabulary the grammar will be used with, and
	// whether it is exactly one token (llama.cpp tokenizes it, special
	// text parsed). When nil, any <name> token reference is accepted, with
	// id 0 until the grammar is parsed again with a vocabulary
	// (Grammar.NamedTokens says whether it has any): llama.cpp checks it
	// against the model's vocabulary, which the parser does not have.
	Token func(text string) (id uint32, ok bool)
	// VocabSize, when positive, is the size of the vocabulary the grammar
	// will be used with: a token id <[n]> or !<[n]> with n >= VocabSize is
	// an error of Kind KindTokenRange. When 0, ids are not checked (and,
	// as llama.cpp does, only their low 32 bits count).
	VocabSize int
}

// Parse parses and checks a grammar; root is the start rule's name ("" means
// "root"). Token references by name (<name>) are not checked; use
// [ParseWith] to check them against a vocabulary.
func Parse(src, root string) (*Grammar, error) {
	return ParseWith(src, Options{Root: root})
}

// ParseWith is [Parse] with options.
func ParseWith(src string, opts Options) (g *Grammar, err error) {
	return ParseContext(context.Background(), src, opts)
}

// ParseContext is [ParseWith] that stops early, returning ctx's error
// (context.Canceled or context.DeadlineExceeded, unwrapped), when ctx ends.
// The parse takes time linear in the size of src.
func ParseContext(ctx context.Context, src string, opts Options) (g *Grammar, err error) {
	if opts.Root == "" {
		opts.Root = "root"
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &parser{src: src, tok: opts.Token, vocab: opts.VocabSize, ctx: ctx, maxTok: -1}
	// Size the tables once for the rules the text defines.
	nRules := strings.Count(src, "::=")
	p.symbols = make(map[string]uint32, nRules)
	p.defined = make(map[string]bool, nRules)
	p.named = make([]string, 0, nRules)
	p.rules = make([][]elem, 0, nRules)
	for i := 0; i < len(src); i++ {
		if src[i] == 0 {
			return nil, p.errAt(i, KindNUL, "NUL byte in grammar")
		}
	}
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case *Error:
				g, err = nil, e
			case ctxDone:
				g, err = nil, e.err
			default:
				panic(r)
			}
		}
	}()
	p.parse()
	p.check(opts.Root)
	g = &Grammar{Root: opts.Root, Generated: len(p.rules) - len(p.named), MaxTokenID: p.maxTok, NamedTokens: p.namedTok, Rules: make([]Rule, 0, len(p.named)),
		rules: p.rules, alts: altStarts(p.rules), start: p.symbols[opts.Root], first: new(firstStep)}
	starts := lineStarts(src)
	for _, name := range p.named {
		off := p.origin.at(p.symbols[name])
		line := sort.Search(len(starts), func(i int) bool { return starts[i] > off })
		g.Rules = append(g.Rules, Rule{Name: name, Line: line})
	}
	return g, nil
}

// ctxDone carries a context's error out of the parse.
type ctxDone struct{ err error }

// lineStarts returns the offsets at which lines start (0 first), with the
// line breaks lineCol counts: \n, \r, and \r\n as one.
func lineStarts(src string) []int {
	starts := []int{0}
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '\n':
			starts = append(starts, i+1)
		case '\r':
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
			starts = append(starts, i+1)
		}
	}
	return starts
}
