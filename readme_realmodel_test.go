//go:build realmodel

package llama_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestRealModelReadmeEmbeddings holds the README's embedding options against
// all-MiniLM-L6-v2: with the default context and 8 sequences, each gets
// the model's 512 positions and a text of several hundred tokens embeds;
// with a context of 8*64, the same text is an error (not a crash).
func TestRealModelReadmeEmbeddings(t *testing.T) {
	ctx := context.Background()
	model := modeltest.LoadPath(t, testenv.RealModel(t, "all-minilm-l6-v2"), llama.ModelOptions{})
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 30)
	toks, err := model.Tokenize(long, llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	require.Greater(t, len(toks), 300)
	require.LessOrEqual(t, len(toks), 512)
	for _, tc := range []struct {
		name string
		opts llama.ContextOptions
		ok   bool
	}{
		{"README", llama.ContextOptions{Embeddings: true, Pooling: llama.PoolingMean, Sequences: 8}, true},
		{"a context too small", llama.ContextOptions{Embeddings: true, Pooling: llama.PoolingMean, ContextSize: 8 * 64, Sequences: 8}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ectx, err := model.NewContext(tc.opts)
			require.NoError(t, err)
			defer ectx.Close()
			vecs, err := ectx.Embed(ctx, []string{"first text", long}, llama.EmbedOptions{})
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Len(t, vecs, 2)
			assert.Len(t, vecs[1], len(vecs[0]))
		})
	}
}
