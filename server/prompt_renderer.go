package server

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// promptRenderer turns a conversation into prompt text. There are two: a
// Jinja template (the model's, the user's, or a Jinja equivalent of a
// llama.cpp built-in format) and llama.cpp's own built-in formats rendered
// by llama_chat_apply_template, which see the messages' text only.
type promptRenderer interface {
	// Render applies the template.
	Render(in chat.TemplateInput) (string, error)
	// Source is the template as configured (Jinja source or a name), for
	// /props.
	Source() string
	// Caps reports what the template supports.
	Caps() chat.TemplateCaps
	// Format is the tool-call and reasoning format of its output.
	Format() chat.Format
}

// jinjaRenderer renders a Jinja chat template.
type jinjaRenderer struct {
	t      *chat.Template
	format chat.Format
}

func newJinjaRenderer(t *chat.Template) *jinjaRenderer {
	return &jinjaRenderer{t: t, format: chat.DetectFormat(t.Source())}
}

func (j *jinjaRenderer) Render(in chat.TemplateInput) (string, error) { return j.t.Render(in) }
func (j *jinjaRenderer) Source() string                               { return j.t.Source() }
func (j *jinjaRenderer) Caps() chat.TemplateCaps                      { return j.t.Caps() }
func (j *jinjaRenderer) Format() chat.Format                          { return j.format }

// builtinRenderer renders with llama.cpp's built-in formats: tmpl is a
// built-in name or a template source llama.cpp recognises. Tools and tool
// calls do not reach these formats, so their format is content-only and
// tools go through the generic JSON format, as in llama.cpp.
type builtinRenderer struct {
	tmpl string
}

func (b *builtinRenderer) Render(in chat.TemplateInput) (string, error) {
	msgs := make([]llama.ChatMessage, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = llama.ChatMessage{Role: m.Role, Content: plainText(m)}
	}
	return llama.ApplyChatTemplate(b.tmpl, msgs, in.AddGenerationPrompt)
}

func (b *builtinRenderer) Source() string { return b.tmpl }

// Caps: the built-in formats place system messages; nothing else of the
// OpenAI conversation reaches them.
func (b *builtinRenderer) Caps() chat.TemplateCaps {
	return chat.TemplateCaps{SupportsSystemRole: true}
}

func (b *builtinRenderer) Format() chat.Format { return chat.FormatContentOnly }

// plainText is a message's text: its content, or its text parts joined.
func plainText(m chat.Message) string {
	if m.Content != "" || len(m.Parts) == 0 {
		return m.Content
	}
	var sb strings.Builder
	for _, p := range m.Parts {
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// builtinDetects reports whether llama.cpp recognises tmpl (a built-in
// name, or template source it detects a built-in format in).
func builtinDetects(tmpl string) bool {
	_, err := llama.ApplyChatTemplate(tmpl, []llama.ChatMessage{{Role: "user", Content: "x"}}, true)
	return err == nil
}

// rendererFor returns the renderer for a template given by the user: a
// built-in name (the Jinja equivalent when there is one, else llama.cpp's
// rendering) or Jinja source. With jinja (--jinja), any other text is Jinja
// source too (text without tags renders as itself), as in llama-server.
func rendererFor(s string, jinja bool) (promptRenderer, error) {
	name := strings.TrimSpace(s)
	if src, ok := builtinTemplates[name]; ok {
		t, err := chat.ParseTemplate(src)
		if err != nil {
			return nil, err
		}
		return newJinjaRenderer(t), nil
	}
	if chat.IsBuiltinTemplate(name) && builtinDetects(name) && !strings.Contains(s, "{") {
		return &builtinRenderer{tmpl: name}, nil
	}
	if jinja || strings.Contains(s, "{{") || strings.Contains(s, "{%") {
		t, err := chat.ParseTemplate(s)
		if err != nil {
			return nil, err
		}
		return newJinjaRenderer(t), nil
	}
	if chat.IsBuiltinTemplate(name) && builtinDetects(name) {
		return &builtinRenderer{tmpl: name}, nil
	}
	return nil, fmt.Errorf("unknown chat template %q (not a built-in name nor Jinja source)", name)
}

// checkTemplate reports whether s names a built-in template or looks like
// Jinja source (with jinja, any text is), without parsing it.
func checkTemplate(s string, jinja bool) error {
	name := strings.TrimSpace(s)
	if _, ok := builtinTemplates[name]; ok || chat.IsBuiltinTemplate(name) || jinja {
		return nil
	}
	if strings.Contains(s, "{{") || strings.Contains(s, "{%") {
		return nil
	}
	return fmt.Errorf("unknown chat template %q (not a built-in name nor Jinja source)", name)
}

// resolveTemplate picks the chat template: Options.ChatTemplate (a
// built-in name or Jinja source), else ChatTemplateFile, else the model's
// own, else chatml. A ChatTemplate that does not parse is skipped with a
// warning; an unreadable or unparsable ChatTemplateFile is an error. A model's template that does not parse as Jinja is tried as
// llama.cpp's built-in format detection would (its source names a known
// format), then falls back to chatml, with a warning.
func resolveTemplate(o Options, m *llama.Model, log interface{ Warn(string, ...any) }) (promptRenderer, error) {
	switch {
	case o.ChatTemplate != "":
		r, err := rendererFor(o.ChatTemplate, o.Jinja)
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
		r, err := rendererFor(string(b), o.Jinja)
		if err != nil {
			return nil, fmt.Errorf("chat template file: %w", err)
		}
		return r, nil
	}
	src := ""
	if m != nil {
		src, _ = m.ChatTemplate("")
	}
	return modelRenderer(src, log)
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
	return newJinjaRenderer(t)
}

// modelRenderer is the renderer for a model's own template source src
// ("" when it has none): src itself when it parses, else the built-in
// format llama.cpp detects in it, else chatml.
func modelRenderer(src string, log interface{ Warn(string, ...any) }) (promptRenderer, error) {
	if strings.TrimSpace(src) != "" {
		r, err := rendererFor(src, false)
		if err == nil {
			return r, nil
		}
		if builtinDetects(src) {
			log.Warn("model's chat template does not parse; using the llama.cpp built-in format it matches", "err", err)
			return &builtinRenderer{tmpl: src}, nil
		}
		log.Warn("model's chat template does not parse; using chatml", "err", err)
	}
	r, err := rendererFor("chatml", false)
	if err != nil {
		return nil, errors.Join(errors.New("chatml template"), err)
	}
	return r, nil
}
