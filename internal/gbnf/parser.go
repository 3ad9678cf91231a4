package gbnf

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// maxRepetition is llama.cpp's bound on repetition counts and on the number
// of rules a repetition may copy.
const maxRepetition = 2000

// MaxExpansion bounds the elements repetitions add to a grammar, in all:
// "x"{m} is m copies of its item, and x{0,m} m rules each holding one, so
// a one-line rule with a long literal repeated a thousand times would make
// millions of elements, each of which llama.cpp's parse and the checks
// here keep (a kilobyte of grammar took 370 MB). The bound is an error of
// Kind KindLimit. JSON Schemas stay far below it: a string of maxLength
// 1,999 adds about 8,000 elements.
const MaxExpansion = 1 << 19

// noMax marks an unbounded repetition.
const noMax = math.MaxUint64

type elemKind uint8

const (
	eEnd elemKind = iota
	eAlt
	eRef
	eChar
	eCharNot
	eRangeUpper
	eCharAlt
	eAny
	eToken
	eTokenNot
)

// elem is one element of a rule body, in the flat form llama.cpp builds:
// alternatives separated by eAlt and closed by eEnd. The parser builds the
// same form so that its limits and checks count exactly what llama.cpp
// counts.
type elem struct {
	kind elemKind
	val  uint32
}

// offsets maps dense rule ids to source offsets (a slice: the parser looks
// them up once per rule and reference, where a map cost most of the time).
type offsets []int

func (o offsets) get(id uint32) (int, bool) {
	if int(id) < len(o) && o[id] >= 0 {
		return o[id], true
	}
	return 0, false
}

// at returns the offset of id, 0 when unset.
func (o offsets) at(id uint32) int {
	off, _ := o.get(id)
	return off
}

func (o *offsets) set(id uint32, off int) {
	for len(*o) <= int(id) {
		*o = append(*o, -1)
	}
	(*o)[id] = off
}

type parser struct {
	src string
	tok func(string) (uint32, bool)
	// namedTok: a token reference by name was read.
	namedTok bool
	vocab    int             // vocabulary size for <[id]> checks; 0: unknown
	ctx      context.Context // checked every few thousand steps
	steps    int
	depth    int               // nesting of groups at the current position
	spans    []span            // scratch for character classes
	maxTok   int64             // largest <[id]> token id, -1 if none
	expanded uint64            // elements repetitions added (MaxExpansion)
	symbols  map[string]uint32 // name (given or generated) -> rule id
	rules    [][]elem          // by id; nil until defined
	origin   offsets           // rule id -> offset of its definition
	refAt    offsets           // rule id -> offset of its first reference
	named    []string          // defined names, first definition order
	defined  map[string]bool
}

func (p *parser) line(off int) int {
	l, _ := p.lineCol(off)
	return l
}

func (p *parser) lineCol(off int) (line, col int) {
	if off > len(p.src) {
		off = len(p.src)
	}
	line, col = 1, 1
	for i := 0; i < off; {
		switch c := p.src[i]; {
		case c == '\n':
			line, col = line+1, 1
			i++
		case c == '\r':
			line, col = line+1, 1
			i++
			if i < off && p.src[i] == '\n' {
				i++
			}
		default:
			_, n := utf8.DecodeRuneInString(p.src[i:])
			col++
			i += n
		}
	}
	return line, col
}

func (p *parser) errAt(off int, kind Kind, format string, args ...any) *Error {
	line, col := p.lineCol(off)
	return &Error{Line: line, Col: col, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// fail aborts the parse; ParseWith recovers the *Error.
func (p *parser) fail(off int, kind Kind, format string, args ...any) {
	panic(p.errAt(off, kind, format, args...))
}

// at returns the byte at i, or 0 past the end (llama.cpp reads a C string).
func (p *parser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

// step counts parsing work and checks the context now and then.
func (p *parser) step() {
	p.steps++
	if p.steps&4095 == 0 && p.ctx != nil {
		if err := p.ctx.Err(); err != nil {
			panic(ctxDone{err})
		}
	}
}

// maxCodePoint is the last Unicode code point.
const maxCodePoint = 0x10FFFF

// checkChar refuses a character of a string literal that no generated text
// can hold: U+0000 (llama.cpp's grammar engine reads token text as C
// strings, so it never sees one) and values above U+10FFFF (escapes such as
// \U99999999, or raw bytes that do not decode).
func (p *parser) checkChar(at int, v uint32) {
	switch {
	case v == 0:
		p.fail(at, KindUnmatchable, "U+0000 can never be generated (the grammar could not match)")
	case v > maxCodePoint:
		p.fail(at, KindUnmatchable, "%#x is not a Unicode code point (the grammar could not match)", v)
	}
}

// span is a range of code points in a character class.
type span struct{ lo, hi uint32 }

// checkClass refuses a character class that can only match characters no
// generated text holds: a positive class with no member in U+0001..U+10FFFF,
// or a negated class that excludes all of them.
func (p *parser) checkClass(at int, negated bool, spans []span) {
	if len(spans) == 0 {
		return // [] and [^]: llama.cpp's quirks, kept
	}
	if !negated {
		for _, s := range spans {
			if s.hi >= 1 && s.lo <= maxCodePoint {
				return
			}
		}
		p.fail(at, KindUnmatchable, "character class matches no character that can be generated (only U+0000 or values above U+10FFFF)")
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	next := uint32(1) // first code point not yet excluded
	for _, s := range spans {
		if s.lo > next {
			return // next is a gap: the class matches it
		}
		if s.hi >= next {
			if s.hi >= maxCodePoint {
				p.fail(at, KindUnmatchable, "negated character class excludes every Unicode character (it could match only invalid code points)")
			}
			next = s.hi + 1
		}
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || isDigit(c)
}

// describe names what is at i for error messages.
func (p *parser) describe(i int) string {
	if i >= len(p.src) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[i:])
	if r == utf8.RuneError {
		return fmt.Sprintf("byte %#02x", p.src[i])
	}
	return strconv.QuoteRune(r)
}

// space skips blanks and comments, and line breaks when newlines is set.
func (p *parser) space(i int, newlines bool) int {
	for {
		switch c := p.at(i); {
		case c == ' ' || c == '\t':
			i++
		case c == '#':
			for i < len(p.src) && p.src[i] != '\r' && p.src[i] != '\n' {
				i++
			}
		case newlines && (c == '\r' || c == '\n'):
			i++
		default:
			return i
		}
	}
}

func (p *parser) name(i int) int {
	j := i
	for isNameChar(p.at(j)) {
		j++
	}
	if j == i {
		p.fail(i, KindSyntax, "expected a rule name, found %s", p.describe(i))
	}
	return j
}

func (p *parser) digits(i int) int {
	j := i
	for isDigit(p.at(j)) {
		j++
	}
	if j == i {
		p.fail(i, KindSyntax, "expected an integer, found %s", p.describe(i))
	}
	return j
}

func (p *parser) hex(i, n int) (uint32, int) {
	var v uint32
	j := i
	for ; j < i+n && j < len(p.src); j++ {
		c := p.src[j]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			p.fail(j, KindSyntax, "expected %d hex digits, found %s", n, p.describe(j))
		}
		v = v<<4 | uint32(d)
	}
	if j != i+n {
		p.fail(j, KindSyntax, "expected %d hex digits, found %s", n, p.describe(j))
	}
	return v, j
}

// char reads one character of a literal or class: an escape, or a UTF-8
// sequence decoded the lenient way llama.cpp does (the lead byte alone
// decides the length, so a truncated sequence swallows what follows).
func (p *parser) char(i int) (uint32, int) {
	c := p.at(i)
	if c == '\\' {
		switch e := p.at(i + 1); e {
		case 'x':
			return p.hex(i+2, 2)
		case 'u':
			return p.hex(i+2, 4)
		case 'U':
			return p.hex(i+2, 8)
		case 't':
			return '\t', i + 2
		case 'r':
			return '\r', i + 2
		case 'n':
			return '\n', i + 2
		case '\\', '"', '[', ']', '-':
			return uint32(e), i + 2
		default:
			p.fail(i, KindSyntax, "unknown escape \\%s", p.describeEscape(i+1))
		}
	}
	if i >= len(p.src) {
		p.fail(i, KindSyntax, "unexpected end of input")
	}
	n := [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[c>>4]
	v := uint32(c) & (1<<(8-n) - 1)
	j := i + 1
	for ; j < i+n && j < len(p.src); j++ {
		v = v<<6 | uint32(p.src[j]&0x3f)
	}
	return v, j
}

func (p *parser) describeEscape(i int) string {
	if i >= len(p.src) {
		return " at end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[i:])
	if r == utf8.RuneError {
		return fmt.Sprintf("x%02x", p.src[i])
	}
	return string(r)
}

// symbol returns the id of a name, giving it the next id when new.
func (p *parser) symbol(name string) uint32 {
	if id, ok := p.symbols[name]; ok {
		return id
	}
	id := uint32(len(p.symbols))
	p.symbols[name] = id
	return id
}

// newSymbol makes an id for a helper rule of base, named base_N where N is
// the id; like llama.cpp, it may overwrite an existing name of that form.
func (p *parser) newSymbol(base string, off int) uint32 {
	id := uint32(len(p.symbols))
	p.symbols[base+"_"+strconv.Itoa(int(id))] = id
	p.origin.set(id, off)
	return id
}

func (p *parser) addRule(id uint32, body []elem) {
	for uint32(len(p.rules)) <= id {
		p.rules = append(p.rules, nil)
	}
	p.rules[id] = body
}

func (p *parser) parse() {
	i := p.space(0, true)
	for i < len(p.src) {
		p.step()
		i = p.rule(i)
	}
}

func (p *parser) rule(start int) int {
	end := p.name(start)
	i := p.space(end, false)
	name := p.src[start:end]
	id := p.symbol(name)
	if p.at(i) != ':' || p.at(i+1) != ':' || p.at(i+2) != '=' {
		p.fail(i, KindSyntax, "expected ::= after rule name %q, found %s", name, p.describe(i))
	}
	if !p.defined[name] {
		p.defined[name] = true
		p.named = append(p.named, name)
	}
	p.origin.set(id, start)
	i = p.space(i+3, true)
	i = p.alternates(i, name, id, false)
	switch p.at(i) {
	case '\r':
		i++
		if p.at(i) == '\n' {
			i++
		}
	case '\n':
		i++
	case 0:
		if i < len(p.src) {
			panic("unreachable: NUL rejected before parsing")
		}
	default:
		p.fail(i, KindSyntax, "expected newline or end of input after rule %q, found %s", name, p.describe(i))
	}
	return p.space(i, true)
}

func (p *parser) alternates(i int, name string, id uint32, nested bool) int {
	var body []elem
	i = p.sequence(i, name, &body, nested)
	for p.at(i) == '|' {
		body = append(body, elem{kind: eAlt})
		i = p.space(i+1, true)
		i = p.sequence(i, name, &body, nested)
	}
	body = append(body, elem{kind: eEnd})
	p.addRule(id, body)
	return i
}

// sequence parses the items of one alternative into *body.
func (p *parser) sequence(i int, name string, body *[]elem, nested bool) int {
	last := len(*body) // start of the last item, for repetitions
	copies := uint64(1)

	repeat := func(at int, min, max uint64) {
		if last == len(*body) {
			p.fail(at, KindSyntax, "%s has no item before it to repeat", p.describe(at))
		}
		unbounded := max == noMax
		item := append([]elem(nil), (*body)[last:]...)
		total := uint64(1)
		if !unbounded && max > 0 {
			total = max
		} else if min > 0 {
			total = min
		}
		if copies*total >= maxRepetition {
			p.fail(at, KindLimit, "repetition makes too many rules (%d items × %d ≥ %d)", copies, total, maxRepetition)
		}
		if !unbounded && min > max {
			p.fail(at, KindMinAboveMax, "repetition minimum %d is above its maximum %d", min, max)
		}
		// Counts are below maxRepetition here, an item below the text's
		// length (or the expansion bound): no overflow.
		n := uint64(len(item))
		add := n + 3 // a rule for x* or x+
		if !unbounded {
			add = (max-min)*(n+3) + 1
		}
		if min > 1 {
			add += (min - 1) * n
		}
		if p.expanded += add; p.expanded > MaxExpansion {
			p.fail(at, KindLimit, "repetitions make the grammar too large (more than %d elements)", MaxExpansion)
		}
		if min == 0 {
			*body = (*body)[:last]
		} else {
			for k := uint64(1); k < min; k++ {
				*body = append(*body, item...)
			}
		}
		optional := uint64(1)
		if !unbounded {
			optional = max - min
		}
		var prev uint32
		for k := uint64(0); k < optional; k++ {
			id := p.newSymbol(name, at)
			rec := append([]elem(nil), item...)
			switch {
			case unbounded:
				rec = append(rec, elem{eRef, id})
			case k > 0:
				rec = append(rec, elem{eRef, prev})
			}
			rec = append(rec, elem{kind: eAlt}, elem{kind: eEnd})
			p.addRule(id, rec)
			prev = id
		}
		if optional > 0 {
			*body = append(*body, elem{eRef, prev})
		}
		copies *= total
	}

	for i < len(p.src) {
		p.step()
		at := i
		switch c := p.src[i]; {
		case c == '"':
			i++
			last, copies = len(*body), 1
			for p.at(i) != '"' {
				if i >= len(p.src) {
					p.fail(at, KindSyntax, "string literal is not closed")
				}
				var v uint32
				ci := i
				v, i = p.char(i)
				p.checkChar(ci, v)
				*body = append(*body, elem{eChar, v})
			}
			i = p.space(i+1, nested)
		case c == '[':
			i++
			kind := eChar
			if p.at(i) == '^' {
				i++
				kind = eCharNot
			}
			last, copies = len(*body), 1
			spans := p.spans[:0]
			for p.at(i) != ']' {
				if i >= len(p.src) {
					p.fail(at, KindSyntax, "character class is not closed")
				}
				p.step()
				var v uint32
				ci := i
				v, i = p.char(i)
				k := kind
				if last < len(*body) {
					k = eCharAlt
				}
				*body = append(*body, elem{k, v})
				sp := span{v, v}
				if p.at(i) == '-' && p.at(i+1) != ']' {
					if i+1 >= len(p.src) {
						p.fail(at, KindSyntax, "character class is not closed")
					}
					v, i = p.char(i + 1)
					*body = append(*body, elem{eRangeUpper, v})
					sp.hi = v
					if sp.hi < sp.lo {
						p.fail(ci, KindUnmatchable, "range %s is empty (its end is below its start)", p.src[ci:i])
					}
				}
				spans = append(spans, sp)
			}
			p.checkClass(at, kind == eCharNot, spans)
			p.spans = spans
			i = p.space(i+1, nested)
		case c == '<' || c == '!':
			kind := eToken
			if c == '!' {
				kind = eTokenNot
				i++
			}
			var v uint32
			v, i = p.token(i)
			last, copies = len(*body), 1
			*body = append(*body, elem{kind, v})
			i = p.space(i, nested)
		case isNameChar(c):
			end := p.name(i)
			id := p.symbol(p.src[i:end])
			if _, ok := p.refAt.get(id); !ok {
				p.refAt.set(id, i)
			}
			i = p.space(end, nested)
			last, copies = len(*body), 1
			*body = append(*body, elem{eRef, id})
		case c == '(':
			if p.depth >= MaxNesting {
				p.fail(at, KindDepth, "groups nested more than %d deep", MaxNesting)
			}
			i = p.space(i+1, true)
			before := len(p.symbols)
			id := p.newSymbol(name, at)
			p.depth++
			i = p.alternates(i, name, id, true)
			p.depth--
			copies = max(1, uint64(uint32(len(p.symbols)-before)))
			last = len(*body)
			*body = append(*body, elem{eRef, id})
			if p.at(i) != ')' {
				p.fail(i, KindSyntax, "expected ')' to close the group opened at line %d, col %d, found %s", p.line(at), p.colOf(at), p.describe(i))
			}
			i = p.space(i+1, nested)
		case c == '.':
			last, copies = len(*body), 1
			*body = append(*body, elem{kind: eAny})
			i = p.space(i+1, nested)
		case c == '*':
			i = p.space(i+1, nested)
			repeat(at, 0, noMax)
		case c == '+':
			i = p.space(i+1, nested)
			repeat(at, 1, noMax)
		case c == '?':
			i = p.space(i+1, nested)
			repeat(at, 0, 1)
		case c == '{':
			i = p.space(i+1, nested)
			if !isDigit(p.at(i)) {
				p.fail(i, KindSyntax, "expected an integer after '{', found %s", p.describe(i))
			}
			var min, max uint64
			min, i = p.count(i)
			i = p.space(i, nested)
			max = noMax
			switch p.at(i) {
			case '}':
				max = min
				i = p.space(i+1, nested)
			case ',':
				i = p.space(i+1, nested)
				if isDigit(p.at(i)) {
					max, i = p.count(i)
					i = p.space(i, nested)
				}
				if p.at(i) != '}' {
					p.fail(i, KindSyntax, "expected '}', found %s", p.describe(i))
				}
				i = p.space(i+1, nested)
			default:
				p.fail(i, KindSyntax, "expected ',' or '}', found %s", p.describe(i))
			}
			if min > maxRepetition {
				p.fail(at, KindLimit, "repetition count %d is above the limit of %d", min, maxRepetition)
			}
			if max != noMax && max > maxRepetition {
				max = noMax // llama.cpp treats a large maximum as none
			}
			repeat(at, min, max)
		default:
			return i
		}
	}
	return i
}

func (p *parser) colOf(off int) int {
	_, c := p.lineCol(off)
	return c
}

// count reads a repetition count; like llama.cpp it fails only when the
// number does not fit in 64 bits.
func (p *parser) count(i int) (uint64, int) {
	j := p.digits(i)
	n, err := strconv.ParseUint(p.src[i:j], 10, 64)
	if err != nil {
		p.fail(i, KindLimit, "repetition count %s is out of range", p.src[i:j])
	}
	return n, j
}

// token reads <[id]> or <text> at i (after any '!').
func (p *parser) token(i int) (uint32, int) {
	start := i
	if p.at(i) != '<' {
		p.fail(i, KindSyntax, "expected '<' after '!', found %s", p.describe(i))
	}
	i++
	if p.at(i) == '[' {
		i++
		j := p.digits(i)
		n, err := strconv.ParseUint(p.src[i:j], 10, 64)
		if err != nil {
			p.fail(i, KindSyntax, "token id %s is out of range", p.src[i:j])
		}
		if p.at(j) != ']' {
			p.fail(j, KindSyntax, "expected ']' in token id, found %s", p.describe(j))
		}
		if p.at(j+1) != '>' {
			p.fail(j+1, KindSyntax, "expected '>' after token id, found %s", p.describe(j+1))
		}
		if id := int64(min(n, math.MaxInt64)); id > p.maxTok {
			p.maxTok = id
		}
		if p.vocab > 0 && n >= uint64(p.vocab) {
			p.fail(start, KindTokenRange, "token id %s is out of the vocabulary's range [0, %d)", p.src[i:j], p.vocab)
		}
		return uint32(n), j + 2 // llama.cpp keeps the low 32 bits
	}
	for i < len(p.src) && p.src[i] != '>' {
		i++
	}
	if i >= len(p.src) {
		p.fail(start, KindSyntax, "token reference is not closed with '>'")
	}
	i++
	p.namedTok = true
	if p.tok == nil {
		return 0, i
	}
	id, ok := p.tok(p.src[start:i])
	if !ok {
		p.fail(start, KindToken, "%s is not a single token of the vocabulary", p.src[start:i])
	}
	return id, i
}
