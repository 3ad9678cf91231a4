package llama_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

// TestConcurrentUse runs several goroutines on one Model: each tokenizes
// and generates in its own Context. Run with -race.
func TestConcurrentUse(t *testing.T) {
	m := stories(t)
	const text = "Once upon a time there was a cat"
	want, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	outs := make([]string, 3)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			for range 20 {
				got, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true})
				assert.NoError(t, err)
				assert.Equal(t, want, got)
			}
			var b strings.Builder
			for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 24}).Seq() {
				if !assert.NoError(t, err) {
					return
				}
				b.WriteString(p.Text)
			}
			outs[i] = b.String()
		}()
	}
	wg.Wait()
	for _, o := range outs {
		require.True(t, strings.HasPrefix(o, ", there was a little girl"), o)
		assert.Equal(t, outs[0], o)
	}
}
