// Package utf8tail finds where text generated token by token can be cut:
// a token's piece may end in the middle of a multi-byte UTF-8 character,
// which the next token completes.
package utf8tail

import "unicode/utf8"

// Complete returns how many leading bytes of b can be sent: all but an
// incomplete UTF-8 character at the end. Invalid bytes count as whole:
// nothing that follows completes them.
func Complete[T string | []byte](b T) int {
	n := len(b)
	for k := 1; k <= 3 && k <= n; k++ {
		c := b[n-k]
		if c < 0x80 {
			return n
		}
		if utf8.RuneStart(c) {
			need := 2
			if c >= 0xF0 {
				need = 4
			} else if c >= 0xE0 {
				need = 3
			} else if c < 0xC0 {
				return n
			}
			if k < need {
				return n - k
			}
			return n
		}
	}
	return n
}
