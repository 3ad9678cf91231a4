package chat

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/x/llama/internal/jsonschema"
)

// maxMarkerRunes bounds the reasoning markers a grammar spells out (one
// rule per character of the end marker).
const maxMarkerRunes = 64

// allowReasoning lets a grammar that applies from the first token (a
// response format, a call required, or calls or a response format) begin
// with the model's reasoning, as llama.cpp's chat grammars do: the rest of
// the block the generation prompt opened (ThinkingForcedOpen), else an
// optional block between the template's markers on a template that
// thinks on request. Without it, a thinking model's answer stays inside
// the open block, where it is read as reasoning and the content is empty,
// or the model cannot think at all.
func (p *Plan) allowReasoning(caps TemplateCaps) error {
	forced := p.Parse.ThinkingForcedOpen
	if !forced && (!caps.SupportsThinking || p.extra["enable_thinking"] == false) {
		return nil
	}
	start, end, ok, err := p.ThinkingTags()
	if err != nil {
		return err
	}
	start, end = strings.TrimSpace(start), strings.TrimSpace(end)
	if forced && (!ok || end == "") {
		start, end, ok = "<think>", "</think>", true
	}
	if !ok || start == "" || end == "" || len([]rune(end)) > maxMarkerRunes {
		return nil
	}
	g := p.Grammar
	answer, text, gap := unusedRule(g, "answer-root"), unusedRule(g, "reasoning-text"), unusedRule(g, "reasoning-gap")
	var sb strings.Builder
	block := text + " " + jsonschema.Literal(end) + " " + gap
	if forced {
		fmt.Fprintf(&sb, "root ::= %s %s\n", block, answer)
	} else {
		fmt.Fprintf(&sb, "root ::= ( %s %s )? %s\n", jsonschema.Literal(start), block, answer)
	}
	fmt.Fprintf(&sb, "%s ::= [ \\t\\r\\n]{0,4}\n", gap)
	sb.WriteString(notContaining(text, end))
	sb.WriteString(renameGBNFRule(g, "root", answer))
	p.Grammar = sb.String()
	return nil
}

// unusedRule returns name, or name with a number, that grammar g does not
// use as a word.
func unusedRule(g, name string) string {
	for i := 0; ; i++ {
		n := name
		if i > 0 {
			n += strconv.Itoa(i)
		}
		if !strings.Contains(g, n) {
			return n
		}
	}
}

// notContaining returns the GBNF rules, the first named name, that match
// any text (possibly empty) in which w does not occur: a rule per state of
// the automaton that finds w (Knuth–Morris–Pratt), state i having matched
// w's first i characters; no rule leads to state len(w).
func notContaining(name string, w string) string {
	ws := []rune(w)
	state := func(i int) string {
		if i == 0 {
			return name
		}
		return name + "-" + strconv.Itoa(i)
	}
	// next is the state after state i reads r: the longest prefix of w
	// that ends the text matched so far and r.
	next := func(i int, r rune) int {
		seen := append(append([]rune(nil), ws[:i]...), r)
		for k := min(len(seen), len(ws)); k > 0; k-- {
			if string(seen[len(seen)-k:]) == string(ws[:k]) {
				return k
			}
		}
		return 0
	}
	var distinct []rune
	for _, r := range ws {
		if !strings.ContainsRune(string(distinct), r) {
			distinct = append(distinct, r)
		}
	}
	var sb strings.Builder
	for i := range ws {
		// The characters that lead elsewhere than state 0 (or to w
		// whole, which no alternative takes); any other keeps state 0.
		var alts, class strings.Builder
		for _, r := range distinct {
			k := next(i, r)
			if k == 0 {
				continue
			}
			fmt.Fprintf(&class, `\U%08X`, r)
			if k < len(ws) {
				fmt.Fprintf(&alts, " | %s %s", jsonschema.Literal(string(r)), state(k))
			}
		}
		fmt.Fprintf(&sb, "%s ::= | [^%s] %s%s\n", state(i), class.String(), name, alts.String())
	}
	return sb.String()
}
