//go:build realmodel

package llama_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/server"
)

// TestRealModelSDKMatchesServer chats with Gemma 3 270M in process, the
// way the README shows (the chat package renders Gemma 3's template, a
// Context generates greedily), and through the server's
// /v1/chat/completions with the same template: the texts must be the
// same. The server is itself checked against llama-server by the server
// package's differential suite.
func TestRealModelSDKMatchesServer(t *testing.T) {
	modelPath := testenv.RealModel(t, "gemma3-270m")
	tmplPath, err := filepath.Abs(filepath.Join("server", "testdata", "gemma3-chat-template.jinja"))
	require.NoError(t, err)
	src, err := os.ReadFile(tmplPath)
	require.NoError(t, err)
	tmpl, err := chat.ParseTemplate(string(src))
	require.NoError(t, err)

	const nCtx, maxTokens = 2048, 48
	srv, err := server.New(context.Background(), server.Options{Model: modelPath, ChatTemplateFile: tmplPath, Jinja: true,
		Logger: slog.New(slog.DiscardHandler),
		// Without context checkpoints: the server would cut the prompt's
		// batches where it takes them (at user messages and before the
		// end, as llama-server), and where batches break moves the
		// logits' last digits, so greedy picks between near-equal tokens
		// can differ from one whole-prompt decode.
		Engine: engine.Options{Parallel: 1, ContextCheckpoints: -1, Context: llama.ContextOptions{ContextSize: nCtx, Threads: 1, ThreadsBatch: 1}}})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); _ = srv.Close() })

	model := modeltest.LoadPath(t, modelPath, llama.ModelOptions{CPUOnly: true})
	sp := model.SpecialTokens()
	bos, err := model.TokenPiece(sp.BOS, true)
	require.NoError(t, err)
	eos, err := model.TokenPiece(sp.EOS, true)
	require.NoError(t, err)

	u, a, s := func(c string) chat.Message { return chat.Message{Role: "user", Content: c} },
		func(c string) chat.Message { return chat.Message{Role: "assistant", Content: c} },
		func(c string) chat.Message { return chat.Message{Role: "system", Content: c} }
	convs := [][]chat.Message{
		{u("What is the capital of France?")},
		{s("You answer in one word."), u("Name a colour.")},
		{u("Hi!"), a("Hello! How can I help?"), u("Tell me a joke about cats.")},
		{u("Write a Go function that adds two ints.")},
		{u("日本の首都はどこですか？")},
		{s("Be brief."), u("Name a fruit."), a("Apple."), u("Another one?")},
	}
	for i, msgs := range convs {
		// In process.
		prompt, err := tmpl.Render(chat.TemplateInput{Messages: msgs, AddGenerationPrompt: true, BOSToken: bos, EOSToken: eos})
		require.NoError(t, err)
		// Generate adds the BOS the vocabulary asks for; the one the
		// template writes goes, as llama.cpp drops it, or the prompt
		// would start with two.
		if sp.AddBOS {
			prompt = strings.TrimPrefix(prompt, bos)
		}
		lctx, err := model.NewContext(llama.ContextOptions{ContextSize: nCtx, Threads: 1, ThreadsBatch: 1})
		require.NoError(t, err)
		var sb strings.Builder
		for piece, err := range lctx.Generate(context.Background(), prompt, llama.GenerateOptions{MaxTokens: maxTokens}).Seq() {
			require.NoError(t, err)
			sb.WriteString(piece.Text)
		}
		lctx.Close()

		// Through the server.
		var wire []map[string]string
		for _, m := range msgs {
			wire = append(wire, map[string]string{"role": m.Role, "content": m.Content})
		}
		body, _ := json.Marshal(map[string]any{"messages": wire, "max_tokens": maxTokens, "temperature": 0})
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, "%s", data)
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(data, &out))
		require.Len(t, out.Choices, 1)
		require.NotEmpty(t, sb.String(), "conversation %d", i)
		require.Equal(t, out.Choices[0].Message.Content, sb.String(), "conversation %d", i)
	}
}
