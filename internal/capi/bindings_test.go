package capi

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
)

var (
	lineComment  = regexp.MustCompile(`//[^\n]*`)
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	apiMacro     = regexp.MustCompile(`\b(LLAMA_API|GGML_API|GGML_BACKEND_API)\b`)
	deprecated   = regexp.MustCompile(`DEPRECATED\(`)
	declName     = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
)

// squeeze drops all white space so that declarations compare regardless of
// how they are wrapped and aligned.
func squeeze(s string) string { return strings.Join(strings.Fields(s), "") }

// headerDecls returns the squeezed C declarations of the given headers.
func headerDecls(t *testing.T, paths ...string) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		s := blockComment.ReplaceAllString(string(b), "")
		s = lineComment.ReplaceAllString(s, "")
		s = deprecated.ReplaceAllString(s, "")
		s = apiMacro.ReplaceAllString(s, "")
		for _, d := range strings.Split(s, ";") {
			d = strings.TrimSpace(d)
			if i := strings.LastIndex(d, "\n\n"); i >= 0 {
				d = d[i:]
			}
			m := declName.FindStringSubmatch(d)
			if m == nil {
				continue
			}
			out[m[1]] = squeeze(d)
		}
	}
	return out
}

// TestBindingsMatchHeader holds the C declaration written above each binding
// against the pinned header (the same function, spelled the same way), and
// checks that the Go function takes one argument per C parameter.
func TestBindingsMatchHeader(t *testing.T) {
	src := testenv.LlamaSrc(t)
	decls := headerDecls(t, filepath.Join(src, "include", "llama.h"),
		filepath.Join(src, "ggml", "include", "ggml-backend.h"), filepath.Join(src, "ggml", "include", "ggml.h"),
		filepath.Join(src, "ggml", "include", "ggml-cpu.h"))
	require.Contains(t, decls, "llama_decode")

	// C declarations written in the binding files, by symbol.
	written := map[string]string{}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	commentDecl := regexp.MustCompile(`(?m)^\s*// (.*\b(llama|ggml)_[a-z0-9_]+\s*\(.*\);)\s*$`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range commentDecl.FindAllStringSubmatch(string(b), -1) {
			name := declName.FindStringSubmatch(strings.SplitN(m[1], "(", 2)[0] + "(")
			require.NotNil(t, name, m[1])
			written[name[1]] = strings.TrimSuffix(m[1], ";")
		}
	}
	require.NotEmpty(t, registry)
	bindings := slices.Clone(registry)
	for name, fn := range CPUBindings {
		bindings = append(bindings, binding{fn: fn, name: name})
	}
	for _, b := range bindings {
		t.Run(b.name, func(t *testing.T) {
			c, ok := written[b.name]
			require.True(t, ok, "no C declaration written above the binding of %s", b.name)
			h, ok := decls[b.name]
			require.True(t, ok, "%s is not declared in the pinned headers", b.name)
			assert.Equal(t, h, squeeze(c), "declaration above the binding differs from the header")
			params := strings.TrimSuffix(strings.SplitN(h, "(", 2)[1], ")")
			n := 0
			if params != "void" && params != "" {
				n = strings.Count(params, ",") + 1
			}
			fn := reflect.TypeOf(b.fn).Elem()
			assert.Equal(t, n, fn.NumIn(), "Go binding of %s takes %d arguments, C takes %d", b.name, fn.NumIn(), n)
		})
	}
}
