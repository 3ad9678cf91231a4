package chat

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// scanStatus says how far a scan of a JSON value got.
type scanStatus int

const (
	scanOK      scanStatus = iota // a complete value was read
	scanEOF                       // the input ended inside the value
	scanInvalid                   // the input is not JSON at the returned position
)

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(s string, i int) int {
	for i < len(s) && isJSONSpace(s[i]) {
		i++
	}
	return i
}

// scanJSONString reads a JSON string starting at the quote at s[i]. It
// returns the index after the closing quote.
func scanJSONString(s string, i int) (int, scanStatus) {
	if i >= len(s) {
		return i, scanEOF
	}
	if s[i] != '"' {
		return i, scanInvalid
	}
	i++
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, scanOK
		case c == '\\':
			if i+1 >= len(s) {
				return len(s), scanEOF
			}
			e := s[i+1]
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 0; k < 4; k++ {
					if i+2+k >= len(s) {
						return len(s), scanEOF
					}
					if !isHex(s[i+2+k]) {
						return i + 2 + k, scanInvalid
					}
				}
				i += 6
			default:
				return i + 1, scanInvalid
			}
		case c < 0x20:
			return i, scanInvalid
		default:
			i++
		}
	}
	return len(s), scanEOF
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanJSONNumber reads a JSON number at s[i].
func scanJSONNumber(s string, i int) (int, scanStatus) {
	start := i
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return i, scanEOF
	}
	var st scanStatus
	if s[i] == '0' {
		i++
	} else if i, st = scanDigits(s, i); st != scanOK {
		return i, st
	}
	if i < len(s) && s[i] == '.' {
		if i, st = scanDigits(s, i+1); st != scanOK {
			return i, st
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i, st = scanDigits(s, i); st != scanOK {
			return i, st
		}
	}
	if i == len(s) && start < i {
		// A number running into the end of the input may continue.
		return i, scanEOF
	}
	return i, scanOK
}

// scanDigits reads one or more decimal digits at s[i].
func scanDigits(s string, i int) (int, scanStatus) {
	if i >= len(s) {
		return i, scanEOF
	}
	if s[i] < '0' || s[i] > '9' {
		return i, scanInvalid
	}
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i, scanOK
}

// scanJSONValue reads one JSON value starting at s[i] (no leading space).
// It returns the index after the value. With scanEOF the index is len(s);
// with scanInvalid it is where the input went wrong.
func scanJSONValue(s string, i int) (int, scanStatus) {
	// stack of open containers: '{' or '['; state per level tracks what is
	// expected next.
	type level struct {
		kind  byte
		state int // 0 first item or close, 1 ':' (object), 2 value, 3 ',' or close, 4 key (object)
	}
	var stack []level
	for {
		if len(stack) > 0 {
			i = skipSpace(s, i)
			if i >= len(s) {
				return len(s), scanEOF
			}
			top := &stack[len(stack)-1]
			object := top.kind == '{'
			closer := byte(']')
			if object {
				closer = '}'
			}
			c := s[i]
			switch {
			case (top.state == 0 || top.state == 3) && c == closer:
				stack = stack[:len(stack)-1]
				i++
				goto closed
			case top.state == 3:
				if c != ',' {
					return i, scanInvalid
				}
				i++
				top.state = 2
				if object {
					top.state = 4
				}
				continue
			case object && (top.state == 0 || top.state == 4):
				j, st := scanJSONString(s, i)
				if st != scanOK {
					return j, st
				}
				i = j
				top.state = 1
				continue
			case top.state == 1:
				if c != ':' {
					return i, scanInvalid
				}
				i++
				top.state = 2
				continue
			}
			// A value follows (state 2, or the first item of an array).
			top.state = 3
		}
		// read a value at s[i]
		if i >= len(s) {
			return len(s), scanEOF
		}
		switch c := s[i]; {
		case c == '{' || c == '[':
			stack = append(stack, level{kind: c})
			i++
			continue
		case c == '"':
			j, st := scanJSONString(s, i)
			if st != scanOK {
				return j, st
			}
			i = j
		case c == '-' || c >= '0' && c <= '9':
			j, st := scanJSONNumber(s, i)
			if st == scanInvalid {
				return j, st
			}
			if st == scanEOF {
				return len(s), scanEOF
			}
			i = j
		case c == 't' || c == 'f' || c == 'n':
			word := "null"
			if c == 't' {
				word = "true"
			} else if c == 'f' {
				word = "false"
			}
			for k := 0; k < len(word); k++ {
				if i+k >= len(s) {
					return len(s), scanEOF
				}
				if s[i+k] != word[k] {
					return i + k, scanInvalid
				}
			}
			i += len(word)
		default:
			return i, scanInvalid
		}
	closed:
		if len(stack) == 0 {
			return i, scanOK
		}
	}
}

// jsonString encodes s as a JSON string literal without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// decodeJSONString decodes a complete JSON string literal.
func decodeJSONString(lit string) string {
	var v string
	if err := json.Unmarshal([]byte(lit), &v); err != nil {
		return ""
	}
	return v
}

// completeRunes cuts an incomplete UTF-8 sequence off the end of s, so that
// a prefix of a longer text is encoded the same way as the whole.
func completeRunes(s string) string {
	for k := 1; k <= utf8.UTFMax && k <= len(s); k++ {
		c := s[len(s)-k]
		if c < utf8.RuneSelf {
			return s
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRuneInString(s[len(s)-k:]) {
				return s[:len(s)-k]
			}
			return s
		}
	}
	return s
}
