package server

// POST /v1/chat/completions/input_tokens: how many tokens a chat request's
// prompt makes (the conversation rendered with the chat template, tools
// included), without running it.

import "net/http"

func handleChatInputTokens(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, inst, release, ok := s.requestInstance(w, r)
		if !ok {
			return
		}
		defer release()
		g, _, _, err := parseChatRequest(f, inst)
		if err != nil {
			writeHTTPError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "response.input_tokens", "input_tokens": len(g.task.Prompt)})
	}
}
