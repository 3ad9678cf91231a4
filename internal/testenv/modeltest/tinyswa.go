package modeltest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// TinySWAWindow is the sliding window of TinySWA's model.
const TinySWAWindow = 32

// TinySWAPath writes a tiny random gemma3 model (llama's SPM vocabulary)
// whose even layers see a sliding window of TinySWAWindow positions, for
// cheap tests of the windowed KV cache: with a micro-batch of 32 its
// window's cache is 256 cells, so any context above that is windowed.
func TinySWAPath(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-swa.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{
		Arch: "gemma3", VocabFrom: testenv.Model(t, filepath.Join("vocab", "ggml-vocab-llama-spm.gguf")),
		NEmbd: 64, NLayer: 2, NHead: 2, NCtx: 4096, SlidingWindow: TinySWAWindow, Seed: 7,
	}))
	return path
}

// TinySWA loads TinySWAPath's model on the CPU, closed when the test ends.
func TinySWA(t testing.TB) *llama.Model {
	t.Helper()
	return LoadPath(t, TinySWAPath(t), llama.ModelOptions{CPUOnly: true})
}
