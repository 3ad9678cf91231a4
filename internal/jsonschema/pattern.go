package jsonschema

import (
	"fmt"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode"
)

// pattern translates a JSON Schema "pattern" (an ECMA-262 regular expression
// matched against the decoded string) into an expression over the JSON-encoded
// string, quotes included. Unanchored sides match any characters, as in JSON
// Schema.
func (c *converter) pattern(p, name, ptr string) string {
	re, err := syntax.Parse(ecmaToGo(p), syntax.Perl)
	if err != nil {
		c.fail(ptr, "unsupported or invalid pattern %q: %v", p, err)
	}
	pc := &patternConv{c: c, name: name, ptr: ptr, pattern: p, subRules: map[string]string{}}
	return `"\"" (` + pc.top(re) + `) "\""`
}

// ecmaToGo rewrites ECMA-only escapes (\uXXXX, \u{X}, \/) to Go syntax.
func ecmaToGo(p string) string {
	var sb strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '\\' || i+1 >= len(p) {
			sb.WriteByte(p[i])
			continue
		}
		n := p[i+1]
		if n == 'u' && i+5 < len(p)+0 && i+6 <= len(p) && isHex(p[i+2:i+6]) {
			sb.WriteString(`\x{` + p[i+2:i+6] + `}`)
			i += 5
			continue
		}
		if n == 'u' && i+2 < len(p) && p[i+2] == '{' {
			if j := strings.IndexByte(p[i+2:], '}'); j > 0 && isHex(p[i+3:i+2+j]) {
				sb.WriteString(`\x{` + p[i+3:i+2+j] + `}`)
				i += 2 + j
				continue
			}
		}
		sb.WriteByte('\\')
		sb.WriteByte(n)
		i++
	}
	return sb.String()
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F') {
			return false
		}
	}
	return true
}

type patternConv struct {
	c        *converter
	name     string
	ptr      string
	pattern  string
	subRules map[string]string
}

func (pc *patternConv) fail(format string, args ...any) {
	pc.c.fail(pc.ptr, "pattern %q: %s", pc.pattern, fmt.Sprintf(format, args...))
}

func isBegin(re *syntax.Regexp) bool {
	return re.Op == syntax.OpBeginText || re.Op == syntax.OpBeginLine
}

func isEnd(re *syntax.Regexp) bool {
	return re.Op == syntax.OpEndText || re.Op == syntax.OpEndLine
}

// top handles the anchors at the start and end of the pattern (per branch of
// a top-level alternation).
func (pc *patternConv) top(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpAlternate:
		alts := make([]string, len(re.Sub))
		for i, s := range re.Sub {
			alts[i] = pc.top(s)
		}
		return strings.Join(alts, " | ")
	case syntax.OpCapture:
		return pc.top(re.Sub[0])
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	anchoredStart, anchoredEnd := false, false
	for len(subs) > 0 && isBegin(subs[0]) {
		anchoredStart = true
		subs = subs[1:]
	}
	for len(subs) > 0 && isEnd(subs[len(subs)-1]) {
		anchoredEnd = true
		subs = subs[:len(subs)-1]
	}
	var parts []string
	anyStar := func() string { return pc.c.b.prim("char") + "*" }
	if !anchoredStart {
		parts = append(parts, anyStar())
	}
	for _, s := range subs {
		if t := pc.seq(s); t != "" {
			parts = append(parts, t)
		}
	}
	if !anchoredEnd && (anchoredStart || len(subs) > 0) {
		parts = append(parts, anyStar())
	}
	if len(parts) == 0 {
		return `""`
	}
	return strings.Join(parts, " ")
}

// seq returns an expression that can be placed in a sequence ("" for empty).
func (pc *patternConv) seq(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpConcat:
		var parts []string
		for _, s := range re.Sub {
			if t := pc.seq(s); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, " ")
	case syntax.OpAlternate:
		alts := make([]string, len(re.Sub))
		for i, s := range re.Sub {
			alts[i] = pc.seq(s)
			if alts[i] == "" {
				alts[i] = `""`
			}
		}
		return "(" + strings.Join(alts, " | ") + ")"
	case syntax.OpEmptyMatch:
		return ""
	case syntax.OpLiteral:
		return pc.literal(re)
	default:
		return pc.atom(re)
	}
}

// atom returns an expression that a quantifier can follow.
func (pc *patternConv) atom(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpNoMatch:
		pc.fail("it matches nothing")
	case syntax.OpEmptyMatch:
		return `""`
	case syntax.OpLiteral:
		l := pc.literal(re)
		if len(re.Rune) == 1 && re.Flags&syntax.FoldCase == 0 || strings.HasPrefix(l, "(") || l == "" {
			if l == "" {
				return `""`
			}
			return l
		}
		return "(" + l + ")"
	case syntax.OpCharClass:
		return pc.class(re.Rune)
	case syntax.OpAnyCharNotNL:
		return pc.c.b.prim("dot")
	case syntax.OpAnyChar:
		return pc.c.b.prim("char")
	case syntax.OpBeginLine, syntax.OpBeginText, syntax.OpEndLine, syntax.OpEndText:
		pc.fail("anchors are only supported at the start and end")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		pc.fail("word boundaries are not supported")
	case syntax.OpCapture:
		return pc.group(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		return pc.group(re)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		return pc.repeat(re)
	}
	pc.fail("unsupported construct")
	return ""
}

func (pc *patternConv) group(re *syntax.Regexp) string {
	if re.Op == syntax.OpAlternate {
		return pc.seq(re)
	}
	t := pc.seq(re)
	if t == "" {
		return `""`
	}
	return "(" + t + ")"
}

func (pc *patternConv) repeat(re *syntax.Regexp) string {
	sub := re.Sub[0]
	min, max := 0, -1
	switch re.Op {
	case syntax.OpPlus:
		min = 1
	case syntax.OpQuest:
		max = 1
	case syntax.OpRepeat:
		min, max = re.Min, re.Max
	}
	if nullable(sub) && max != 1 {
		// x* with x matching "" would be left-recursive for llama.cpp:
		// repeat the non-empty part instead, from 0 times.
		sub = nonEmpty(sub)
		min = 0
		if sub == nil {
			return `""`
		}
	}
	if max == 0 {
		return `""`
	}
	if min > maxRepeat {
		pc.fail("repetition count above %d is not supported", maxRepeat)
	}
	item := pc.atom(sub)
	if item == `""` {
		return `""`
	}
	if re.Op == syntax.OpRepeat && !(min <= 1 && (max == -1 || max == 1)) && !isIdent(item) && !isSimpleTerminal(item) {
		// name the repeated expression, as llama.cpp does
		id, ok := pc.subRules[item]
		if !ok {
			id = pc.c.b.addRule(pc.name+"-"+strconv.Itoa(len(pc.subRules)+1), item)
			pc.subRules[item] = id
		}
		item = id
	}
	hi := max
	if max == -1 {
		hi = int(^uint(0) >> 1)
	}
	return buildRepetition(item, min, hi, "")
}

func isSimpleTerminal(s string) bool {
	if strings.HasPrefix(s, `"`) && strings.HasSuffix(s, `"`) && !strings.Contains(s[1:len(s)-1], `" `) {
		return true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") && !strings.Contains(s, "] ") {
		return true
	}
	return false
}

// literal returns the JSON encoding of the literal runes as GBNF terminals.
func (pc *patternConv) literal(re *syntax.Regexp) string {
	if re.Flags&syntax.FoldCase == 0 {
		var sb strings.Builder
		for _, r := range re.Rune {
			jsonEscapeRune(&sb, r)
		}
		if sb.Len() == 0 {
			return ""
		}
		return Literal(sb.String())
	}
	var parts []string
	for _, r := range re.Rune {
		folds := []rune{r}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			folds = append(folds, f)
		}
		var ranges []rune
		for _, f := range folds {
			ranges = append(ranges, f, f)
		}
		parts = append(parts, pc.class(normalizeRanges(ranges)))
	}
	return strings.Join(parts, " ")
}

func normalizeRanges(r []rune) []rune {
	// sort pairs by start and merge
	type pr struct{ lo, hi rune }
	ps := make([]pr, 0, len(r)/2)
	for i := 0; i+1 < len(r); i += 2 {
		ps = append(ps, pr{r[i], r[i+1]})
	}
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].lo < ps[j-1].lo; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	var out []rune
	for _, p := range ps {
		n := len(out)
		if n > 0 && p.lo <= out[n-1]+1 {
			if p.hi > out[n-1] {
				out[n-1] = p.hi
			}
			continue
		}
		out = append(out, p.lo, p.hi)
	}
	return out
}

// class matches one JSON-encoded character whose decoded value is in ranges
// (sorted, non-overlapping pairs lo, hi).
func (pc *patternConv) class(ranges []rune) string {
	var raw []rune
	var specials []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		// split [lo,hi] around the characters that must be escaped
		cur := lo
		for cur <= hi {
			switch {
			case cur < 0x20 || cur == '"' || cur == '\\':
				specials = append(specials, cur)
				cur++
			default:
				end := hi
				if cur < '"' && end >= '"' {
					end = '"' - 1
				} else if cur < '\\' && end >= '\\' {
					end = '\\' - 1
				}
				raw = append(raw, cur, end)
				cur = end + 1
			}
		}
	}
	var alts []string
	if len(raw) > 0 {
		alts = append(alts, classText(raw))
	}
	if len(specials) > 0 {
		letters := ""
		var us []string
		ctrl := 0
		for _, r := range specials {
			if r < 0x20 {
				ctrl++
			}
		}
		for _, r := range specials {
			switch r {
			case '"':
				letters += `\x22`
			case '\\':
				letters += `\x5C`
			case '\b':
				letters += "b"
			case '\f':
				letters += "f"
			case '\n':
				letters += "n"
			case '\r':
				letters += "r"
			case '\t':
				letters += "t"
			default:
				if ctrl < 0x20 {
					us = append(us, Literal(fmt.Sprintf("u%04x", r)))
				}
			}
		}
		if ctrl == 0x20 {
			us = []string{`"u00" [01] [0-9a-fA-F]`}
		}
		var esc []string
		if letters != "" {
			esc = append(esc, "["+letters+"]")
		}
		esc = append(esc, us...)
		e := `[\\] `
		if len(esc) == 1 {
			e += esc[0]
		} else {
			e += "(" + strings.Join(esc, " | ") + ")"
		}
		alts = append(alts, e)
	}
	if len(alts) == 0 {
		pc.fail("empty character class")
	}
	if len(alts) == 1 && len(specials) == 0 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// classText writes a GBNF character class for the rune ranges, negated when
// that is shorter.
func classText(ranges []rune) string {
	// complement within [0, MaxRune]
	var comp []rune
	next := rune(0)
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] > next {
			comp = append(comp, next, ranges[i]-1)
		}
		next = ranges[i+1] + 1
	}
	if next <= unicode.MaxRune {
		comp = append(comp, next, unicode.MaxRune)
	}
	var sb strings.Builder
	sb.WriteByte('[')
	use := ranges
	if len(comp) > 0 && len(comp) < len(ranges) {
		sb.WriteByte('^')
		use = comp
	}
	for i := 0; i+1 < len(use); i += 2 {
		writeGrammarRune(&sb, use[i], true)
		if use[i+1] != use[i] {
			sb.WriteByte('-')
			writeGrammarRune(&sb, use[i+1], true)
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpNoMatch:
		return false
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !nullable(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if nullable(s) {
				return true
			}
		}
		return false
	}
	return true // empty match and zero-width assertions
}

// nonEmpty returns a regexp matching the non-empty strings of re (nil if none).
func nonEmpty(re *syntax.Regexp) *syntax.Regexp {
	if !nullable(re) {
		return re
	}
	mk := func(op syntax.Op, subs ...*syntax.Regexp) *syntax.Regexp {
		return &syntax.Regexp{Op: op, Sub: subs}
	}
	switch re.Op {
	case syntax.OpCapture:
		return nonEmpty(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		s := nonEmpty(re.Sub[0])
		if s == nil {
			return nil
		}
		return mk(syntax.OpPlus, s)
	case syntax.OpQuest:
		return nonEmpty(re.Sub[0])
	case syntax.OpRepeat:
		s := nonEmpty(re.Sub[0])
		if s == nil || re.Max == 0 {
			return nil
		}
		r := mk(syntax.OpRepeat, s)
		r.Min, r.Max = 1, re.Max
		return r
	case syntax.OpConcat:
		var alts []*syntax.Regexp
		for i, s := range re.Sub {
			ne := nonEmpty(s)
			if ne == nil {
				continue
			}
			alts = append(alts, mk(syntax.OpConcat, append([]*syntax.Regexp{ne}, re.Sub[i+1:]...)...))
		}
		if len(alts) == 0 {
			return nil
		}
		if len(alts) == 1 {
			return alts[0]
		}
		return mk(syntax.OpAlternate, alts...)
	case syntax.OpAlternate:
		var alts []*syntax.Regexp
		for _, s := range re.Sub {
			if ne := nonEmpty(s); ne != nil {
				alts = append(alts, ne)
			}
		}
		if len(alts) == 0 {
			return nil
		}
		if len(alts) == 1 {
			return alts[0]
		}
		return mk(syntax.OpAlternate, alts...)
	}
	return nil
}
