package chat

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/x/llama/internal/jsonschema"
)

// allowReasoning lets a grammar that applies from the first token (a
// response format, a call required, or calls or a response format) begin
// with the model's reasoning, as llama.cpp's chat grammars do: the rest of
// the block the generation prompt opened (ThinkingForcedOpen), else an
// optional block, after the whitespace the model may write first, on a
// template that thinks on request and where thinking is on, or on one
// that shows the reasoning of earlier messages and ignores the request
// (its model always thinks) (thinking:
// the template's enable_thinking; a generation prompt that ends with an
// empty block has it off too). Without it, a thinking model's answer
// stays inside the open block, where it is read as reasoning and the
// content is empty, or the model cannot think at all.
//
// The block is the one the plan's parser reads as reasoning: between its
// format's markers, ending at the first end marker or at the first of the
// format's stops (a call the model starts in its thinking), which the
// grammar keeps out of the block. A template that writes other markers,
// or a format whose parser reads no reasoning, keeps the grammar as it
// is: the reasoning would be read as content. Where the template does not
// show its markers (it leaves the reasoning of the last message out), the
// format's are those the model writes.
func (p *Plan) allowReasoning(caps TemplateCaps, thinking bool) error {
	if p.Parse.Format == FormatGPTOSS {
		p.allowAnalysis()
		return nil
	}
	forced := p.Parse.ThinkingForcedOpen
	if !forced && caps.SupportsThinking && !thinking {
		return nil
	}
	pStart, pEnd, stops := thinkMarkers(p.Parse.Format)
	if pEnd == "" {
		return nil
	}
	start, end, ok, err := p.ThinkingTags()
	if err != nil {
		return err
	}
	start, end = strings.TrimSpace(start), strings.TrimSpace(end)
	// A template that ignores enable_thinking offers a block only where it
	// shows earlier messages' reasoning between the parser's markers: its
	// model always thinks (Seed-OSS).
	if !forced && !caps.SupportsThinking && !(ok && start == pStart && end == pEnd) {
		return nil
	}
	if forced {
		// The prompt ends with <think>, which the model closes with the
		// template's end marker.
		if !ok || end == "" {
			end = thinkClose
		}
		if end != pEnd {
			return nil
		}
	} else {
		if ok && start != "" && end != "" && (start != pStart || end != pEnd) {
			return nil
		}
		start, end = pStart, pEnd
		if strings.HasSuffix(strings.TrimRight(p.Prompt, " \t\r\n"), end) {
			// The template closed the block itself: thinking is off.
			return nil
		}
	}
	g := p.Grammar
	answer, text, gap := unusedRule(g, "answer-root"), unusedRule(g, "reasoning-text"), unusedRule(g, "reasoning-gap")
	var sb strings.Builder
	if forced {
		fmt.Fprintf(&sb, "root ::= %s %s %s\n", text, gap, answer)
	} else {
		fmt.Fprintf(&sb, "root ::= ( %s %s %s %s )? %s\n", gap, jsonschema.Literal(start), text, gap, answer)
	}
	fmt.Fprintf(&sb, "%s ::= [ \\t\\r\\n]{0,4}\n", gap)
	sb.WriteString(untilMarker(text, end, stops))
	sb.WriteString(renameGBNFRule(g, "root", answer))
	p.Grammar = sb.String()
	return nil
}

// thinkMarkers returns the markers between which the parser of format f
// reads the reasoning at the start of an output, and the stops that also
// end it (calls that a model starts without closing its thinking); end is
// "" where the parser reads no reasoning.
func thinkMarkers(f Format) (start, end string, stops []string) {
	if f == FormatGeneric {
		return thinkOpen, thinkClose, nil
	}
	sp := specFor(f)
	if sp.custom != nil || sp.thinkStart == "" {
		return "", "", nil
	}
	return sp.thinkStart, sp.thinkEnd, sp.thinkStops
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

// untilMarker returns the GBNF rules, the first named name, that match a
// text up to and including the first end marker, where none of stops comes
// before: the thinking block as the parser reads it, up to the first
// marker done. A rule stands for each state of the automaton that finds
// the markers (Aho–Corasick, the markers being few and short): the longest
// end of the text read that begins a marker. Where several markers end at
// the same character, the longest, which began first, is the one found;
// markers are assumed not to hold one another but at their end, as
// those of the formats do.
func untilMarker(name, end string, stops []string) string {
	words := []string{end}
	for _, s := range stops {
		if s != "" && s != end {
			words = append(words, s)
		}
	}
	// found is the longest marker that ends s ("" for none).
	found := func(s string) string {
		w := ""
		for _, m := range words {
			if strings.HasSuffix(s, m) && len(m) > len(w) {
				w = m
			}
		}
		return w
	}
	index := map[string]int{"": 0}
	states := []string{""}
	var alphabet []rune
	for _, w := range words {
		rs := []rune(w)
		for k, r := range rs {
			if !strings.ContainsRune(string(alphabet), r) {
				alphabet = append(alphabet, r)
			}
			// A proper prefix, unless one holding a marker, which no
			// text reaches.
			prefix := string(rs[:k+1])
			if _, ok := index[prefix]; !ok && k+1 < len(rs) && !holdsMarker(prefix, words) {
				index[prefix] = len(states)
				states = append(states, prefix)
			}
		}
	}
	state := func(i int) string {
		if i == 0 {
			return name
		}
		return name + "-" + strconv.Itoa(i)
	}
	// next is the state after s: its longest end that is a state.
	next := func(s string) int {
		for i := range s {
			if k, ok := index[s[i:]]; ok {
				return k
			}
		}
		return 0
	}
	var sb strings.Builder
	for i, u := range states {
		// The characters that end a marker or lead elsewhere than state
		// 0; any other keeps state 0.
		var alts, class strings.Builder
		for _, r := range alphabet {
			s := u + string(r)
			if w := found(s); w != "" {
				fmt.Fprintf(&class, `\U%08X`, r)
				if w == end {
					fmt.Fprintf(&alts, " | %s", jsonschema.Literal(string(r)))
				}
				continue
			}
			if k := next(s); k != 0 {
				fmt.Fprintf(&class, `\U%08X`, r)
				fmt.Fprintf(&alts, " | %s %s", jsonschema.Literal(string(r)), state(k))
			}
		}
		fmt.Fprintf(&sb, "%s ::= [^%s] %s%s\n", state(i), class.String(), name, alts.String())
	}
	return sb.String()
}

// holdsMarker reports whether s holds one of words.
func holdsMarker(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// harmonyFinal is the header of a GPT-OSS final message, which comes
// before a response format's answer: its channel, an optional content
// type, then the message.
const harmonyFinal = `"<|channel|>final" ( " "? "<|constrain|>"? [A-Za-z0-9_-]{1,32} )? "<|message|>"`

// allowAnalysis is allowReasoning for GPT-OSS (harmony), which reasons in
// messages of its own: any number of analysis messages, each ended and
// followed by the next message's start, before the answer (a final
// message's header and a response format's JSON, or calls), as
// llama.cpp's grammar for the format. An analysis message's text ends at
// the first of the tokens that end the parser's body.
func (p *Plan) allowAnalysis() {
	g := p.Grammar
	answer, block, text := unusedRule(g, "answer-root"), unusedRule(g, "harmony-analysis"), unusedRule(g, "harmony-analysis-text")
	var sb strings.Builder
	fmt.Fprintf(&sb, "root ::= %s* %s\n", block, answer)
	fmt.Fprintf(&sb, "%s ::= %s %s %s\n", block, jsonschema.Literal(hChannel+"analysis"+hMessage), text, jsonschema.Literal(hStart+"assistant"))
	sb.WriteString(untilMarker(text, hEnd, []string{hCall, hReturn, hStart}))
	sb.WriteString(renameGBNFRule(g, "root", answer))
	p.Grammar = sb.String()
}

// formatAnswer puts the markup format f writes around an answer (see
// answerMarkup) around response format grammar g (its root).
func formatAnswer(f Format, g string) string {
	if f != FormatGPTOSS && f != FormatCohere2MoE && f != FormatKimiK3 {
		return g
	}
	answer := unusedRule(g, "final-answer")
	return "root ::= " + answerMarkup(f, answer) + "\n" + renameGBNFRule(g, "root", answer)
}
