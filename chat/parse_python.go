package chat

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// LFM2 tool-call markers.
const (
	lfmCallStart = "<|tool_call_start|>"
	lfmCallEnd   = "<|tool_call_end|>"
)

// callLFM2 reads <|tool_call_start|>[name(k=v, ...), ...]<|tool_call_end|>
// where the values are Python literals (JSON's true, false and null are
// taken too). Each call is reported once its name is read; its arguments
// grow one parameter at a time.
func callLFM2(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	return p.callList(i+len(marker), lfmCallEnd, func(k int, committed bool) (int, bool, bool) {
		e := k
		for e < len(s) && (s[e] == '.' || s[e] == '-' || isIdentByte(s[e], e > k)) {
			e++
		}
		if e >= len(s) {
			return done(p.eof(nil, committed))
		}
		if s[e] != '(' || !validName(s[k:e]) {
			return done(p.invalid(nil, committed))
		}
		tc := ToolCall{Name: s[k:e]}
		var end int
		var st scanStatus
		tc.Arguments, end, st = pyKwargs(s, e+1, false)
		switch st {
		case scanEOF:
			return done(p.eof(&tc, committed))
		case scanInvalid:
			return done(p.invalid(&tc, committed))
		}
		p.calls = append(p.calls, tc)
		return end, true, true
	})
}

func isIdentByte(c byte, digits bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || digits && c >= '0' && c <= '9'
}

// pyKwargs reads Python keyword arguments k=v, ... ) at s[i] as a JSON
// object, returning it, where the arguments end and the scan status. On
// scanEOF and scanInvalid the object holds the parameters read so far and
// is left open (a prefix of the closed one). It reads two dialects:
//
//   - strict (LFM2): a key is an identifier, spaces may surround '=', the
//     values are Python literals (see pyValue) and a trailing comma is
//     allowed;
//   - loose (Llama 3.x built-in tools, read as llama.cpp reads them): a key
//     may start with a digit and is followed at once by '=' or ':', a
//     double-quoted value is a JSON string kept as written, and any other
//     value is read by pyLooseValue.
func pyKwargs(s string, i int, loose bool) (string, int, scanStatus) {
	var args xmlArgs
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return args.open(), len(s), scanEOF
		}
		if s[i] == ')' {
			return args.closed(), i + 1, scanOK
		}
		if args.n > 0 {
			if s[i] != ',' {
				return args.open(), i, scanInvalid
			}
			i = skipSpace(s, i+1)
			if !loose && i < len(s) && s[i] == ')' {
				continue // trailing comma
			}
		}
		k := i
		for k < len(s) && isIdentByte(s[k], loose || k > i) {
			k++
		}
		if k >= len(s) {
			return args.open(), len(s), scanEOF
		}
		if k == i {
			return args.open(), k, scanInvalid
		}
		key := s[i:k]
		if !loose {
			if k = skipSpace(s, k); k >= len(s) {
				return args.open(), len(s), scanEOF
			}
		}
		if s[k] != '=' && (!loose || s[k] != ':') {
			return args.open(), k, scanInvalid
		}
		var v string
		var e int
		var st scanStatus
		if loose {
			v, e, st = pyLooseValue(s, skipSpace(s, k+1))
		} else {
			v, e, st = pyValue(s, skipSpace(s, k+1))
		}
		if st != scanOK {
			return args.open(), e, st
		}
		args.addValue(key, v)
		i = e
	}
}

// pyLooseValue reads a value of the loose dialect at s[i] as JSON: a
// double-quoted JSON string as written; a single-quoted string where a
// backslash takes the next byte as it is; otherwise the text up to the next
// ',' or ')', trimmed, as JSON when it reads as JSON (True, False and None
// as JSON's literals) and as a string when not. It ends before that ',' or
// ')'.
func pyLooseValue(s string, i int) (string, int, scanStatus) {
	if i >= len(s) {
		return "", len(s), scanEOF
	}
	switch s[i] {
	case '"':
		e, st := scanJSONString(s, i)
		if st != scanOK {
			return "", e, st
		}
		return s[i:e], e, scanOK
	case '\'':
		var sb strings.Builder
		e := i + 1
		for ; e < len(s) && s[e] != '\''; e++ {
			if s[e] == '\\' && e+1 < len(s) {
				e++
			}
			sb.WriteByte(s[e])
		}
		if e >= len(s) {
			return "", len(s), scanEOF
		}
		return jsonString(sb.String()), e + 1, scanOK
	}
	e := i
	for e < len(s) && s[e] != ',' && s[e] != ')' {
		e++
	}
	if e >= len(s) {
		return "", len(s), scanEOF
	}
	raw := strings.TrimSpace(s[i:e])
	switch raw {
	case "True":
		raw = "true"
	case "False":
		raw = "false"
	case "None":
		raw = "null"
	}
	if !isJSONValue(raw) {
		raw = jsonString(raw)
	}
	return raw, e, scanOK
}

// pyValue converts the Python literal at s[i] to JSON: strings in either
// quotes, numbers, True/False/None (or true/false/null), dicts, lists and
// tuples.
func pyValue(s string, i int) (string, int, scanStatus) {
	if i >= len(s) {
		return "", len(s), scanEOF
	}
	switch c := s[i]; {
	case c == '"' || c == '\'':
		return pyString(s, i)
	case c == '{' || c == '[' || c == '(':
		closing := map[byte]byte{'{': '}', '[': ']', '(': ')'}[c]
		dict := c == '{'
		var b strings.Builder
		if dict {
			b.WriteByte('{')
		} else {
			b.WriteByte('[')
		}
		i++
		for n := 0; ; n++ {
			i = skipSpace(s, i)
			if i >= len(s) {
				return "", len(s), scanEOF
			}
			if s[i] != closing && n > 0 {
				if s[i] != ',' {
					return "", i, scanInvalid
				}
				i = skipSpace(s, i+1)
				if i >= len(s) {
					return "", len(s), scanEOF
				}
			}
			if s[i] == closing {
				if dict {
					b.WriteByte('}')
				} else {
					b.WriteByte(']')
				}
				return b.String(), i + 1, scanOK
			}
			if n > 0 {
				b.WriteString(", ")
			}
			if dict {
				if s[i] != '"' && s[i] != '\'' {
					return "", i, scanInvalid
				}
				key, e, st := pyString(s, i)
				if st != scanOK {
					return "", e, st
				}
				i = skipSpace(s, e)
				if i >= len(s) {
					return "", len(s), scanEOF
				}
				if s[i] != ':' {
					return "", i, scanInvalid
				}
				i = skipSpace(s, i+1)
				b.WriteString(key + ": ")
			}
			v, e, st := pyValue(s, i)
			if st != scanOK {
				return "", e, st
			}
			b.WriteString(v)
			i = e
		}
	case c == '-' || c >= '0' && c <= '9':
		e, st := scanJSONNumber(s, i)
		if st != scanOK {
			return "", e, st
		}
		return s[i:e], e, scanOK
	}
	e := i
	for e < len(s) && isIdentByte(s[e], true) {
		e++
	}
	if e >= len(s) {
		return "", len(s), scanEOF
	}
	switch s[i:e] {
	case "True", "true":
		return "true", e, scanOK
	case "False", "false":
		return "false", e, scanOK
	case "None", "null":
		return "null", e, scanOK
	}
	return "", i, scanInvalid
}

// pyString converts the Python string literal at s[i] (single or double
// quoted, with backslash escapes) to a JSON string.
func pyString(s string, i int) (string, int, scanStatus) {
	q := s[i]
	var b strings.Builder
	for k := i + 1; k < len(s); {
		c := s[k]
		switch {
		case c == q:
			return jsonString(b.String()), k + 1, scanOK
		case c != '\\':
			b.WriteByte(c)
			k++
			continue
		}
		if k+1 >= len(s) {
			break
		}
		e := s[k+1]
		k += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
			// A line continuation.
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if k+n > len(s) {
				return "", len(s), scanEOF
			}
			v, err := strconv.ParseUint(s[k:k+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", k, scanInvalid
			}
			b.WriteRune(rune(v))
			k += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", len(s), scanEOF
}
