package llama_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// TestLazyMode loads a Gemma 4 layout with per-layer token embeddings, the
// tensor llama.cpp marks for reading on demand: LazyOn reads it so (as
// llama.cpp's log says), LazyAuto and LazyOff keep it resident at this
// size, and the text is the same in every mode.
func TestLazyMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gemma4.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "gemma4",
		VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf"),
		NEmbd:     64, NLayer: 6, NHead: 4, NHeadKV: 2, SlidingWindow: 32, SlidingWindowPattern: 3,
		SharedKVLayers: 3, PerLayerEmbd: 16, Seed: 3}))
	var texts []string
	for _, mode := range []llama.LazyMode{llama.LazyAuto, llama.LazyOn, llama.LazyOff} {
		text, log, err := greedyText(t, path, llama.ModelOptions{Lazy: mode})
		require.NoError(t, err)
		require.NotEmpty(t, text)
		texts = append(texts, text)
		if mode == llama.LazyOn {
			assert.Contains(t, log, "tensor per_layer_token_embd.weight (size = ")
			assert.Contains(t, log, "lazy read enabled")
		} else {
			assert.NotContains(t, log, "lazy read enabled", "mode %d", mode)
		}
	}
	assert.Equal(t, texts[0], texts[1])
	assert.Equal(t, texts[0], texts[2])

	_, _, err := greedyText(t, path, llama.ModelOptions{Lazy: 7})
	var le *llama.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, llama.CodeInvalid, le.Code)
}
