package chat

import (
	"strings"
	"unicode/utf8"
)

// Stream reads a model's output as it is generated with a Parser
// and says what to send. When the output turns out malformed part-way (the
// parser errors), the text not reported yet and everything after it is
// sent as content rather than dropped.
type Stream struct {
	opts   ParseOptions
	parser *Parser
	raw    strings.Builder
	sent   Message // what the deltas returned so far carried (parsed)
	failed bool    // fell back to raw text
	prefix string  // text read before the first piece (a prefill)
	json   *jsonContentFilter
}

// WithJSONContent makes the content JSON alone: leading whitespace and a
// ```json fence, and trailing whitespace and fence, are left out.
func (s *Stream) WithJSONContent(on bool) *Stream {
	if on {
		s.json = &jsonContentFilter{}
	}
	return s
}

// jsonContentFilter drops the whitespace and ```json fence around JSON
// content given piece by piece; trailing whitespace and backticks are held
// back until more text follows.
type jsonContentFilter struct {
	started bool
	held    string
	raw     strings.Builder // the text before the JSON started
}

func (f *jsonContentFilter) push(s string) string {
	if !f.started {
		f.raw.WriteString(s)
	}
	s = f.held + s
	f.held = ""
	if !f.started {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" || strings.HasPrefix("```json", s) {
			f.held = s
			return ""
		}
		if rest, ok := strings.CutPrefix(s, "```json"); ok {
			s = strings.TrimLeft(rest, " \t\r\n")
			if s == "" {
				f.held = "```json"
				return ""
			}
		}
		f.started = true
	}
	i := len(strings.TrimRight(s, " \t\r\n`"))
	f.held = s[i:]
	return s[:i]
}

// finish ends the content: what was held back is dropped, unless no JSON
// ever started, in which case the raw text is the content (as
// llama-server's parser falls back to it).
func (f *jsonContentFilter) finish() string {
	f.held = ""
	if f.started {
		return ""
	}
	return f.raw.String()
}

// NewStream returns a Stream that parses with opts.
func NewStream(opts ParseOptions) *Stream {
	return &Stream{opts: opts, parser: NewParser(opts)}
}

// WithPrefix makes the stream read prefix (the text of a message continued)
// before the first piece, so that the first delta carries it.
func (s *Stream) WithPrefix(prefix string) *Stream {
	s.prefix = prefix
	return s
}

// Push adds a piece of output and returns the delta to send.
func (s *Stream) Push(piece string) Delta {
	if s.prefix != "" {
		piece, s.prefix = s.prefix+piece, ""
	}
	s.raw.WriteString(piece)
	if s.failed {
		return s.filter(Delta{Content: piece})
	}
	d, err := s.parser.Push(piece)
	return s.filter(s.settle(d, err))
}

// filter applies the JSON content filter to d.
func (s *Stream) filter(d Delta) Delta {
	if s.json != nil {
		d.Content = s.json.push(d.Content)
	}
	return d
}

// Finish ends the output and returns the last delta. limited reports that
// generation stopped at the token limit: a tool call it cut off is then
// left as reported (the finish reason says "length") instead of falling
// back to raw text.
func (s *Stream) Finish(limited bool) Delta {
	var first Delta
	if s.prefix != "" {
		first = s.Push("")
	}
	if s.failed {
		return first
	}
	d, err := s.parser.Finish()
	if err != nil && limited {
		d = s.record(d)
	} else {
		d = s.settle(d, err)
	}
	d = s.filter(d)
	if s.json != nil {
		// Streamed, text without JSON is not content (llama-server's
		// partial parses never show it).
		_ = s.json.finish()
	}
	return joinDeltas(first, d)
}

// joinDeltas is a followed by b as one delta.
func joinDeltas(a, b Delta) Delta {
	if a.Empty() {
		return b
	}
	a.Content += b.Content
	a.ReasoningContent += b.ReasoningContent
	a.ToolCalls = append(a.ToolCalls, b.ToolCalls...)
	return a
}

// settle records d and, on a parse error, switches to raw text: d (what
// the parser read before the error) is followed by the output it has not
// reported.
func (s *Stream) settle(d Delta, err error) Delta {
	if err == nil {
		return s.record(d)
	}
	d = s.record(d)
	s.failed = true
	d.Content += s.raw.String()[s.reported():]
	return d
}

// record adds d to what was sent.
func (s *Stream) record(d Delta) Delta {
	s.sent.addDelta(d)
	return d
}

// addDelta adds d to m, as a client adds up the deltas of a stream.
func (m *Message) addDelta(d Delta) {
	m.Content += d.Content
	m.ReasoningContent += d.ReasoningContent
	for _, tc := range d.ToolCalls {
		for tc.Index >= len(m.ToolCalls) {
			m.ToolCalls = append(m.ToolCalls, ToolCall{})
		}
		c := &m.ToolCalls[tc.Index]
		c.ID += tc.ID
		c.Name += tc.Name
		c.Arguments += tc.ArgumentsDelta
	}
}

// reported is how much of the raw output the sent message accounts for:
// the shortest prefix a fresh parser reads at least that much from.
func (s *Stream) reported() int {
	raw := s.raw.String()
	p := NewParser(s.opts)
	if covers(p.Message(), s.sent) {
		return 0
	}
	for i := 0; i < len(raw); {
		_, n := utf8.DecodeRuneInString(raw[i:])
		_, _ = p.Push(raw[i : i+n])
		i += n
		if covers(p.Message(), s.sent) {
			return i
		}
	}
	return len(raw)
}

// covers reports whether m carries at least what sent does.
func covers(m, sent Message) bool {
	if len(m.Content) < len(sent.Content) || len(m.ReasoningContent) < len(sent.ReasoningContent) ||
		len(m.ToolCalls) < len(sent.ToolCalls) {
		return false
	}
	for i, tc := range sent.ToolCalls {
		if len(m.ToolCalls[i].Name) < len(tc.Name) || len(m.ToolCalls[i].Arguments) < len(tc.Arguments) {
			return false
		}
	}
	return true
}

// ParseWhole reads a whole output with [Parse]. When it is malformed (for
// example a broken or unfinished tool call), the message is the raw output
// as content, as llama.cpp's final parse has it, rather than the part the
// parser managed to read.
func ParseWhole(output string, opts ParseOptions) Message {
	msg, err := Parse(output, opts)
	if err != nil {
		return Message{Role: RoleAssistant, Content: output}
	}
	return msg
}

// TrimJSONContent returns the JSON of content written for a response
// format: without the whitespace and ```json fence around it. Content in
// which no JSON starts is returned as it is.
func TrimJSONContent(content string) string {
	var f jsonContentFilter
	out := f.push(content)
	return out + f.finish()
}
