package utf8tail

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestComplete(t *testing.T) {
	for _, c := range []struct {
		in string
		n  int
	}{
		{"abc", 3}, {"", 0}, {"a\xc3", 1}, {"a\xc3\xa9", 3}, {"\xe2\x82", 0}, {"\xe2\x82\xac", 3},
		{"x\xf0\x9f\x98", 1}, {"x\xf0\x9f\x98\x80", 5}, {"\x80", 1}, {"\x80\x80\x80\x80", 4},
	} {
		assert.Equal(t, c.n, Complete(c.in), "%q", c.in)
		assert.Equal(t, c.n, Complete([]byte(c.in)), "%q as bytes", c.in)
	}
}
