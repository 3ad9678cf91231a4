package server

import (
	"slices"
	"strings"

	"github.com/x/llama"
)

// userMarkers are the texts that open a user message in the chat formats
// llama-server finds message boundaries for, most specific first.
var userMarkers = []string{
	"<start_of_turn>user",     // Gemma 2 and 3
	"<|turn>user",             // Gemma 4
	"<|im_start|>user",        // ChatML
	"<|start_header_id|>user", // Llama 3
	"<|start|>user",           // harmony (gpt-oss)
	"<|user|>",                // Phi-3, GLM
	"<｜User｜>",                // DeepSeek
}

// userStarts returns where the user messages of a rendered chat prompt
// begin in its tokens (engine.Request.UserStarts), as llama-server's
// message spans: the positions where the tokens of the format's user
// marker occur. Nil when the prompt has none of the known markers.
func userStarts(m *llama.Model, prompt string, toks []llama.Token) []int {
	for _, mk := range userMarkers {
		if !strings.Contains(prompt, mk) {
			continue
		}
		d, err := m.Tokenize(mk, llama.TokenizeOptions{ParseSpecial: true})
		if err != nil || len(d) == 0 {
			return nil
		}
		var out []int
		for i := 0; i+len(d) <= len(toks); i++ {
			if slices.Equal(toks[i:i+len(d)], d) {
				out = append(out, i)
			}
		}
		return out
	}
	return nil
}
