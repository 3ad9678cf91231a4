package jsonschema

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A small parser for the GBNF subset this package emits (literals, character
// classes, rule references, groups, alternation and the * + ? {m,n}
// quantifiers). It is used to check generated grammars for left recursion,
// which llama.cpp rejects, and by the tests to match strings.

type gKind int

const (
	gLit gKind = iota
	gClass
	gRef
	gGroup
	gAny
)

type gItem struct {
	kind     gKind
	lit      []rune
	ranges   []rune // pairs lo, hi
	neg      bool
	ref      string
	alts     [][]*gItem
	min, max int // max -1: unbounded
}

type gParser struct {
	s   string
	pos int
}

func parseGBNF(text string) (map[string][][]*gItem, error) {
	rules := map[string][][]*gItem{}
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		i := strings.Index(line, "::=")
		if i < 0 {
			return nil, fmt.Errorf("no ::= in line %q", line)
		}
		name := strings.TrimSpace(line[:i])
		if !isIdent(name) {
			return nil, fmt.Errorf("bad rule name %q", name)
		}
		if _, dup := rules[name]; dup {
			return nil, fmt.Errorf("rule %q defined twice", name)
		}
		alts, err := parseGBNFBody(line[i+3:])
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", name, err)
		}
		rules[name] = alts
	}
	for _, alts := range rules {
		if err := checkRefs(alts, rules); err != nil {
			return nil, err
		}
	}
	return rules, nil
}

func checkRefs(alts [][]*gItem, rules map[string][][]*gItem) error {
	for _, seq := range alts {
		for _, it := range seq {
			if it.kind == gRef {
				if _, ok := rules[it.ref]; !ok {
					return fmt.Errorf("undefined rule %q", it.ref)
				}
			}
			if it.kind == gGroup {
				if err := checkRefs(it.alts, rules); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func parseGBNFBody(body string) ([][]*gItem, error) {
	p := &gParser{s: body}
	alts, err := p.alternates()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("unexpected %q at %d", p.s[p.pos:], p.pos)
	}
	return alts, nil
}

func (p *gParser) space() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *gParser) alternates() ([][]*gItem, error) {
	var alts [][]*gItem
	for {
		seq, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == '|' {
			p.pos++
			continue
		}
		return alts, nil
	}
}

func (p *gParser) char() (rune, error) {
	if p.pos >= len(p.s) {
		return 0, errors.New("unexpected end")
	}
	if p.s[p.pos] == '\\' {
		if p.pos+1 >= len(p.s) {
			return 0, errors.New("unexpected end after backslash")
		}
		c := p.s[p.pos+1]
		p.pos += 2
		n := 0
		switch c {
		case 'x':
			n = 2
		case 'u':
			n = 4
		case 'U':
			n = 8
		case 't':
			return '\t', nil
		case 'r':
			return '\r', nil
		case 'n':
			return '\n', nil
		case '\\', '"', '[', ']', '-':
			return rune(c), nil
		default:
			return 0, fmt.Errorf("unknown escape \\%c", c)
		}
		if p.pos+n > len(p.s) || !isHex(p.s[p.pos:p.pos+n]) {
			return 0, errors.New("bad hex escape")
		}
		v, _ := strconv.ParseUint(p.s[p.pos:p.pos+n], 16, 32)
		p.pos += n
		return rune(v), nil
	}
	r, size := utf8.DecodeRuneInString(p.s[p.pos:])
	p.pos += size
	return r, nil
}

func (p *gParser) sequence() ([]*gItem, error) {
	var seq []*gItem
	for {
		p.space()
		if p.pos >= len(p.s) {
			return seq, nil
		}
		c := p.s[p.pos]
		var it *gItem
		switch {
		case c == '"':
			p.pos++
			it = &gItem{kind: gLit}
			for {
				if p.pos >= len(p.s) {
					return nil, errors.New("unterminated literal")
				}
				if p.s[p.pos] == '"' {
					p.pos++
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				it.lit = append(it.lit, r)
			}
		case c == '[':
			p.pos++
			it = &gItem{kind: gClass}
			if p.pos < len(p.s) && p.s[p.pos] == '^' {
				it.neg = true
				p.pos++
			}
			for {
				if p.pos >= len(p.s) {
					return nil, errors.New("unterminated class")
				}
				if p.s[p.pos] == ']' {
					p.pos++
					break
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.pos+1 < len(p.s) && p.s[p.pos] == '-' && p.s[p.pos+1] != ']' {
					p.pos++
					if hi, err = p.char(); err != nil {
						return nil, err
					}
				}
				it.ranges = append(it.ranges, lo, hi)
			}
		case c == '(':
			p.pos++
			alts, err := p.alternates()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.pos >= len(p.s) || p.s[p.pos] != ')' {
				return nil, errors.New("expected )")
			}
			p.pos++
			it = &gItem{kind: gGroup, alts: alts}
		case c == '.':
			p.pos++
			it = &gItem{kind: gAny}
		case c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			start := p.pos
			for p.pos < len(p.s) && isIdent(p.s[p.pos:p.pos+1]) {
				p.pos++
			}
			it = &gItem{kind: gRef, ref: p.s[start:p.pos]}
		case c == '*' || c == '+' || c == '?' || c == '{':
			if len(seq) == 0 {
				return nil, errors.New("quantifier without operand")
			}
			last := seq[len(seq)-1]
			min, max := 0, -1
			switch c {
			case '+':
				min = 1
			case '?':
				max = 1
			case '{':
				end := strings.IndexByte(p.s[p.pos:], '}')
				if end < 0 {
					return nil, errors.New("unterminated {")
				}
				inner := strings.ReplaceAll(p.s[p.pos+1:p.pos+end], " ", "")
				p.pos += end
				lo, hi, comma := strings.Cut(inner, ",")
				var err error
				if min, err = strconv.Atoi(lo); err != nil {
					return nil, fmt.Errorf("bad repetition {%s}", inner)
				}
				max = min
				if comma {
					max = -1
					if hi != "" {
						if max, err = strconv.Atoi(hi); err != nil {
							return nil, fmt.Errorf("bad repetition {%s}", inner)
						}
					}
				}
			}
			p.pos++
			// a quantified item becomes a group so that quantifiers nest
			seq[len(seq)-1] = &gItem{kind: gGroup, alts: [][]*gItem{{last}}, min: min, max: max}
			continue
		default:
			return seq, nil
		}
		it.min, it.max = 1, 1
		seq = append(seq, it)
	}
}

// leftRecursive returns a rule that can reach itself without consuming input
// ("" if none). Rules it cannot parse are ignored.
func (b *Builder) leftRecursive() string {
	rules := map[string][][]*gItem{}
	for name, body := range b.rules {
		if alts, err := parseGBNFBody(body); err == nil {
			rules[name] = alts
		}
	}
	null := map[string]bool{}
	var itemNullable func(it *gItem) bool
	seqNullable := func(seq []*gItem) bool {
		for _, it := range seq {
			if !itemNullable(it) {
				return false
			}
		}
		return true
	}
	itemNullable = func(it *gItem) bool {
		if it.min == 0 {
			return true
		}
		switch it.kind {
		case gLit:
			return len(it.lit) == 0
		case gRef:
			return null[it.ref]
		case gGroup:
			for _, s := range it.alts {
				if seqNullable(s) {
					return true
				}
			}
		}
		return false
	}
	// Nullable rules, by a worklist: a rule is checked again only when a
	// rule it refers to has become nullable, so chains of optional rules
	// take linear time (a pass over every rule until nothing changes took
	// quadratic time on them).
	users := map[string][]string{}
	var refs func(from string, alts [][]*gItem)
	refs = func(from string, alts [][]*gItem) {
		for _, seq := range alts {
			for _, it := range seq {
				switch it.kind {
				case gRef:
					users[it.ref] = append(users[it.ref], from)
				case gGroup:
					refs(from, it.alts)
				}
			}
		}
	}
	work := make([]string, 0, len(rules))
	for name, alts := range rules {
		refs(name, alts)
		work = append(work, name)
	}
	for len(work) > 0 {
		name := work[len(work)-1]
		work = work[:len(work)-1]
		if null[name] {
			continue
		}
		for _, s := range rules[name] {
			if seqNullable(s) {
				null[name] = true
				for _, u := range users[name] {
					if !null[u] {
						work = append(work, u)
					}
				}
				break
			}
		}
	}
	edges := map[string][]string{}
	var addEdges func(from string, alts [][]*gItem)
	addEdges = func(from string, alts [][]*gItem) {
		for _, seq := range alts {
			for _, it := range seq {
				switch it.kind {
				case gRef:
					edges[from] = append(edges[from], it.ref)
				case gGroup:
					addEdges(from, it.alts)
				}
				if !itemNullable(it) {
					break
				}
			}
		}
	}
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		addEdges(n, rules[n])
	}
	state := map[string]int{} // 1 visiting, 2 done
	var found string
	var dfs func(n string) bool
	dfs = func(n string) bool {
		state[n] = 1
		for _, m := range edges[n] {
			if state[m] == 1 {
				found = m
				return true
			}
			if state[m] == 0 && dfs(m) {
				return true
			}
		}
		state[n] = 2
		return false
	}
	for _, n := range names {
		if state[n] == 0 && dfs(n) {
			return found
		}
	}
	return ""
}
