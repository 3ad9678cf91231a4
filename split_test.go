package llama_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// writeSplits writes stories260K as n split files in llama.cpp's layout
// (name-0000i-of-0000n.gguf, split.* keys) and returns their paths.
func writeSplits(t *testing.T, n int) []string {
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

// TestSplitModel loads a model stored in three files, from the first
// split's path and from the explicit list, and generates the same story.
func TestSplitModel(t *testing.T) {
	paths := writeSplits(t, 3)
	for name, load := range map[string]func() (*llama.Model, error){
		"first split": func() (*llama.Model, error) {
			return llama.LoadModel(context.Background(), paths[0], llama.ModelOptions{})
		},
		"explicit list": func() (*llama.Model, error) {
			return llama.LoadModelSplits(context.Background(), paths, llama.ModelOptions{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := load()
			require.NoError(t, err)
			defer m.Close()
			c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
			out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 24})
			assert.True(t, strings.HasPrefix(out, ", there was a little girl named Lily"), out)
		})
	}
	// A missing split is an error, not a crash.
	require.NoError(t, os.Remove(paths[2]))
	_, err := llama.LoadModel(context.Background(), paths[0], llama.ModelOptions{})
	assert.ErrorIs(t, err, llama.ErrLoad)
}
