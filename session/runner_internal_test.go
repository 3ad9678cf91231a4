package session

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// The context runner decodes only what a prompt adds to the last one.
func TestCtxRunnerReuse(t *testing.T) {
	m := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{CPUOnly: true})
	lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 512, Threads: 1, ThreadsBatch: 1})
	require.NoError(t, err)
	r := &ctxRunner{lctx: lctx}
	p1, err := m.Tokenize("Once upon a time, there was a dog.", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	p2, err := m.Tokenize("Once upon a time, there was a dog. It was happy.", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	run := func(p []llama.Token) {
		_, err := r.generate(context.Background(), p, genOptions{maxTokens: 4}, func(string) bool { return true })
		require.NoError(t, err)
	}
	run(p1)
	assert.Equal(t, p1, r.cached)
	n := r.reuse(p2)
	assert.GreaterOrEqual(t, n, len(p1)-1, "the shared prefix is kept")
	_, hi, err := lctx.Memory().PosRange(0)
	require.NoError(t, err)
	assert.Equal(t, n-1, hi, "the rest is removed")

	// Another prompt, or memory changed behind the runner's back: nothing is reused.
	run(p2)
	require.NoError(t, lctx.Memory().Clear())
	assert.Equal(t, 0, r.reuse(p2))
}
