package llama_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

func TestApplyChatTemplate(t *testing.T) {
	stories(t) // loads the library
	names, err := llama.BuiltinChatTemplates()
	require.NoError(t, err)
	assert.Contains(t, names, "chatml")
	assert.Contains(t, names, "llama3")
	assert.Greater(t, len(names), 30)
	msgs := []llama.ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	out, err := llama.ApplyChatTemplate("chatml", msgs, true)
	require.NoError(t, err)
	assert.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out)
	out, err = llama.ApplyChatTemplate("llama3", msgs, true)
	require.NoError(t, err)
	assert.Contains(t, out, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")
	for _, name := range names {
		out, err := llama.ApplyChatTemplate(name, msgs, true)
		assert.NoError(t, err, name)
		assert.Contains(t, out, "Hi", name)
	}
	_, err = llama.ApplyChatTemplate("no-such-template", msgs, true)
	assert.ErrorIs(t, err, llama.ErrUnsupported)
	_, err = llama.ApplyChatTemplate("chatml", []llama.ChatMessage{{Role: "user", Content: "a\x00b"}}, true)
	assert.ErrorIs(t, err, llama.ErrInvalid)
}
