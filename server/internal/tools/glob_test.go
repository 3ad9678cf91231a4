package tools

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// globMatchRef is the plain recursive reading of globMatch's rules, for
// short inputs only: exponential, and its depth grows with the input.
func globMatchRef(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		run := 0
		for run < len(p) && p[run] == '*' {
			run++
		}
		rest := p[run:]
		if run == 1 {
			for k := 0; ; k++ {
				if globMatchRef(rest, s[k:]) {
					return true
				}
				if k >= len(s) || s[k] == '/' {
					return false
				}
			}
		}
		if strings.HasPrefix(rest, "/") && globMatchRef(rest[1:], s) {
			return true
		}
		for k := 0; k <= len(s); k++ {
			if globMatchRef(rest, s[k:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && s[0] != '/' && globMatchRef(p[1:], s[1:])
	case '[':
		end := 1
		if end < len(p) && (p[end] == ']' || p[end] == '-') {
			end++
		}
		for end < len(p) && p[end] != ']' {
			end++
		}
		if end < len(p) {
			return s != "" && classMatch(s[0], p[1:end]) && globMatchRef(p[end+1:], s[1:])
		}
		return s != "" && s[0] == '[' && globMatchRef(p[1:], s[1:])
	}
	return s != "" && p[0] == s[0] && globMatchRef(p[1:], s[1:])
}

func TestGlobMatchAgainstReference(t *testing.T) {
	for _, tc := range []struct{ pattern, s string }{
		{"**/a", "a"}, {"**/a", "x/y/a"}, {"**/a", "/a"}, {"a/**", "a/"}, {"a/**/b", "a/b"},
		{"***/a", "x/a"}, {"*/", "x/"}, {"[]]", "]"}, {"[-a]", "-"}, {"[!/]", "/"}, {"[ab", "[ab"},
		{"**", ""}, {"*", "a/b"}, {"?", "/"}, {"a[b-d]?", "ac/"}, {"**/**/x", "x"},
	} {
		assert.Equal(t, globMatchRef(tc.pattern, tc.s), globMatch(tc.pattern, tc.s), "%q %q", tc.pattern, tc.s)
	}
}

// FuzzGlobMatch compares globMatch with the recursive reference on short
// inputs over a small alphabet where every rule applies.
func FuzzGlobMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"**/a", "b/a"}, {"*.go", "x.go"}, {"a/*/b", "a/x/b"}, {"[!a-c]?", "d/"}, {"**b**", "ab/b"},
		{"[]a]*", "]x"}, {"***/", "/"}, {"?*?", "ab"}, {"[a", "[a"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 12 || len(s) > 12 {
			return
		}
		if got, want := globMatch(pattern, s), globMatchRef(pattern, s); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, reference %v", pattern, s, got, want)
		}
	})
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"*.go", "a/b/c.go", true},
		{"*.go", "a/b/c.gox", false},
		{"src/*.go", "x/src/a.go", true},
		{"src/*.go", "src/a/b.go", false},
		{"src/*.go", "src/a.go", true},
		{"src/**/*.go", "src/a/b.go", true},
		{"**", "anything/at/all", true},
		{"/src/*.go", "src/a.go", false},
		{"f?o.txt", "fao.txt", true},
		{"[abc].txt", "b.txt", true},
		{"[!abc].txt", "b.txt", false},
		{"[a-c]x", "dx", false},
		{strings.Repeat("*", 40) + "z", strings.Repeat("a", 60), false}, // no exponential blow-up
		{strings.Repeat("**a", 20), strings.Repeat("a", 80) + "b", false},
	} {
		assert.Equal(t, tc.want, pathGlobMatch(tc.pattern, tc.path), "%s %s", tc.pattern, tc.path)
	}
}

// TestGlobMatchFlood runs the matcher on patterns far past the tools'
// cap on a pattern's length: no recursion, so no stack to overflow.
func TestGlobMatchFlood(t *testing.T) {
	flood := strings.Repeat("**", 1<<20)
	assert.True(t, pathGlobMatch(flood, "src/b.go"))
	assert.True(t, globMatch(flood+"/b.go", "src/b.go"))
	assert.True(t, globMatch(strings.Repeat("**/", 1<<20)+"b.go", "src/b.go"))
	assert.False(t, globMatch(strings.Repeat("*?", 1<<20), "src/b.go"))
}
