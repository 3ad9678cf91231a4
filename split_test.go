package llama_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testsplit"
)

// TestSplitModel loads a model stored in three files, from the first
// split's path and from the explicit list, and generates the same story.
func TestSplitModel(t *testing.T) {
	paths := testsplit.Stories(t, 3)
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
