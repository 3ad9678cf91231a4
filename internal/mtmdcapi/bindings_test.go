package mtmdcapi

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

var (
	lineComment  = regexp.MustCompile(`//[^\n]*`)
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	apiMacro     = regexp.MustCompile(`\bMTMD_API\b`)
	deprecated   = regexp.MustCompile(`DEPRECATED\(`)
	declName     = regexp.MustCompile(`\b(mtmd_[a-z0-9_]+)\s*\(`)
	preproc      = regexp.MustCompile(`(?m)^\s*#.*$`)
)

func squeeze(s string) string { return strings.Join(strings.Fields(s), "") }

// headerDecls returns the squeezed function declarations of the headers, by name.
func headerDecls(t *testing.T, paths ...string) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		s := blockComment.ReplaceAllString(string(b), "")
		s = lineComment.ReplaceAllString(s, "")
		s = preproc.ReplaceAllString(s, "")
		s = deprecated.ReplaceAllString(s, "")
		for _, d := range strings.Split(s, ";") {
			if !apiMacro.MatchString(d) {
				continue
			}
			d = d[apiMacro.FindStringIndex(d)[0]:]
			d = strings.TrimSpace(apiMacro.ReplaceAllString(d, ""))
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
// against the pinned mtmd.h and mtmd-helper.h, and checks that each Go
// function takes one argument per C parameter.
func TestBindingsMatchHeader(t *testing.T) {
	src := testenv.LlamaSrc(t)
	decls := headerDecls(t, filepath.Join(src, "tools", "mtmd", "mtmd.h"), filepath.Join(src, "tools", "mtmd", "mtmd-helper.h"))
	require.Contains(t, decls, "mtmd_tokenize")

	b, err := os.ReadFile("mtmdcapi.go")
	require.NoError(t, err)
	written := map[string]string{}
	commentDecl := regexp.MustCompile(`(?m)^\s*// (.*\bmtmd_[a-z0-9_]+\s*\(.*\);)\s*$`)
	for _, m := range commentDecl.FindAllStringSubmatch(string(b), -1) {
		name := declName.FindStringSubmatch(m[1])
		require.NotNil(t, name, m[1])
		written[name[1]] = strings.TrimSuffix(m[1], ";")
	}
	for _, bd := range registry {
		t.Run(bd.name, func(t *testing.T) {
			c, ok := written[bd.name]
			require.True(t, ok, "no C declaration written above the binding of %s", bd.name)
			h, ok := decls[bd.name]
			require.True(t, ok, "%s is not declared in the pinned headers", bd.name)
			assert.Equal(t, h, squeeze(c), "declaration above the binding differs from the header")
			params := strings.TrimSuffix(strings.SplitN(h, "(", 2)[1], ")")
			n := 0
			if params != "void" && params != "" {
				n = strings.Count(params, ",") + 1
			}
			fn := reflect.TypeOf(bd.fn).Elem()
			assert.Equal(t, n, fn.NumIn(), "Go binding of %s takes %d arguments, C takes %d", bd.name, fn.NumIn(), n)
		})
	}
}

// TestSymbolsOfHeader checks that lib.MTMDSymbols (what the installer
// requires libmtmd to export) finds every bound function.
func TestSymbolsOfHeader(t *testing.T) {
	syms, err := lib.MTMDSymbols(testenv.LlamaSrc(t))
	require.NoError(t, err)
	for _, s := range Symbols() {
		assert.Contains(t, syms, s)
	}
}
