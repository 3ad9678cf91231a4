package chat_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/internal/testenv/modeltest"
)

// ForModel gives a model without a template of its own chatml, as
// llama-server does, with the model's special tokens; ForModelWith puts
// the user's renderer in its place.
func TestForModel(t *testing.T) {
	m := modeltest.Shared(t, "stories260K.gguf", true)
	bos, err := m.TokenPiece(m.SpecialTokens().BOS, true)
	require.NoError(t, err)
	user, err := chat.NewResolver(false).For("llama3")
	require.NoError(t, err)
	var warned []string
	own, err := chat.ForModel(m, func(msg string, _ ...any) { warned = append(warned, msg) })
	require.NoError(t, err)
	assert.Empty(t, warned, "no template is not a template that fails")
	cases := []struct {
		name   string
		tm     *chat.Templates
		prompt string
	}{
		{"the model's (chatml)", own, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"the user's", chat.ForModelWith(m, user), "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Nil(t, tc.tm.ToolUse)
			assert.Equal(t, bos, tc.tm.BOS)
			assert.Equal(t, m.SpecialTokens().AddBOS, tc.tm.AddBOS)
			plan, err := tc.tm.Prepare(chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}})
			require.NoError(t, err)
			assert.Equal(t, tc.prompt, plan.Prompt)
		})
	}
}

// NewResolver renders llama.cpp's built-in formats that have no Jinja
// equivalent through llama.ApplyChatTemplate; a Resolver without Native
// knows none of them.
func TestNewResolverNative(t *testing.T) {
	msgs := []llama.ChatMessage{{Role: "user", Content: "Hi"}}
	for _, name := range []string{"exaone3", "chatglm4", "megrez"} {
		t.Run(name, func(t *testing.T) {
			want, err := llama.ApplyChatTemplate(name, msgs, true)
			require.NoError(t, err)
			r, err := chat.NewResolver(false).For(name)
			require.NoError(t, err)
			assert.True(t, chat.IsNative(r))
			got, err := r.Render(chat.TemplateInput{Messages: []chat.Message{{Role: "user", Content: "Hi"}}, AddGenerationPrompt: true})
			require.NoError(t, err)
			assert.Equal(t, want, got)
			_, err = chat.Resolver{}.For(name)
			assert.Error(t, err)
		})
	}
}
