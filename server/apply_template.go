package server

// POST /apply-template: a chat rendered by the model's template, without
// generating.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/server/internal/openai"
	"github.com/x/llama/server/internal/wire"
)

// templateMessage is a chat message as /apply-template receives it
// (OpenAI's shape: content is a string or a list of parts).
type templateMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type applyTemplateRequest struct {
	Model               string            `json:"model"`
	Messages            []templateMessage `json:"messages"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
}

// toChatMessage converts a wire message to chat.Message.
func (m templateMessage) toChatMessage(i int) (chat.Message, error) {
	if m.Role == "" {
		return chat.Message{}, fmt.Errorf("messages[%d]: missing role", i)
	}
	out := chat.Message{Role: m.Role, ReasoningContent: m.ReasoningContent, Name: m.Name, ToolCallID: m.ToolCallID}
	if len(m.Content) > 0 && string(m.Content) != "null" {
		if err := json.Unmarshal(m.Content, &out.Content); err != nil {
			var parts []chat.ContentPart
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return chat.Message{}, fmt.Errorf("messages[%d]: content must be a string or an array of parts", i)
			}
			var sb strings.Builder
			textOnly := true
			for _, p := range parts {
				if p.Type == "text" {
					sb.WriteString(p.Text)
				} else {
					textOnly = false
				}
			}
			// Text-only parts are joined into plain content, as llama.cpp
			// does for templates that read content as a string.
			out.Content = sb.String()
			if !textOnly {
				out.Parts = parts
			}
		}
	}
	for _, tc := range m.ToolCalls {
		args := string(tc.Function.Arguments)
		var s string
		if json.Unmarshal(tc.Function.Arguments, &s) == nil {
			args = s
		}
		out.ToolCalls = append(out.ToolCalls, chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return out, nil
}

func handleApplyTemplate(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var raw json.RawMessage
		if err := decodeJSON(r, &raw); err != nil {
			return err
		}
		// As llama-server: the prompt a chat completion of this body would
		// use (tools, assistant prefill, template kwargs and reasoning
		// settings applied, the BOS text the tokenizer adds left out).
		var b openai.ChatBody
		if wire.Decode(raw, &b) == nil && len(b.Messages) > 0 {
			model, _ := b.ModelName()
			inst, release, err := s.instanceFor(r, model)
			if err != nil {
				return err
			}
			defer release()
			_, plan, _, err := oaiChatRequest(inst, &b, true)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, map[string]string{"prompt": plan.Prompt})
			return nil
		}
		var req applyTemplateRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return badRequest("malformed JSON: %v", err)
		}
		if req.Messages == nil {
			return badRequest("'messages' is required")
		}
		msgs := make([]chat.Message, len(req.Messages))
		for i, m := range req.Messages {
			cm, err := m.toChatMessage(i)
			if err != nil {
				return badRequest("%v", err)
			}
			msgs[i] = cm
		}
		inst, release, err := s.instanceFor(r, req.Model)
		if err != nil {
			return err
		}
		defer release()
		in := chat.TemplateInput{Messages: msgs, AddGenerationPrompt: req.AddGenerationPrompt == nil || *req.AddGenerationPrompt,
			Extra: inst.chatTemplates().Kwargs(inst.Template, req.ChatTemplateKwargs)}
		sp := inst.Model.SpecialTokens()
		if sp.BOS != llama.NoToken {
			in.BOSToken, _ = inst.Model.TokenPiece(sp.BOS, true)
		}
		if sp.EOS != llama.NoToken {
			in.EOSToken, _ = inst.Model.TokenPiece(sp.EOS, true)
		}
		prompt, err := inst.Template.Render(in)
		if err != nil {
			return badRequest("apply chat template: %v", err)
		}
		writeJSON(w, http.StatusOK, map[string]string{"prompt": prompt})
		return nil
	}
}
