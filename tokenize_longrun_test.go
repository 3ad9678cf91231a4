package llama_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestTokenizeLongRun: llama.cpp's BPE pre-tokenizer (std::regex) overflows
// the stack on ~25,000 characters without white space; Tokenize cuts such
// runs, so it returns tokens that detokenize to the text instead of killing
// the process. Ordinary text is tokenized as before.
func TestTokenizeLongRun(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-deepseek-coder.gguf"),
		llama.ModelOptions{VocabOnly: true})
	require.NoError(t, err)
	defer m.Close()
	for _, text := range []string{
		strings.Repeat("a", 30000),
		"x " + strings.Repeat("0123456789", 5000) + " y",
		strings.Repeat("é", 20000),
	} {
		toks, err := m.Tokenize(text, llama.TokenizeOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, toks)
		back, err := m.Detokenize(toks, llama.DetokenizeOptions{})
		require.NoError(t, err)
		assert.Equal(t, text, back)
	}
	short := "Hello world, a run of 2048 characters or less is not cut."
	a, err := m.Tokenize(short, llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	b, err := m.Tokenize(short+" "+strings.Repeat("b", 3000), llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	assert.Equal(t, a, b[:len(a)], "the text before a long run tokenizes as alone")
}
