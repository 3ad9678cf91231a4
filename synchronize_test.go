package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestSynchronize: Synchronize before any decode, after one and twice
// in a row returns nil and leaves the outputs as the decode made them;
// on a context in use it is ErrBusy's, after Close ErrClosed's, and on a
// nil context ErrInvalid's.
func TestSynchronize(t *testing.T) {
	m := loadModel(t, "stories260K.gguf")
	decode := promptDecoder(t, m)
	ref := modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 256, Threads: 1})
	want := decode(ref)

	c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
	require.NoError(t, err)
	require.NoError(t, c.Synchronize(), "before any decode")
	b := llama.NewBatch(8, 1)
	prompt, err := m.Tokenize("Once upon a time there was", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	for i, tok := range prompt {
		require.NoError(t, b.Add(tok, i, 0, i == len(prompt)-1))
	}
	require.NoError(t, c.Decode(context.Background(), b))
	require.NoError(t, c.Synchronize())
	require.NoError(t, c.Synchronize(), "twice")
	got, err := c.Logits(len(prompt) - 1)
	require.NoError(t, err)
	assert.Equal(t, want, got, "the logits after Synchronize")

	// A Generate holds the context: Synchronize meanwhile is refused.
	for range c.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 1}).Seq() {
		assert.ErrorIs(t, c.Synchronize(), llama.ErrBusy)
		break
	}
	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.Synchronize(), llama.ErrClosed)
	var nilCtx *llama.Context
	assert.ErrorIs(t, nilCtx.Synchronize(), llama.ErrInvalid)
}
