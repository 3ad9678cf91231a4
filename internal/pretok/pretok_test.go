package pretok

import (
	"strings"
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
		{"ééé", 2, []string{"éé", "é"}},
	} {
		assert.Equal(t, c.want, CutLongRuns(c.in, c.n), c.in)
	}
	long := "x " + strings.Repeat("a", 3*MaxRun) + " y"
	pieces := CutLongRuns(long, MaxRun)
	assert.Len(t, pieces, 3)
	assert.Equal(t, long, strings.Join(pieces, ""))
}
