package llama_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
)

// TestLoRA writes a LoRA adapter for stories260K, applies it at several
// scales and removes it, without reloading the model.
func TestLoRA(t *testing.T) {
	m := stories(t)
	f, err := gguf.Open(m.Path())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(path, f, nil, 4, 8, 1, 1))
	a, err := m.LoadAdapter(path)
	require.NoError(t, err)
	defer a.Close()
	typ, ok := a.Meta("adapter.type")
	assert.True(t, ok)
	assert.Equal(t, "lora", typ)

	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	base := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16})
	require.NoError(t, c.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 4}}))
	with := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16})
	assert.NotEqual(t, base, with)
	require.NoError(t, c.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 0}}))
	assert.Equal(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))
	require.NoError(t, c.SetAdapters(nil))
	assert.Equal(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))

	// A control vector changes the output, and clearing it restores it.
	cv := make([]float32, 64*4)
	for i := range cv {
		cv[i] = float32(i%7) - 3
	}
	require.NoError(t, c.SetControlVector(cv, 1, 4))
	assert.NotEqual(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))
	require.NoError(t, c.SetControlVector(nil, 0, 0))
	assert.Equal(t, base, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}))
	assert.ErrorIs(t, c.SetControlVector(make([]float32, 63), 1, 2), llama.ErrInvalid)
}
