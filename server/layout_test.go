package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// packageVars are the package-level variables the server may have: each is
// written once when the package loads and only read afterwards, so two
// Servers in one process never share state through them. Anything a
// Server changes belongs to the Server (or the instance or model entry it
// concerns).
var packageVars = map[string]string{
	"ErrClosed":     "a sentinel error (internal/router)",
	"ErrNotLoaded":  "a sentinel error (internal/router)",
	"errNotRegular": "a sentinel error",
	"errStreamed":   "a sentinel error",
	"junkDirs":      "a table of folder names the file tools never walk",
	"promLabel":     "a strings.Replacer's method value",
	"fuzzyReplacer": "a strings.Replacer",
	"baseEnvNames":  "the variables the tools' commands get by default",
	"errGitDir":     "a sentinel error",
	"genParams":     "the table of numeric generation parameters",
	"userMarkers":   "a table of the texts that open a user message",
	"ErrTooMany":    "a sentinel error (internal/wire)",
	"errNotStrings": "a sentinel error (internal/wire)",
}

// TestNoPackageState keeps the server's state in the Server: no file
// registers anything from init, and the only package-level variables are
// the read-only ones of packageVars.
func TestNoPackageState(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	inner, err := filepath.Glob("internal/*/*.go") // the server's own rooms
	require.NoError(t, err)
	files = append(files, inner...)
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				assert.False(t, d.Recv == nil && d.Name.Name == "init", "%s: func init; build what the server needs in New", fset.Position(d.Pos()))
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, spec := range d.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						seen[n.Name] = true
						_, ok := packageVars[n.Name]
						assert.True(t, ok, "%s: package-level var %s; keep state in the Server, or add it to packageVars if it is never written after the package loads",
							fset.Position(n.Pos()), n.Name)
					}
				}
			}
		}
	}
	for name := range packageVars {
		assert.True(t, seen[name], "packageVars lists %s, which is gone", name)
	}
}
