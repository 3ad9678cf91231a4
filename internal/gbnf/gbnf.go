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
	"fmt"
	"strconv"
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
)

var kindNames = [...]string{"syntax", "empty", "undefined", "no root", "left recursion", "limit", "token", "min above max", "NUL byte"}

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
	// Token reports whether text (such as "<|im_end|>", brackets included)
	// is exactly one token of the vocabulary the grammar will be used with.
	// When nil, any <name> token reference is accepted: llama.cpp checks it
	// against the model's vocabulary, which the parser does not have.
	Token func(text string) bool
}

// Parse parses and checks a grammar; root is the start rule's name ("" means
// "root"). Token references by name (<name>) are not checked; use
// [ParseWith] to check them against a vocabulary.
func Parse(src, root string) (*Grammar, error) {
	return ParseWith(src, Options{Root: root})
}

// ParseWith is [Parse] with options.
func ParseWith(src string, opts Options) (g *Grammar, err error) {
	if opts.Root == "" {
		opts.Root = "root"
	}
	p := &parser{src: src, tok: opts.Token, symbols: map[string]uint32{}}
	for i := 0; i < len(src); i++ {
		if src[i] == 0 {
			return nil, p.errAt(i, KindNUL, "NUL byte in grammar")
		}
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			g, err = nil, e
		}
	}()
	p.parse()
	p.check(opts.Root)
	g = &Grammar{Root: opts.Root, Generated: len(p.rules) - len(p.named)}
	for _, name := range p.named {
		id := p.symbols[name]
		g.Rules = append(g.Rules, Rule{Name: name, Line: p.line(p.origin[id])})
	}
	return g, nil
}
