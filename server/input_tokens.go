package server

// POST /v1/chat/completions/input_tokens: how many tokens a chat request's
// prompt makes (the conversation rendered with the chat template, tools
// included), without running it.

import (
	"net/http"

	"github.com/x/llama/server/internal/openai"
)

func handleChatInputTokens(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var b openai.ChatBody
		inst, release, err := s.requestInstance(r, &b)
		if err != nil {
			return err
		}
		defer release()
		g, _, _, err := oaiChatRequest(inst, &b, false)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, inputTokens{Object: "response.input_tokens", InputTokens: len(g.task.Prompt)})
		return nil
	}
}

// inputTokens answers the input_tokens endpoints of OpenAI's APIs.
type inputTokens struct {
	InputTokens int    `json:"input_tokens"`
	Object      string `json:"object"`
}
