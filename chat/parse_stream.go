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
// Each Push re-reads the text so far, so the total cost grows with the
// square of the output's length.
type Parser struct {
	opts ParseOptions
	buf  strings.Builder
	sent Message
	err  error
	done bool
}

// NewParser returns a parser for one output.
func NewParser(opts ParseOptions) *Parser {
	return &Parser{opts: opts, sent: Message{Role: RoleAssistant}}
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
	st := newState(p.buf.String(), p.opts, true)
	st.run()
	d, err := p.advance(st.message())
	if err == nil {
		err = st.err
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
	d, derr := p.advance(msg)
	if derr != nil {
		p.sent = msg
		err = derr
	}
	p.err = err
	return d, err
}

// Message returns the message so far: everything reported by the deltas.
func (p *Parser) Message() Message {
	m := p.sent
	m.ToolCalls = append([]ToolCall(nil), p.sent.ToolCalls...)
	if len(m.ToolCalls) == 0 {
		m.ToolCalls = nil
	}
	return m
}

// advance computes the delta from what was sent to msg and records msg.
func (p *Parser) advance(msg Message) (Delta, error) {
	var d Delta
	var ok bool
	if d.Content, ok = extension(p.sent.Content, msg.Content); !ok {
		return d, errNotPrefix
	}
	if d.ReasoningContent, ok = extension(p.sent.ReasoningContent, msg.ReasoningContent); !ok {
		return Delta{}, errNotPrefix
	}
	if len(msg.ToolCalls) < len(p.sent.ToolCalls) {
		return Delta{}, errNotPrefix
	}
	for i, tc := range msg.ToolCalls {
		var old ToolCall
		if i < len(p.sent.ToolCalls) {
			old = p.sent.ToolCalls[i]
		}
		td := ToolCallDelta{Index: i}
		if old.Name != tc.Name {
			if old.Name != "" {
				return Delta{}, errNotPrefix
			}
			td.Name = tc.Name
		}
		if old.ID != tc.ID {
			if old.ID != "" {
				return Delta{}, errNotPrefix
			}
			td.ID = tc.ID
		}
		if td.ArgumentsDelta, ok = extension(old.Arguments, tc.Arguments); !ok {
			return Delta{}, errNotPrefix
		}
		if td.Name != "" || td.ID != "" || td.ArgumentsDelta != "" {
			d.ToolCalls = append(d.ToolCalls, td)
		}
	}
	p.sent = msg
	p.sent.ToolCalls = append([]ToolCall(nil), msg.ToolCalls...)
	return d, nil
}

func extension(old, cur string) (string, bool) {
	if !strings.HasPrefix(cur, old) {
		return "", false
	}
	return cur[len(old):], true
}
