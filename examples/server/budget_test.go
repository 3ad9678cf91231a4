package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

// thinkTemplate is a ChatML template whose generation prompt opens a
// <think> block, as thinking models' templates do.
const thinkTemplate = `{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>{% endif %}`

type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
	} `json:"choices"`
}

// chatServer starts a server from args with the thinking template and
// returns a function that posts a chat with extra JSON members.
func chatServer(t *testing.T, model string, args ...string) func(extra string) chatAnswer {
	t.Helper()
	c, err := parseFlags(append([]string{"-m", model, "-c", "512", "-np", "2", "-t", "1", "-tb", "1", "--chat-template", thinkTemplate}, args...), noEnv, io.Discard)
	require.NoError(t, err)
	srv, err := server.New(context.Background(), c.opts)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return func(extra string) chatAnswer {
		rec := httptest.NewRecorder()
		body := `{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":40,"temperature":0` + extra + `}`
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
		require.Equal(t, 200, rec.Code, rec.Body.String())
		var a chatAnswer
		require.NoError(t, jsonDecode(rec.Body, &a))
		require.NotEmpty(t, a.Choices)
		return a
	}
}

// TestReasoningBudget checks --reasoning-budget and
// --reasoning-budget-message on stories260K with a template that opens a
// <think> block: without a budget the whole answer is thinking; with one,
// the thinking is the first N tokens of it (then the message), ended by
// a forced </think>, and the answer goes on as content. A request's
// reasoning_budget_tokens or thinking_budget_tokens overrides the flag.
func TestReasoningBudget(t *testing.T) {
	model := testenv.Model(t, "stories260K.gguf")
	plain := chatServer(t, model)
	free := plain("").Choices[0].Message
	require.NotEmpty(t, free.ReasoningContent)
	require.Empty(t, free.Content, "no budget: stories260K never closes the block")
	first := func(n int) string {
		return plain(`,"max_tokens":` + strconv.Itoa(n)).Choices[0].Message.ReasoningContent
	}

	budget := chatServer(t, model, "--reasoning-budget", "5")
	got := budget("").Choices[0].Message
	assert.Equal(t, first(5), got.ReasoningContent, "the thinking is the first 5 tokens")
	assert.NotEmpty(t, got.Content, "the answer goes on after the forced end tag")

	over := budget(`,"reasoning_budget_tokens":3`).Choices[0].Message
	assert.Equal(t, first(3), over.ReasoningContent, "the request's budget wins")
	assert.NotEmpty(t, over.Content)
	assert.Equal(t, got, budget(`,"reasoning_budget_tokens":-1`).Choices[0].Message, "-1: the server's budget")
	zero := plain(`,"thinking_budget_tokens":0`).Choices[0].Message
	assert.Empty(t, zero.ReasoningContent, "0: the block ends at once")
	assert.NotEmpty(t, zero.Content)
	for _, c := range budget(`,"n":2`).Choices {
		assert.Equal(t, got, c.Message, "each choice has its own budget")
	}

	// The message is tokenized on its own (this vocabulary then starts it
	// with a space), as llama-server does.
	msg := chatServer(t, model, "--reasoning-budget", "5", "--reasoning-budget-message", "Enough thinking.")
	withMsg := msg("").Choices[0].Message
	assert.True(t, strings.HasPrefix(withMsg.ReasoningContent, first(5)), withMsg.ReasoningContent)
	assert.True(t, strings.HasSuffix(withMsg.ReasoningContent, " Enough thinking."), withMsg.ReasoningContent)
	assert.Len(t, strings.TrimSpace(strings.TrimPrefix(withMsg.ReasoningContent, first(5))), len("Enough thinking."))
	assert.NotEmpty(t, withMsg.Content)
	stop := msg(`,"reasoning_budget_message":"Stop."`).Choices[0].Message.ReasoningContent
	assert.Equal(t, "Stop.", strings.TrimSpace(strings.TrimPrefix(stop, first(5))), "the request's message wins")
}
