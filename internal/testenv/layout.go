package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// CStruct pairs a Go mirror of a C struct with the struct's C name and the C
// names of its fields, in order (Go padding fields named _ are skipped).
type CStruct struct {
	C      string
	GoType any
	Fields []string
}

// CheckLayouts compiles a probe that includes headers (found in the given
// folders of the pinned llama.cpp source) and holds the size, alignment and
// every field offset and size of each Go mirror against what the C compiler
// says.
func CheckLayouts(t *testing.T, headers, includeDirs []string, layouts []CStruct) {
	t.Helper()
	cc := CC(t)
	src := LlamaSrc(t)
	var prog bytes.Buffer
	prog.WriteString("#include <stdio.h>\n#include <stddef.h>\n")
	for _, h := range headers {
		fmt.Fprintf(&prog, "#include %q\n", h)
	}
	prog.WriteString("int main(void){\n")
	for _, s := range layouts {
		fmt.Fprintf(&prog, "printf(\"%s|sizeof|%%zu\\n\", sizeof(%s));\n", s.C, s.C)
		fmt.Fprintf(&prog, "printf(\"%s|alignof|%%zu\\n\", _Alignof(%s));\n", s.C, s.C)
		for _, f := range s.Fields {
			fmt.Fprintf(&prog, "printf(\"%s|%s|%%zu\\n\", offsetof(%s, %s));\n", s.C, f, s.C, f)
			fmt.Fprintf(&prog, "printf(\"%s|%s.size|%%zu\\n\", sizeof(((%s*)0)->%s));\n", s.C, f, s.C, f)
		}
	}
	prog.WriteString("return 0;}\n")
	dir := t.TempDir()
	cfile := filepath.Join(dir, "layout.c")
	require.NoError(t, os.WriteFile(cfile, prog.Bytes(), 0o644))
	exe := filepath.Join(dir, "layout")
	args := []string{"-std=c11"}
	for _, d := range includeDirs {
		args = append(args, "-I", filepath.Join(src, d))
	}
	out, err := exec.Command(cc, append(args, "-o", exe, cfile)...).CombinedOutput()
	require.NoError(t, err, "compiling the layout probe: %s", out)
	out, err = exec.Command(exe).Output()
	require.NoError(t, err)
	want := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "|")
		require.Len(t, parts, 3)
		n, err := strconv.ParseUint(parts[2], 10, 64)
		require.NoError(t, err)
		want[parts[0]+"|"+parts[1]] = n
	}
	for _, s := range layouts {
		t.Run(s.C, func(t *testing.T) {
			typ := reflect.TypeOf(s.GoType)
			require.Equal(t, want[s.C+"|sizeof"], uint64(typ.Size()), "sizeof")
			require.Equal(t, want[s.C+"|alignof"], uint64(typ.Align()), "alignof")
			var goFields []reflect.StructField
			for i := range typ.NumField() {
				if f := typ.Field(i); f.Name != "_" {
					goFields = append(goFields, f)
				}
			}
			require.Len(t, goFields, len(s.Fields), "field count")
			for i, f := range goFields {
				c := s.Fields[i]
				require.Equal(t, want[s.C+"|"+c], uint64(f.Offset), "offset of %s (Go %s)", c, f.Name)
				require.Equal(t, want[s.C+"|"+c+".size"], uint64(f.Type.Size()), "size of %s (Go %s)", c, f.Name)
			}
		})
	}
}
