package llama_test

import (
	"context"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

func isValidUTF8(s string) bool { return utf8.ValidString(s) }

// decodeStarted: see modeltest.DecodeStarted.
type decodeStarted = modeltest.DecodeStarted

func newDecodeStarted(cancel bool, onStart func()) *decodeStarted {
	return modeltest.NewDecodeStarted(cancel, onStart)
}

// promptDecoder returns a function that decodes one fixed prompt on a
// context from an empty memory and returns a copy of its last logits: the
// same computation on contexts made with different options.
func promptDecoder(t *testing.T, m *llama.Model) func(*llama.Context) []float32 {
	prompt, err := m.Tokenize("Once upon a time there was", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	return func(c *llama.Context) []float32 {
		b := llama.NewBatch(len(prompt), 1)
		for i, tok := range prompt {
			require.NoError(t, b.Add(tok, i, 0, i == len(prompt)-1))
		}
		require.NoError(t, c.Memory().Clear())
		require.NoError(t, c.Decode(context.Background(), b))
		l, err := c.Logits(len(prompt) - 1)
		require.NoError(t, err)
		return append([]float32(nil), l...)
	}
}

// mustGrammar parses a grammar the test knows to be well formed (root "root").
func mustGrammar(t testing.TB, src string) *llama.Grammar {
	t.Helper()
	g, err := llama.ParseGrammar(context.Background(), src, "")
	require.NoError(t, err)
	return g
}
