// Package testsplit writes split models for tests.
package testsplit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// Stories writes stories260K as n split files in llama.cpp's layout
// (name-0000i-of-0000n.gguf, split.* keys) in a temporary folder of t and
// returns their paths.
func Stories(t *testing.T, n int) []string {
	t.Helper()
	src := testenv.Model(t, "stories260K.gguf")
	f, err := gguf.Open(src)
	require.NoError(t, err)
	r, err := os.Open(src)
	require.NoError(t, err)
	defer r.Close()
	dir := t.TempDir()
	var paths []string
	per := (len(f.Tensors) + n - 1) / n
	for i := range n {
		w := gguf.NewWriter()
		if i == 0 {
			w.CopyKV(f, func(k string) bool { return strings.HasPrefix(k, "split.") })
		}
		w.SetKV("split.no", uint16(i))
		w.SetKV("split.count", uint16(n))
		w.SetKV("split.tensors.count", int32(len(f.Tensors)))
		for _, ti := range f.Tensors[i*per : min((i+1)*per, len(f.Tensors))] {
			data, err := f.TensorData(r, ti.Name)
			require.NoError(t, err)
			require.NoError(t, w.AddTensor(ti.Name, ti.Shape, ti.Type, data))
		}
		p := filepath.Join(dir, fmt.Sprintf("stories-%05d-of-%05d.gguf", i+1, n))
		require.NoError(t, w.WriteFile(p))
		paths = append(paths, p)
	}
	return paths
}
