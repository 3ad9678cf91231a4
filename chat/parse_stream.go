package chat

import (
	"errors"
	"strings"
)

// Delta is what a [Parser] learned from the text pushed since the last
// call.
type Delta struct {
	// Content and ReasoningContent are text to append.
	Content, ReasoningContent string
	// ToolCalls are changes to tool calls, OpenAI streaming style.
	ToolCalls []ToolCallDelta
}

// Empty reports whether the delta carries nothing.
func (d Delta) Empty() bool {
	return d.Content == "" && d.ReasoningContent == "" && len(d.ToolCalls) == 0
}

// ToolCallDelta is a change to the tool call at Index: its ID and Name are
// sent once, when they become known (they are empty otherwise), and
// ArgumentsDelta is JSON text to append to its arguments.
type ToolCallDelta struct {
	Index          int
	ID, Name       string
	ArgumentsDelta string
}

// Parser parses a model's output as it is generated. Push each piece of
// text; each call returns what became certain since the previous one. Text
// that may still turn out to be markup (such as "<tool_ca") is held back, a
// call is reported once its name is complete, and its arguments follow as
// JSON text. After [Parser.Finish] the concatenated deltas equal
// [Parser.Message], which equals [Parse] of the whole output.
//
// The parser keeps how far the output is settled (text before any possible
// marker, finished thinking and finished tool calls) and reads only the
// rest again on each Push, so streaming costs time in proportion to the
// output's length plus, on each Push, the length of an unfinished tool
// call. The structured formats ([FormatGeneric], [FormatFunctionaryV32] and
// [FormatGPTOSS]) are read again from the start on each Push.
type Parser struct {
	opts ParseOptions
	buf  strings.Builder
	st   *pstate // the partial reading, resumed at its mark

	// What the deltas reported so far: the message's content and
	// reasoning, which start at contentAt and reasoningAt in st's buffers
	// (after the leading spaces the message trims), and its tool calls.
	content, reasoning     strings.Builder
	contentAt, reasoningAt int
	calls                  []ToolCall

	err  error
	done bool
}

// NewParser returns a parser for one output.
func NewParser(opts ParseOptions) *Parser {
	return &Parser{opts: opts, st: newState("", opts, true)}
}

// errNotPrefix reports a parser that took back something it had reported;
// it is a bug in this package.
var errNotPrefix = errors.New("chat: streaming parse went back on reported output")

// Push adds a piece of output and returns the new delta. An error is
// returned once the output is known to be malformed; later calls return it
// again.
func (p *Parser) Push(piece string) (Delta, error) {
	if p.done {
		return Delta{}, errors.New("chat: Push after Finish")
	}
	p.buf.WriteString(piece)
	if p.err != nil {
		return Delta{}, p.err
	}
	from := p.st.mark
	p.st.rewind(p.buf.String())
	p.st.run()
	d, err := p.step(from)
	if err == nil {
		err = p.st.err
	}
	p.err = err
	return d, err
}

// Finish parses the whole output and returns the rest of the delta. The
// error is the one [Parse] gives for the whole output.
func (p *Parser) Finish() (Delta, error) {
	if p.done {
		return Delta{}, p.err
	}
	p.done = true
	msg, err := Parse(p.buf.String(), p.opts)
	d, derr := diff(p.Message(), msg)
	if derr != nil {
		err = derr
	}
	p.content.Reset()
	p.content.WriteString(msg.Content)
	p.reasoning.Reset()
	p.reasoning.WriteString(msg.ReasoningContent)
	p.calls = append(p.calls[:0], msg.ToolCalls...)
	p.err = err
	return d, err
}

// Message returns the message so far: everything reported by the deltas.
func (p *Parser) Message() Message {
	m := Message{Role: RoleAssistant, Content: p.content.String(), ReasoningContent: p.reasoning.String()}
	if len(p.calls) > 0 {
		m.ToolCalls = append([]ToolCall(nil), p.calls...)
	}
	return m
}

// step reports what the reading that resumed at from added to the message.
// Everything the reading kept from before from was reported already and is
// not compared again.
func (p *Parser) step(from mark) (Delta, error) {
	st := p.st
	var d Delta
	clo, chi := st.contentBounds()
	rlo, rhi := st.reasoning.bounds()
	cok := grows(&p.content, p.contentAt, st.content.b, clo, chi, from.content)
	rok := grows(&p.reasoning, p.reasoningAt, st.reasoning.b, rlo, rhi, from.reasoning)
	if !cok || !rok || len(st.calls) < len(p.calls) {
		return Delta{}, errNotPrefix
	}
	for i := from.calls; i < len(st.calls); i++ {
		var old ToolCall
		if i < len(p.calls) {
			old = p.calls[i]
		}
		td, ok := callDelta(i, old, st.calls[i])
		if !ok {
			return Delta{}, errNotPrefix
		}
		if td.Name != "" || td.ID != "" || td.ArgumentsDelta != "" {
			d.ToolCalls = append(d.ToolCalls, td)
		}
	}
	if p.content.Len() == 0 {
		p.contentAt = clo
	}
	if p.reasoning.Len() == 0 {
		p.reasoningAt = rlo
	}
	d.Content = string(st.content.b[p.contentAt+p.content.Len() : chi])
	d.ReasoningContent = string(st.reasoning.b[p.reasoningAt+p.reasoning.Len() : rhi])
	p.content.WriteString(d.Content)
	p.reasoning.WriteString(d.ReasoningContent)
	p.calls = append(p.calls[:min(from.calls, len(p.calls))], st.calls[min(from.calls, len(st.calls)):]...)
	return d, nil
}

// grows reports whether b[lo:hi] still starts with the reported text, which
// stood at at in b. Bytes before from were not read again and are known to
// match.
func grows(sent *strings.Builder, at int, b []byte, lo, hi, from int) bool {
	n := sent.Len()
	if n == 0 {
		return true
	}
	if lo != at || hi-lo < n {
		return false
	}
	k := max(from, lo)
	return k >= lo+n || string(b[k:lo+n]) == sent.String()[k-lo:]
}

// diff computes the delta from the reported message old to msg.
func diff(old, msg Message) (Delta, error) {
	var d Delta
	var ok bool
	if d.Content, ok = extension(old.Content, msg.Content); !ok {
		return d, errNotPrefix
	}
	if d.ReasoningContent, ok = extension(old.ReasoningContent, msg.ReasoningContent); !ok {
		return Delta{}, errNotPrefix
	}
	if len(msg.ToolCalls) < len(old.ToolCalls) {
		return Delta{}, errNotPrefix
	}
	for i, tc := range msg.ToolCalls {
		var prev ToolCall
		if i < len(old.ToolCalls) {
			prev = old.ToolCalls[i]
		}
		td, ok := callDelta(i, prev, tc)
		if !ok {
			return Delta{}, errNotPrefix
		}
		if td.Name != "" || td.ID != "" || td.ArgumentsDelta != "" {
			d.ToolCalls = append(d.ToolCalls, td)
		}
	}
	return d, nil
}

// callDelta is the change from the reported call old to tc, the call at
// index i. ok is false when tc does not extend old.
func callDelta(i int, old, tc ToolCall) (td ToolCallDelta, ok bool) {
	td.Index = i
	if old.Name != tc.Name {
		if old.Name != "" {
			return td, false
		}
		td.Name = tc.Name
	}
	if old.ID != tc.ID {
		if old.ID != "" {
			return td, false
		}
		td.ID = tc.ID
	}
	td.ArgumentsDelta, ok = extension(old.Arguments, tc.Arguments)
	return td, ok
}

func extension(old, cur string) (string, bool) {
	if !strings.HasPrefix(cur, old) {
		return "", false
	}
	return cur[len(old):], true
}
