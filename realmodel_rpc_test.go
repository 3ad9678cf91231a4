//go:build realmodel && rpc

package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestRealModelRPCDeadWorkerEncode runs MiniLM (an encoder) on a worker
// killed before an Encode: the call returns an error with Code CodeRPC
// instead of blocking for good.
func TestRealModelRPCDeadWorkerEncode(t *testing.T) {
	testRPCDeadWorkerCalls(t, testenv.RealModel(t, "all-minilm-l6-v2"),
		llama.ContextOptions{ContextSize: 512, Embeddings: true, Threads: 1}, "a sentence to embed",
		[]deadWorkerCall{{"Encode", func(t *testing.T, m *llama.Model, c *llama.Context) func() error {
			toks, err := m.Tokenize("another sentence", llama.TokenizeOptions{AddSpecial: true})
			require.NoError(t, err)
			b := llama.NewBatch(len(toks), 1)
			for i, tk := range toks {
				require.NoError(t, b.Add(tk, i, 0, true))
			}
			return func() error { return c.Encode(context.Background(), b) }
		}}})
}
