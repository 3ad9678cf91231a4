package chat

import (
	"bytes"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseOptions says how to read a model's output.
type ParseOptions struct {
	// Format is the model family's output format.
	Format Format
	// Reasoning says whether thinking is moved out of the content.
	Reasoning ReasoningFormat
	// ThinkingForcedOpen is set when the prompt ended inside a thinking
	// block (for example with "<think>\n"), so the output starts with
	// thinking and has no opening tag.
	ThinkingForcedOpen bool
	// ParseToolCalls turns tool-call markup into [Message.ToolCalls]. When it
	// is false the markup is left in the content.
	ParseToolCalls bool
	// Tools optionally gives the tools offered to the model. Formats that
	// write arguments as untyped text (Qwen3 Coder, GLM 4.5) use the
	// parameter schemas to keep string parameters as strings; without them a
	// value that reads as JSON (a number, true, an object...) is taken as
	// such and anything else becomes a string.
	Tools []Tool
}

var (
	errIncomplete = errors.New("chat: output ended inside a tool call")
	errMalformed  = errors.New("chat: malformed tool call")
)

// Parse parses a complete output. It returns the assistant message with its
// content, reasoning and tool calls (IDs are empty unless the format carries
// them). When the output ends inside a tool call or a call is malformed, it
// returns what could be read along with an error.
func Parse(output string, opts ParseOptions) (Message, error) {
	p := newState(output, opts, false)
	p.run()
	return p.message(), p.err
}

// pstate is one run of a parser over a text. In partial mode the text is a
// prefix of the output: the parser then reports only what no continuation
// can change, holding back anything undecided (a marker's first characters,
// a call whose name is not complete, the thinking's trailing spaces).
type pstate struct {
	s       string
	opts    ParseOptions
	partial bool

	content   text
	reasoning text
	calls     []ToolCall

	hadReasoning bool
	afterCall    bool // the reading is right after a call: spaces are the call's
	stopped      bool // stop reading: the rest is held back or dropped
	err          error

	// mark is how far a partial reading is settled; a [Parser] resumes
	// there on the next piece.
	mark mark
}

// phase is where in the output a reading is.
type phase uint8

const (
	phaseStart    phase = iota // nothing is settled: read from the start
	phaseThinking              // inside the thinking block
	phaseBody                  // in the body, after thinking and any start markup
)

// mark is a point of a partial reading that no continuation of the output
// can change: reading on from at with the message as it stood there gives
// what reading the whole output from the start gives.
type mark struct {
	phase                     phase
	at                        int
	content, reasoning, calls int
	hadReasoning              bool
	afterCall                 bool // at is right after a call or its spaces
}

// text is an append-only buffer that a resumed reading cuts back to a mark.
// It remembers the runs of spaces found at its start and end, so that a
// stream that writes nothing but spaces for a while costs a scan of what
// each piece adds, not of the whole run at every piece.
type text struct {
	b []byte
	// lead: b[:lead] is spaces.
	lead int
	// b[tail:tailEnd] is spaces and the rune before tail is not; tailEnd
	// is 0 when unknown.
	tail, tailEnd int
}

// cut cuts the text back to its first n bytes. The runs it remembers
// stay spaces up to the start of the character n cuts.
func (t *text) cut(n int) {
	if n < t.lead {
		t.lead = runeStartAt(t.b, n, 0)
	}
	if n < t.tailEnd {
		if t.tailEnd = runeStartAt(t.b, n, t.tail); t.tailEnd < t.tail {
			t.tail, t.tailEnd = 0, 0
		}
	}
	t.b = t.b[:n]
}

// runeStartAt backs n up to the start of the character of b it falls in,
// not below floor.
func runeStartAt(b []byte, n, floor int) int {
	for n > floor && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}

// bounds gives the part of the text without the spaces around it, as
// [strings.TrimSpace] cuts it, scanning only what the remembered runs do
// not cover.
func (t *text) bounds() (lo, hi int) {
	b := t.b
	lo = t.lead
	for lo < len(b) {
		r, size := utf8.DecodeRune(b[lo:])
		if !unicode.IsSpace(r) {
			break
		}
		lo += size
	}
	t.lead = lo
	hi = len(b)
	for hi > lo {
		if hi == t.tailEnd {
			hi = max(t.tail, lo) // the rest of the run is spaces
			break
		}
		r, size := utf8.DecodeLastRune(b[:hi])
		if !unicode.IsSpace(r) {
			break
		}
		hi -= size
	}
	t.tail, t.tailEnd = hi, len(b)
	if hi <= lo {
		t.tail, t.tailEnd = 0, 0 // all spaces: lead holds it
	}
	return lo, hi
}

// WriteString appends s.
func (t *text) WriteString(s string) { t.b = append(t.b, s...) }

// String returns a copy of the text.
func (t *text) String() string { return string(t.b) }

// settle records that the partial reading is settled up to at.
func (p *pstate) settle(ph phase, at int) {
	if !p.partial {
		return
	}
	p.mark = mark{phase: ph, at: at, content: len(p.content.b), reasoning: len(p.reasoning.b),
		calls: len(p.calls), hadReasoning: p.hadReasoning, afterCall: p.afterCall}
}

// rewind takes the state back to its mark to read a longer s from there.
func (p *pstate) rewind(s string) {
	p.s = s
	p.content.cut(p.mark.content)
	p.reasoning.cut(p.mark.reasoning)
	clear(p.calls[p.mark.calls:])
	p.calls = p.calls[:p.mark.calls]
	p.hadReasoning = p.mark.hadReasoning
	p.afterCall = p.mark.afterCall
	p.stopped = false
	p.err = nil
}

func newState(s string, opts ParseOptions, partial bool) *pstate {
	return &pstate{s: s, opts: opts, partial: partial}
}

func (p *pstate) run() {
	spec := specFor(p.opts.Format)
	if spec.custom != nil {
		// Structured formats are read again from the start each time.
		spec.custom(p)
		p.mark = mark{}
		return
	}
	i := p.mark.at
	if p.mark.phase != phaseBody {
		switch {
		case p.mark.phase == phaseThinking:
			i = p.thinking(i, spec.thinkEnd, spec.thinkStops...)
		case spec.thinkStart != "":
			i = p.reasoningBlock(0, spec.thinkStart, spec.thinkEnd, spec.thinkStops...)
		}
		if p.stopped {
			return
		}
		if spec.start != nil && p.opts.ParseToolCalls {
			i = spec.start(p, i)
			if p.stopped {
				return
			}
		}
		p.settle(phaseBody, i)
	}
	markers := spec.markers
	if !p.opts.ParseToolCalls {
		markers = spec.alwaysMarkers
	}
	p.body(i, markers, spec.call)
}

func (p *pstate) trims() bool { return p.opts.Format != FormatContentOnly }

func (p *pstate) message() Message {
	msg := Message{Role: RoleAssistant}
	lo, hi := p.contentBounds()
	msg.Content = string(p.content.b[lo:hi])
	lo, hi = p.reasoning.bounds()
	msg.ReasoningContent = string(p.reasoning.b[lo:hi])
	if len(p.calls) > 0 {
		msg.ToolCalls = append([]ToolCall(nil), p.calls...)
	}
	return msg
}

// contentBounds gives the part of the content the message holds: without
// the spaces before it (for content-only output, only those after the
// thinking), to its end. As llama.cpp's parsers, the spaces at the end are
// text (a newline before a tool call, a space before a stop string), and
// those after a call belong to the call (body).
func (p *pstate) contentBounds() (lo, hi int) {
	b := p.content.b
	switch {
	case p.trims():
		// Only the left side is scanned: the spaces at the end, a run
		// that grows by a token at a time when a model writes nothing
		// else, would be scanned again at every token.
		lo, _ = p.content.bounds()
		return lo, len(b)
	case p.hadReasoning:
		return len(b) - len(bytes.TrimLeft(b, " \t\r\n")), len(b)
	}
	return 0, len(b)
}

// reasoningBlock reads a thinking block at i (after spaces) delimited by
// start and end, or from i when thinking was forced open. The block also
// ends before any of stops, which are left for the body (tool calls that
// some models start without closing their thinking). It returns where the
// rest of the output starts.
func (p *pstate) reasoningBlock(i int, start, end string, stops ...string) int {
	if p.opts.Reasoning == ReasoningNone {
		return i
	}
	s := p.s
	j := i
	if !p.opts.ThinkingForcedOpen {
		k := skipSpace(s, i)
		rest := s[k:]
		switch {
		case strings.HasPrefix(rest, start):
			j = k + len(start)
		case p.partial && strings.HasPrefix(start, rest):
			p.stopped = true
			return len(s)
		default:
			return i
		}
	}
	p.hadReasoning = true
	return p.thinking(j, end, stops...)
}

// thinking reads thinking text from j up to end, or up to the first of
// stops (which is not consumed), and returns where the rest of the output
// starts.
func (p *pstate) thinking(j int, end string, stops ...string) int {
	s := p.s
	e, m := findFirst(s, j, append([]string{end}, stops...))
	if e < 0 {
		text := s[j:]
		if p.partial {
			text = text[:len(text)-heldSuffix(text, append([]string{end}, stops...)...)]
			p.stopped = true
		}
		p.reasoning.WriteString(text)
		p.settle(phaseThinking, j+len(text))
		return len(s)
	}
	p.reasoning.WriteString(s[j:e])
	if m != end {
		return e
	}
	return e + len(end)
}

// heldSuffix is the length of the longest end of text that is the start of
// one of the markers (but not a whole marker).
func heldSuffix(text string, markers ...string) int {
	best := 0
	for _, m := range markers {
		n := len(m) - 1
		if n > len(text) {
			n = len(text)
		}
		for k := n; k > best; k-- {
			if strings.HasSuffix(text, m[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// callFunc reads tool-call markup that starts with marker at s[i]. It
// returns the index after the markup. ok is false when there is no call
// there after all (nothing was recorded), and the marker is then content.
// It sets p.stopped when the partial input ends inside the markup and p.err
// when a call that was already reported turns out incomplete or malformed.
type callFunc func(p *pstate, i int, marker string) (end int, ok bool)

// body reads content from i, handing each marker to call.
func (p *pstate) body(i int, markers []string, call callFunc) {
	s := p.s
	for i <= len(s) && !p.stopped {
		if p.afterCall {
			// The spaces after a call are the call's. While the output
			// may go on with more, the reading settles after them
			// still after the call.
			i = skipSpace(s, i)
			if p.partial && i == len(s) {
				p.settle(phaseBody, i)
				return
			}
			p.afterCall = false
		}
		j, m := findFirst(s, i, markers)
		if j < 0 {
			text := s[i:]
			if p.partial {
				text = text[:len(text)-heldSuffix(text, markers...)]
			}
			p.content.WriteString(text)
			p.settle(phaseBody, i+len(text))
			return
		}
		p.content.WriteString(s[i:j])
		p.settle(phaseBody, j)
		end, ok := call(p, j, m)
		if p.stopped {
			return
		}
		if !ok {
			p.content.WriteString(m)
			i = j + len(m)
		} else {
			i, p.afterCall = end, true
		}
		p.settle(phaseBody, i)
	}
}

// findFirst finds the earliest of the markers in s from i.
func findFirst(s string, i int, markers []string) (int, string) {
	best, which := -1, ""
	for _, m := range markers {
		if k := strings.Index(s[i:], m); k >= 0 && (best < 0 || i+k < best || i+k == best && len(m) > len(which)) {
			best, which = i+k, m
		}
	}
	return best, which
}

// eof ends a call that ran into the end of the input. A call whose name is
// known is reported (with an error when the input is complete); otherwise a
// partial input holds the markup back and a complete one treats it as text.
func (p *pstate) eof(tc *ToolCall, committed bool) (int, bool) {
	if tc != nil && tc.Name != "" {
		p.calls = append(p.calls, *tc)
		committed = true
	}
	if committed {
		p.stopped = true
		if !p.partial {
			p.err = errIncomplete
		}
		return len(p.s), true
	}
	if p.partial {
		p.stopped = true
		return len(p.s), true
	}
	return 0, false
}

// invalid ends a call whose markup went wrong. Once something of the
// section was reported (committed) the error stands; before that the markup
// is plain text.
func (p *pstate) invalid(tc *ToolCall, committed bool) (int, bool) {
	if tc != nil && tc.Name != "" {
		p.calls = append(p.calls, *tc)
		committed = true
	}
	if committed {
		p.err = errMalformed
		p.stopped = true
		return len(p.s), true
	}
	return 0, false
}

// lit matches the literal l at i after optional spaces. In partial mode an
// input that ends before l could be told apart sets p.stopped.
func (p *pstate) lit(i int, l string, spaces bool) (int, bool) {
	k := i
	if spaces {
		k = skipSpace(p.s, i)
	}
	rest := p.s[k:]
	if strings.HasPrefix(rest, l) {
		return k + len(l), true
	}
	if p.partial && strings.HasPrefix(l, rest) {
		p.stopped = true
		return len(p.s), false
	}
	return i, false
}

// until reads up to the terminator t from i. found is false when the input
// ends first; text then excludes a held-back start of t in partial mode.
func (p *pstate) until(i int, t string) (text string, end int, found bool) {
	k := strings.Index(p.s[i:], t)
	if k < 0 {
		text = p.s[i:]
		if p.partial {
			text = text[:len(text)-heldSuffix(text, t)]
		}
		return text, len(p.s), false
	}
	return p.s[i : i+k], i + k + len(t), true
}

// argsJSON reads a JSON arguments value at i (after spaces) into
// tc.Arguments. With scanEOF the arguments hold the text so far (without
// trailing spaces); with scanInvalid they hold the text up to the error.
func (p *pstate) argsJSON(tc *ToolCall, i int) (int, scanStatus) {
	k := skipSpace(p.s, i)
	end, st := scanJSONValue(p.s, k)
	switch st {
	case scanOK:
		tc.Arguments = p.s[k:end]
	default:
		tc.Arguments = strings.TrimRight(p.s[k:end], " \t\r\n")
	}
	return end, st
}

// callKeys name the fields of a JSON call object.
type callKeys struct {
	name, args, id []string
}

var defaultCallKeys = callKeys{
	name: []string{"name", "tool_name"},
	args: []string{"arguments", "parameters"},
	id:   []string{"id", "tool_call_id"},
}

func inList(k string, list []string) bool {
	for _, l := range list {
		if k == l {
			return true
		}
	}
	return false
}

// callObject reads a {"name":...,"arguments":...} object at s[i]. With
// scanEOF or scanInvalid the call holds what was read before that point.
func (p *pstate) callObject(i int, keys callKeys) (tc ToolCall, end int, st scanStatus) {
	s := p.s
	if i >= len(s) {
		return tc, len(s), scanEOF
	}
	if s[i] != '{' {
		return tc, i, scanInvalid
	}
	i++
	var haveName, haveArgs, haveID bool
	first := true
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return tc, len(s), scanEOF
		}
		if s[i] == '}' && first {
			i++
			break
		}
		if !first {
			if s[i] == '}' {
				i++
				break
			}
			if s[i] != ',' {
				return tc, i, scanInvalid
			}
			i = skipSpace(s, i+1)
		}
		first = false
		ke, kst := scanJSONString(s, i)
		if kst != scanOK {
			return tc, ke, kst
		}
		key := decodeJSONString(s[i:ke])
		i = skipSpace(s, ke)
		if i >= len(s) {
			return tc, len(s), scanEOF
		}
		if s[i] != ':' {
			return tc, i, scanInvalid
		}
		i = skipSpace(s, i+1)
		switch {
		case !haveName && inList(key, keys.name):
			e, vst := scanJSONString(s, i)
			if vst != scanOK {
				return tc, e, vst
			}
			tc.Name = decodeJSONString(s[i:e])
			haveName = true
			i = e
		case !haveArgs && inList(key, keys.args):
			e, vst := p.argsJSON(&tc, i)
			if vst != scanOK {
				return tc, e, vst
			}
			haveArgs = true
			i = e
		case !haveID && inList(key, keys.id):
			e, vst := scanJSONValue(s, i)
			if vst != scanOK {
				return tc, e, vst
			}
			if s[i] == '"' {
				tc.ID = decodeJSONString(s[i:e])
			} else {
				tc.ID = s[i:e]
			}
			haveID = true
			i = e
		default:
			e, vst := scanJSONValue(s, i)
			if vst != scanOK {
				return tc, e, vst
			}
			i = e
		}
	}
	if tc.Arguments == "" {
		tc.Arguments = "{}"
	}
	return tc, i, scanOK
}

// callArray reads a JSON array of call objects at i (after spaces), adding
// each call.
func (p *pstate) callArray(i int, keys callKeys) (int, bool) {
	s := p.s
	i = skipSpace(s, i)
	if i >= len(s) {
		return p.eof(nil, false)
	}
	if s[i] != '[' {
		return p.invalid(nil, false)
	}
	i++
	committed := false
	first := true
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return p.eof(nil, committed)
		}
		if s[i] == ']' {
			return i + 1, true
		}
		if !first {
			if s[i] != ',' {
				return p.invalid(nil, committed)
			}
			i = skipSpace(s, i+1)
		}
		first = false
		tc, end, st := p.callObject(i, keys)
		switch st {
		case scanEOF:
			if !committed && tc.Name == "" && !p.partial {
				return 0, false
			}
			return p.eof(&tc, committed)
		case scanInvalid:
			return p.invalid(&tc, committed)
		}
		if tc.Name == "" {
			return p.invalid(nil, committed)
		}
		p.calls = append(p.calls, tc)
		committed = true
		i = end
	}
}
