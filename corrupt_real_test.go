//go:build realmodel

package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf/gguftest"
	"github.com/x/llama/internal/testenv"
)

// TestLoadCorruptRealModel loads damaged copies of Gemma 3 270M: each is
// an ErrLoad naming the file, never a crash of the process (llama.cpp
// aborts on some of them, which the Go-side check before the load stops).
func TestLoadCorruptRealModel(t *testing.T) {
	src := testenv.RealModel(t, "gemma3-270m")
	for _, c := range gguftest.Corruptions(t, src) {
		t.Run(c.Name, func(t *testing.T) {
			p := gguftest.WriteCorrupt(t, src, t.TempDir(), "corrupt.gguf", c)
			m, err := llama.LoadModel(context.Background(), p, llama.ModelOptions{CPUOnly: true})
			if err == nil {
				m.Close()
			}
			require.ErrorIs(t, err, llama.ErrLoad)
			require.ErrorContains(t, err, p)
		})
	}
}
