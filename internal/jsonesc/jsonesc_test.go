package jsonesc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":           `"plain"`,
		"q\"b\\s":         `"q\"b\\s"`,
		"n\nr\rt\tb\bf\f": `"n\nr\rt\tb\bf\f"`,
		"\x01\x1f":        `"\u0001\u001f"`,
		"héllo ✓ 🙂 <&>":   `"héllo ✓ 🙂 <&>"`,
	} {
		var sb strings.Builder
		String(&sb, in)
		assert.Equal(t, want, sb.String(), "%q", in)
	}
}
