// Package jsonesc writes JSON string escapes the way Python's
// json.dumps(ensure_ascii=False) does, which chat templates (tojson) and
// llama.cpp's JSON Schema grammars both rely on: only the quote, the
// backslash and control characters are escaped; everything else, non-ASCII
// included, is written as is.
package jsonesc

import (
	"fmt"
	"strings"
)

// Rune appends the JSON string encoding of r.
func Rune(sb *strings.Builder, r rune) {
	switch r {
	case '"':
		sb.WriteString(`\"`)
	case '\\':
		sb.WriteString(`\\`)
	case '\n':
		sb.WriteString(`\n`)
	case '\r':
		sb.WriteString(`\r`)
	case '\t':
		sb.WriteString(`\t`)
	case '\b':
		sb.WriteString(`\b`)
	case '\f':
		sb.WriteString(`\f`)
	default:
		if r < 0x20 {
			fmt.Fprintf(sb, `\u%04x`, r)
		} else {
			sb.WriteRune(r)
		}
	}
}

// String appends s as a quoted JSON string.
func String(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s {
		Rune(sb, r)
	}
	sb.WriteByte('"')
}
