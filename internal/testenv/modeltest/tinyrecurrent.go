package modeltest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// TinyRecurrentPath writes a tiny random Mamba model (llama's SPM
// vocabulary), which llama.cpp runs with a recurrent memory: one state
// per sequence, whose tail cannot be removed, for cheap tests of what
// recurrent models need (context checkpoints instead of dropping a
// sequence's tail).
func TinyRecurrentPath(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-mamba.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{
		Arch: "mamba", VocabFrom: testenv.Model(t, filepath.Join("vocab", "ggml-vocab-llama-spm.gguf")),
		NEmbd: 64, NLayer: 2, NCtx: 4096, Seed: 7,
	}))
	return path
}

// TinyRecurrent loads TinyRecurrentPath's model on the CPU, closed when
// the test ends.
func TinyRecurrent(t testing.TB) *llama.Model {
	t.Helper()
	return LoadPath(t, TinyRecurrentPath(t), llama.ModelOptions{CPUOnly: true})
}

// TinyHybridPath writes a tiny random Jamba model (llama's SPM
// vocabulary): a hybrid of Mamba layers (a recurrent state) and attention
// layers (a KV cache), as llama.cpp runs Jamba, Granite hybrids or
// Qwen3-Next.
func TinyHybridPath(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-jamba.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{
		Arch: "jamba", VocabFrom: testenv.Model(t, filepath.Join("vocab", "ggml-vocab-llama-spm.gguf")),
		NEmbd: 64, NLayer: 2, NHead: 2, NCtx: 4096, Seed: 7,
	}))
	return path
}

// TinyHybrid loads TinyHybridPath's model on the CPU, closed when the test
// ends.
func TinyHybrid(t testing.TB) *llama.Model {
	t.Helper()
	return LoadPath(t, TinyHybridPath(t), llama.ModelOptions{CPUOnly: true})
}
