package llama

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCutLongRuns(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want []string
	}{
		{"abcdef", 2, []string{"ab", "cd", "ef"}},
		{"ab cd", 2, []string{"ab cd"}},
		{"abc de", 2, []string{"ab", "c de"}},
		{"", 2, []string{""}},
	} {
		assert.Equal(t, c.want, cutLongRuns(c.in, c.n), c.in)
	}
}
