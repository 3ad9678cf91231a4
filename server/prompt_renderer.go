package server

import (
	"fmt"
	"os"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
)

// promptRenderer is a chat template's renderer (chat.Renderer).
type promptRenderer = chat.Renderer

// templates resolves chat templates given as text, with llama.cpp's
// built-in formats rendered by llama.ApplyChatTemplate.
func templates(jinja bool) chat.Resolver { return engine.ChatResolver(jinja) }

// resolveTemplate picks the chat template: Options.ChatTemplate (a
// built-in name or Jinja source), else ChatTemplateFile, else the model's
// own, else chatml. A ChatTemplate that does not parse is skipped with a
// warning; an unreadable or unparsable ChatTemplateFile is an error. A model's template that does not parse as Jinja is tried as
// llama.cpp's built-in format detection would (its source names a known
// format), then falls back to chatml, with a warning.
func resolveTemplate(o Options, m *llama.Model, log interface{ Warn(string, ...any) }) (promptRenderer, error) {
	switch {
	case o.ChatTemplate != "":
		r, err := templates(o.Jinja).For(o.ChatTemplate)
		if err == nil {
			return r, nil
		}
		// Startup goes on with the model's template, as llama-server's
		// does when a given template fails: only chat requests care.
		log.Warn("the chat template given does not parse; using the model's", "err", err)
	case o.ChatTemplateFile != "":
		b, err := os.ReadFile(o.ChatTemplateFile)
		if err != nil {
			return nil, fmt.Errorf("read chat template file: %w", err)
		}
		r, err := templates(o.Jinja).For(string(b))
		if err != nil {
			return nil, fmt.Errorf("chat template file: %w", err)
		}
		return r, nil
	}
	src := ""
	if m != nil {
		src, _ = m.ChatTemplate("")
	}
	return templates(false).ForModel(src, log.Warn)
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
