package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/sampling"
)

// SetChat tokenizes a plan's prompt with the special tokens parsed (the
// templates: chat.ForModel, tested in package chat).
func TestSetChat(t *testing.T) {
	m := engStoriesModel(t)
	tm, err := chat.ForModel(m, nil)
	require.NoError(t, err)
	plan, err := tm.Prepare(chat.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hi"}}})
	require.NoError(t, err)
	assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", plan.Prompt)

	r := &Request{Params: sampling.Defaults()}
	require.NoError(t, r.SetChat(m, plan))
	want, err := m.Tokenize(plan.Prompt, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	require.NoError(t, err)
	assert.Equal(t, want, r.Prompt)
	assert.Empty(t, r.Params.Grammar)
}

func TestChatTriggers(t *testing.T) {
	m := engStoriesModel(t)
	bos, err := m.TokenPiece(m.SpecialTokens().BOS, true)
	require.NoError(t, err)
	require.NotEmpty(t, bos)
	for _, tc := range []struct {
		name string
		in   chat.Trigger
		want sampling.GrammarTrigger
	}{
		{"word", chat.Trigger{Kind: chat.TriggerWord, Value: "<tool_call>"}, sampling.GrammarTrigger{Word: "<tool_call>", Token: llama.NoToken}},
		{"pattern", chat.Trigger{Kind: chat.TriggerPattern, Value: "a+"}, sampling.GrammarTrigger{Pattern: "a+", Token: llama.NoToken}},
		{"full pattern", chat.Trigger{Kind: chat.TriggerPatternFull, Value: "a+"}, sampling.GrammarTrigger{Pattern: "a+", PatternFull: true, Token: llama.NoToken}},
		{"one token", chat.Trigger{Kind: chat.TriggerToken, Value: bos}, sampling.GrammarTrigger{Token: m.SpecialTokens().BOS}},
		{"not one token: a word", chat.Trigger{Kind: chat.TriggerToken, Value: "<tool_call>"}, sampling.GrammarTrigger{Word: "<tool_call>", Token: llama.NoToken}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, []sampling.GrammarTrigger{tc.want}, ChatTriggers(m, []chat.Trigger{tc.in}))
		})
	}
}
