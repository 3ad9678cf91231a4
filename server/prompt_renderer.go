package server

import (
	"fmt"
	"os"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// promptRenderer is a chat template's renderer (chat.Renderer).
type promptRenderer = chat.Renderer

// templates resolves chat templates given as text, with llama.cpp's
// built-in formats rendered by llama.ApplyChatTemplate.
func templates(jinja bool) chat.Resolver { return chat.NewResolver(jinja) }

// resolveTemplate picks the chat template: Options.ChatTemplate (a
// built-in name or Jinja source), else ChatTemplateFile, else the model's
// own, else chatml. A ChatTemplate or ChatTemplateFile that does not
// parse is an error, as llama-server refuses to start with one; a
// model's template that does not parse as Jinja is tried as llama.cpp's
// built-in format detection would (its source names a known format),
// then falls back to chatml, with a warning.
func resolveTemplate(o Options, m *llama.Model, log interface{ Warn(string, ...any) }) (promptRenderer, error) {
	switch {
	case o.ChatTemplate != "":
		r, err := templates(o.Jinja).For(patchTemplate(o.ChatTemplate))
		if err != nil {
			return nil, fmt.Errorf("chat template: %w", err)
		}
		return r, nil
	case o.ChatTemplateFile != "":
		b, err := os.ReadFile(o.ChatTemplateFile)
		if err != nil {
			return nil, fmt.Errorf("read chat template file: %w", err)
		}
		r, err := templates(o.Jinja).For(patchTemplate(string(b)))
		if err != nil {
			return nil, fmt.Errorf("chat template file: %w", err)
		}
		return r, nil
	}
	src := ""
	if m != nil {
		src, _ = m.ChatTemplate("")
	}
	return templates(false).ForModel(patchTemplate(src), log.Warn)
}

// patchTemplate takes out of a chat template's text the checks llama.cpp
// v0.4.0 takes out before using it (and reporting it in /props): each is
// taken out when the template holds both of its markers.
func patchTemplate(src string) string {
	for _, p := range []struct {
		markers  [2]string
		old, new string
	}{
		// gpt-oss: content that holds channel tags is not an error.
		{[2]string{"<|channel|>", "in message.content or"},
			`{%- if "<|channel|>analysis<|message|>" in message.content or "<|channel|>final<|message|>" in message.content %}`,
			"{%- if false %}"},
		// Mistral: an assistant message without content or tool calls is
		// not an error.
		{[2]string{"[TOOL_CALLS]", "if (message['content'] is none or"},
			"{%- if (message['content'] is none or message['content'] == '' or message['content']|length == 0) and " +
				"(message['tool_calls'] is not defined or message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
			"{%- if false %}"},
	} {
		if strings.Contains(src, p.markers[0]) && strings.Contains(src, p.markers[1]) {
			src = strings.ReplaceAll(src, p.old, p.new)
		}
	}
	return src
}

// toolUseRenderer returns the renderer of the model's "tool_use" template,
// or nil when the options give a template, the model has none, or it does
// not parse (with a warning: prompts with tools then use the main one).
func toolUseRenderer(o Options, m *llama.Model, log interface{ Warn(string, ...any) }) promptRenderer {
	if o.ChatTemplate != "" || o.ChatTemplateFile != "" || m == nil {
		return nil
	}
	src, ok := m.ChatTemplate("tool_use")
	if !ok || strings.TrimSpace(src) == "" {
		return nil
	}
	t, err := chat.ParseTemplate(src)
	if err != nil {
		log.Warn("model's tool_use chat template does not parse; using its main template for tools", "err", err)
		return nil
	}
	return chat.NewJinjaRenderer(t)
}
