package chat

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseGeneric reads the JSON envelope {"tool_call":{...}},
// {"tool_calls":[...]} or {"response":"..."}. Output that is not such an
// object is content.
func parseGeneric(p *pstate) {
	s := p.s
	i := p.reasoningBlock(0, thinkOpen, thinkClose)
	if p.stopped {
		return
	}
	k := skipSpace(s, i)
	if k >= len(s) {
		if p.partial {
			p.stopped = true
		} else {
			p.content.WriteString(s[i:])
		}
		return
	}
	if s[k] != '{' {
		p.content.WriteString(s[i:])
		return
	}
	// Read the first key to learn which envelope this is.
	j := skipSpace(s, k+1)
	ke, st := scanJSONString(s, j)
	if st == scanEOF && p.partial {
		p.stopped = true
		return
	}
	if st != scanOK {
		p.content.WriteString(s[i:])
		return
	}
	key := decodeJSONString(s[j:ke])
	c := skipSpace(s, ke)
	if c >= len(s) && p.partial {
		p.stopped = true
		return
	}
	if c >= len(s) || s[c] != ':' {
		p.content.WriteString(s[i:])
		return
	}
	v := skipSpace(s, c+1)
	var end int
	switch key {
	case "response":
		if v >= len(s) && p.partial {
			p.stopped = true
			return
		}
		if v < len(s) && s[v] != '"' {
			// A non-string response is given as its JSON text.
			e, st := scanJSONValue(s, v)
			if st != scanOK {
				if p.partial && st == scanEOF {
					p.stopped = true
					return
				}
				p.content.WriteString(s[i:])
				return
			}
			p.content.WriteString(s[v:e])
			end = e
			break
		}
		e, st := scanJSONString(s, v)
		if st == scanOK {
			p.content.WriteString(decodeJSONString(s[v:e]))
			end = e
			break
		}
		if st == scanEOF {
			p.content.WriteString(decodePartialJSONString(s[v:]))
			p.stopped = true
			if !p.partial {
				p.err = errIncomplete
			}
			return
		}
		p.content.WriteString(decodePartialJSONString(s[v:e]))
		p.err = errMalformed
		p.stopped = true
		return
	case "tool_call":
		tc, e, st := p.callObject(v, defaultCallKeys)
		switch st {
		case scanEOF:
			p.eof(&tc, false)
			if !p.stopped {
				p.content.WriteString(s[i:])
			}
			return
		case scanInvalid:
			if _, ok := p.invalid(&tc, false); !ok {
				p.content.WriteString(s[i:])
			}
			return
		}
		if tc.Name == "" {
			p.content.WriteString(s[i:])
			return
		}
		p.calls = append(p.calls, tc)
		end = e
	case "tool_calls":
		e, ok := p.callArray(v, defaultCallKeys)
		if p.stopped {
			return
		}
		if !ok {
			p.content.WriteString(s[i:])
			return
		}
		end = e
	default:
		if p.partial {
			// Undecided until the object is complete: it is content.
			if _, st := scanJSONValue(s, k); st == scanEOF {
				p.stopped = true
				return
			}
		}
		p.content.WriteString(s[i:])
		return
	}
	// Skip the rest of the envelope; text after it is content.
	for {
		end = skipSpace(s, end)
		if end >= len(s) {
			if p.partial {
				p.stopped = true
			}
			return
		}
		if s[end] == '}' {
			end++
			break
		}
		if s[end] != ',' {
			p.err = errMalformed
			p.stopped = true
			return
		}
		j := skipSpace(s, end+1)
		ke, st := scanJSONString(s, j)
		if st == scanOK {
			c := skipSpace(s, ke)
			if c < len(s) && s[c] == ':' {
				ve, vst := scanJSONValue(s, skipSpace(s, c+1))
				if vst == scanOK {
					end = ve
					continue
				}
				st = vst
			} else if c >= len(s) {
				st = scanEOF
			} else {
				st = scanInvalid
			}
		}
		if st == scanEOF {
			if p.partial {
				p.stopped = true
			} else {
				p.err = errIncomplete
			}
			return
		}
		p.err = errMalformed
		p.stopped = true
		return
	}
	p.body(end, nil, nil)
}

// decodePartialJSONString decodes the start of a JSON string literal (from
// its opening quote) up to the last character that cannot change.
func decodePartialJSONString(lit string) string {
	if lit == "" || lit[0] != '"' {
		return ""
	}
	// Find the last safe cut: not inside an escape, not after a lone high
	// surrogate escape, not inside a UTF-8 sequence.
	cut := 1
	i := 1
	for i < len(lit) {
		c := lit[i]
		if c == '"' {
			break
		}
		if c == '\\' {
			if i+1 >= len(lit) {
				break
			}
			if lit[i+1] == 'u' {
				if i+6 > len(lit) {
					break
				}
				code, err := strconv.ParseUint(lit[i+2:i+6], 16, 32)
				if err != nil {
					break
				}
				if code >= 0xD800 && code < 0xDC00 {
					// Needs its low half.
					if i+12 > len(lit) {
						break
					}
					i += 12
				} else {
					i += 6
				}
			} else {
				i += 2
			}
			cut = i
			continue
		}
		if c < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRuneInString(lit[i:])
			if !utf8.FullRuneInString(lit[i:]) {
				break
			}
			i += size
		}
		cut = i
	}
	return decodeJSONString(lit[:cut] + `"`)
}

// parseFunctionaryV32 reads >>>recipient\n blocks: "all" is text, any other
// recipient is a call whose arguments follow (python may take raw code).
func parseFunctionaryV32(p *pstate) {
	s := p.s
	i := 0
	committed := false
	for i < len(s) && !p.stopped {
		start := i
		if strings.HasPrefix(s[i:], ">>>") {
			i += 3
		} else if p.partial && strings.HasPrefix(">>>", s[i:]) {
			p.stopped = true
			return
		}
		nl := strings.IndexByte(s[i:], '\n')
		head := s[i:]
		if nl >= 0 {
			head = s[i : i+nl]
		}
		if nl < 0 && p.partial && strings.TrimSpace(head) == "" {
			p.stopped = true // the recipient may come after the spaces
			return
		}
		if !validName(strings.TrimSpace(head)) {
			// Text without a recipient, up to the next block.
			text, end, found := p.until(i, ">>>")
			p.content.WriteString(text)
			if !found {
				return
			}
			i = end - 3
			continue
		}
		if nl < 0 {
			if p.partial {
				p.stopped = true
				return
			}
			p.content.WriteString(s[start:])
			return
		}
		name := strings.TrimSpace(head)
		i += nl + 1
		if name == "all" || !p.opts.ParseToolCalls {
			text, end, _ := p.until(i, ">>>")
			if !p.opts.ParseToolCalls && name != "all" {
				// The recipient line stays in the content.
				text = s[start:i] + text
			}
			p.content.WriteString(text)
			if end >= len(s) {
				if p.partial && !strings.HasSuffix(s, ">>>") {
					p.stopped = true
				}
				return
			}
			i = end - 3
			continue
		}
		k := skipSpace(s, i)
		if name == "python" && (k >= len(s) && p.partial) {
			p.stopped = true
			return
		}
		if name == "python" && k < len(s) && s[k] != '{' {
			code, end, _ := p.until(i, ">>>")
			if end >= len(s) {
				p.codeCall(name, code)
				return
			}
			p.codeCall(name, code)
			committed = true
			i = end - 3
			continue
		}
		tc := ToolCall{Name: name}
		end, st := p.argsJSON(&tc, i)
		switch st {
		case scanEOF:
			p.eof(&tc, committed)
			return
		case scanInvalid:
			if _, ok := p.invalid(&tc, committed); !ok {
				p.content.WriteString(s[start:])
			}
			return
		}
		p.calls = append(p.calls, tc)
		committed = true
		// Skip to the next block.
		rest, e, found := p.until(end, ">>>")
		if strings.TrimSpace(rest) != "" {
			p.content.WriteString(rest)
		}
		if !found {
			return
		}
		i = e - 3
	}
}

// Harmony (GPT-OSS) tokens.
const (
	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hMessage   = "<|message|>"
	hEnd       = "<|end|>"
	hCall      = "<|call|>"
	hReturn    = "<|return|>"
	hConstrain = "<|constrain|>"
)

// parseHarmony reads GPT-OSS messages: a header (role, channel, recipient)
// then a body up to <|end|>, <|call|>, <|return|> or the next <|start|>.
func parseHarmony(p *pstate) {
	s := p.s
	i := 0
	terms := []string{hEnd, hCall, hReturn, hStart}
	for i < len(s) && !p.stopped {
		// Text before any header is content.
		j, _ := findFirst(s, i, []string{hStart, hChannel})
		if i == 0 && strings.HasPrefix(s, " to=") {
			j = 0
		} else if i == 0 && p.partial && strings.HasPrefix(" to=", s) {
			p.stopped = true
			return
		}
		if j < 0 {
			text := s[i:]
			if p.partial {
				text = text[:len(text)-heldSuffix(text, hStart, hChannel)]
			}
			p.content.WriteString(text)
			return
		}
		p.content.WriteString(s[i:j])
		m := strings.Index(s[j:], hMessage)
		if m < 0 {
			if p.partial {
				p.stopped = true
				return
			}
			p.content.WriteString(s[j:])
			return
		}
		header := s[j : j+m]
		bodyStart := j + m + len(hMessage)
		channel, recipient := harmonyHeader(header)
		// A recipient without a function's name ("functions.") names no
		// call: the block is read as any other.
		if name := strings.TrimPrefix(recipient, "functions."); name != "" && p.opts.ParseToolCalls {
			tc := ToolCall{Name: name}
			end, st := p.argsJSON(&tc, bodyStart)
			switch st {
			case scanEOF:
				p.eof(&tc, false)
				return
			case scanInvalid:
				p.invalid(&tc, true)
				return
			}
			p.calls = append(p.calls, tc)
			_, e, found := p.until(end, hCall)
			if !found {
				// Also accept the other terminators.
				if k, _ := findFirst(s, end, terms); k >= 0 {
					e = k
					for _, t := range []string{hEnd, hReturn} {
						if strings.HasPrefix(s[k:], t) {
							e = k + len(t)
						}
					}
				} else {
					if p.partial {
						p.stopped = true
					}
					return
				}
			}
			i = e
			continue
		}
		k, t := findFirst(s, bodyStart, terms)
		body := s[bodyStart:]
		next := len(s)
		if k >= 0 {
			body = s[bodyStart:k]
			next = k
			if t != hStart {
				next = k + len(t)
			}
		} else if p.partial {
			body = body[:len(body)-heldSuffix(body, terms...)]
		}
		switch {
		case channel == "analysis" && p.opts.Reasoning != ReasoningNone:
			p.reasoning.WriteString(body)
			p.hadReasoning = true
		case channel == "analysis":
			c := strings.Index(header, hChannel)
			p.content.WriteString(header[c:] + hMessage + body)
			if k >= 0 && t != hStart {
				p.content.WriteString(t)
			}
		default:
			p.content.WriteString(body)
		}
		if k < 0 {
			if p.partial {
				p.stopped = true
			}
			return
		}
		i = next
	}
}

// harmonyHeader finds the channel and recipient in a harmony header such as
// "<|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json".
func harmonyHeader(h string) (channel, recipient string) {
	if c := strings.Index(h, hChannel); c >= 0 {
		rest := h[c+len(hChannel):]
		end := strings.IndexAny(rest, " <")
		if end < 0 {
			end = len(rest)
		}
		channel = rest[:end]
	}
	if t := strings.Index(h, " to="); t >= 0 {
		rest := h[t+len(" to="):]
		end := strings.IndexAny(rest, " <")
		if end < 0 {
			end = len(rest)
		}
		recipient = rest[:end]
	}
	return channel, recipient
}

// callGemma reads Gemma 4's <|tool_call>call:name{key:value,...}<tool_call|>
// where strings are quoted with <|"|>.
func callGemma(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	j, ok := p.lit(i+len(marker), "call:", false)
	if p.stopped {
		return p.eof(nil, false)
	}
	if !ok {
		return p.invalid(nil, false)
	}
	b := strings.IndexByte(s[j:], '{')
	if b < 0 {
		return p.eofNoName()
	}
	tc := ToolCall{Name: strings.TrimSpace(s[j : j+b])}
	if !validName(tc.Name) {
		return p.invalid(nil, false)
	}
	args, end, st := gemmaValue(s, j+b)
	switch st {
	case scanEOF:
		return p.eof(&tc, false)
	case scanInvalid:
		return p.invalid(&tc, false)
	}
	tc.Arguments = args
	p.calls = append(p.calls, tc)
	return p.closeWith(end, "<tool_call|>"), true
}

const gemmaQuote = `<|"|>`

// gemmaValue converts one Gemma tool-call value at s[i] to JSON.
func gemmaValue(s string, i int) (string, int, scanStatus) {
	i = skipSpace(s, i)
	if i >= len(s) {
		return "", len(s), scanEOF
	}
	switch {
	case strings.HasPrefix(s[i:], gemmaQuote):
		k := strings.Index(s[i+len(gemmaQuote):], gemmaQuote)
		if k < 0 {
			return "", len(s), scanEOF
		}
		a := i + len(gemmaQuote)
		return jsonString(s[a : a+k]), a + k + len(gemmaQuote), scanOK
	case strings.HasPrefix(gemmaQuote, s[i:]):
		return "", len(s), scanEOF
	case s[i] == '{' || s[i] == '[':
		open, closing := s[i], byte('}')
		if open == '[' {
			closing = ']'
		}
		var b strings.Builder
		b.WriteByte(open)
		i++
		n := 0
		for {
			i = skipSpace(s, i)
			if i >= len(s) {
				return "", len(s), scanEOF
			}
			if s[i] == closing {
				b.WriteByte(closing)
				return b.String(), i + 1, scanOK
			}
			if n > 0 {
				if s[i] != ',' {
					return "", i, scanInvalid
				}
				i = skipSpace(s, i+1)
				b.WriteByte(',')
			}
			if open == '{' {
				var key string
				if strings.HasPrefix(s[i:], gemmaQuote) {
					v, e, st := gemmaValue(s, i)
					if st != scanOK {
						return "", e, st
					}
					key, i = decodeJSONString(v), e
				} else {
					c := strings.IndexByte(s[i:], ':')
					if c < 0 {
						return "", len(s), scanEOF
					}
					key = strings.TrimSpace(s[i : i+c])
					i += c
				}
				i = skipSpace(s, i)
				if i >= len(s) {
					return "", len(s), scanEOF
				}
				if s[i] != ':' {
					return "", i, scanInvalid
				}
				i++
				b.WriteString(jsonString(key) + ":")
			}
			v, e, st := gemmaValue(s, i)
			if st != scanOK {
				return "", e, st
			}
			b.WriteString(v)
			i = e
			n++
		}
	default:
		e := i
		for e < len(s) && !strings.ContainsRune(",}]", rune(s[e])) && !strings.HasPrefix(s[e:], "<") {
			e++
		}
		if e >= len(s) {
			return "", len(s), scanEOF
		}
		raw := strings.TrimSpace(s[i:e])
		if !isJSONValue(raw) {
			return jsonString(raw), e, scanOK
		}
		return raw, e, scanOK
	}
}
