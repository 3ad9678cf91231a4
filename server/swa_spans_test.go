package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

func TestUserStarts(t *testing.T) {
	m := modeltest.Shared(t, "stories260K.gguf", true)
	tok := func(s string) []llama.Token {
		out, err := m.Tokenize(s, llama.TokenizeOptions{ParseSpecial: true})
		require.NoError(t, err)
		return out
	}
	user, hi := tok("<|im_start|>user"), tok("hi there")
	var chatml []llama.Token
	chatml = append(chatml, user...)
	chatml = append(chatml, hi...)
	chatml = append(chatml, user...)
	for _, tc := range []struct {
		name   string
		prompt string
		toks   []llama.Token
		want   []int
	}{
		{"two user turns", "<|im_start|>user hi there<|im_start|>user", chatml, []int{0, len(user) + len(hi)}},
		{"no known marker", "hi there", hi, nil},
		{"marker in the text only", "<start_of_turn>user", hi, nil},
		{"empty prompt", "<|im_start|>user", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, userStarts(m, tc.prompt, tc.toks))
		})
	}
}
