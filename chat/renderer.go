package chat

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// A Renderer turns a conversation into prompt text: a Jinja template (a
// model's, a user's, or the Jinja equivalent of a llama.cpp built-in
// format, see BuiltinJinja), or llama.cpp's own rendering of a built-in
// format, which sees the messages' text only.
type Renderer interface {
	// Render applies the template.
	Render(in TemplateInput) (string, error)
	// Source is the template as configured (Jinja source or a name).
	Source() string
	// Caps reports what the template supports.
	Caps() TemplateCaps
	// Format is the tool-call and reasoning format of its output.
	Format() Format
}

// NativeFunc renders messages with llama.cpp's built-in format tmpl (a
// built-in name, or template source in which llama.cpp detects one), as
// llama.ApplyChatTemplate does; it fails when llama.cpp recognises no
// format in tmpl.
type NativeFunc func(tmpl string, msgs []Message, addAssistant bool) (string, error)

// A Resolver picks the Renderer of a chat template given as text, as
// llama-server does. Native renders llama.cpp's built-in formats
// (NewResolver's is llama.ApplyChatTemplate; nil: none is recognised);
// with Jinja (--jinja) any text that is not a built-in name is Jinja
// source.
type Resolver struct {
	Native NativeFunc
	Jinja  bool
}

// NewJinjaRenderer returns the Renderer of a parsed Jinja template, its
// output format that of [TemplateFormat].
func NewJinjaRenderer(t *Template) Renderer {
	return &jinjaRenderer{t: t}
}

type jinjaRenderer struct {
	t          *Template
	formatOnce sync.Once
	format     Format
}

func (j *jinjaRenderer) Render(in TemplateInput) (string, error) { return j.t.Render(in) }
func (j *jinjaRenderer) Source() string                          { return j.t.Source() }
func (j *jinjaRenderer) Caps() TemplateCaps                      { return j.t.Caps() }
func (j *jinjaRenderer) Format() Format {
	j.formatOnce.Do(func() { j.format = TemplateFormat(j.t) })
	return j.format
}

// nativeRenderer renders with llama.cpp's built-in formats. Tools and tool
// calls do not reach these formats, so their format is content-only: the
// answer is free text, as in llama.cpp.
type nativeRenderer struct {
	tmpl   string
	native NativeFunc
}

func (b *nativeRenderer) Render(in TemplateInput) (string, error) {
	msgs := make([]Message, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = Message{Role: m.Role, Content: PlainText(m)}
	}
	return b.native(b.tmpl, msgs, in.AddGenerationPrompt)
}

func (b *nativeRenderer) Source() string { return b.tmpl }

// Caps: the built-in formats place system messages; nothing else of the
// OpenAI conversation reaches them.
func (b *nativeRenderer) Caps() TemplateCaps { return TemplateCaps{SupportsSystemRole: true} }

func (b *nativeRenderer) Format() Format { return FormatContentOnly }

// IsNative reports whether r renders through llama.cpp's built-in formats.
func IsNative(r Renderer) bool {
	_, ok := r.(*nativeRenderer)
	return ok
}

// PlainText is a message's text: its content, or its text parts joined.
func PlainText(m Message) string {
	if m.Content != "" || len(m.Parts) == 0 {
		return m.Content
	}
	var sb strings.Builder
	for _, p := range m.Parts {
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// detects reports whether llama.cpp recognises tmpl (a built-in name, or
// template source it detects a built-in format in).
func (rs Resolver) detects(tmpl string) bool {
	if rs.Native == nil {
		return false
	}
	_, err := rs.Native(tmpl, []Message{{Role: "user", Content: "x"}}, true)
	return err == nil
}

// For returns the Renderer of a template given by the user: a built-in
// name (its Jinja equivalent when there is one, else llama.cpp's
// rendering) or Jinja source. With Jinja, any other text is Jinja source
// too (text without tags renders as itself), as in llama-server.
func (rs Resolver) For(s string) (Renderer, error) {
	name := strings.TrimSpace(s)
	if src, ok := builtinJinja[name]; ok {
		t, err := ParseTemplate(src)
		if err != nil {
			return nil, err
		}
		return NewJinjaRenderer(t), nil
	}
	if IsBuiltinTemplate(name) && rs.detects(name) && !strings.Contains(s, "{") {
		return &nativeRenderer{tmpl: name, native: rs.Native}, nil
	}
	if rs.Jinja || strings.Contains(s, "{{") || strings.Contains(s, "{%") {
		t, err := ParseTemplate(s)
		if err != nil {
			return nil, err
		}
		return NewJinjaRenderer(t), nil
	}
	if IsBuiltinTemplate(name) && rs.detects(name) {
		return &nativeRenderer{tmpl: name, native: rs.Native}, nil
	}
	return nil, fmt.Errorf("unknown chat template %q (not a built-in name nor Jinja source)", name)
}

// Check reports whether s names a built-in template or looks like Jinja
// source (with Jinja, any text is), without parsing it.
func (rs Resolver) Check(s string) error {
	name := strings.TrimSpace(s)
	if _, ok := builtinJinja[name]; ok || IsBuiltinTemplate(name) || rs.Jinja {
		return nil
	}
	if strings.Contains(s, "{{") || strings.Contains(s, "{%") {
		return nil
	}
	return fmt.Errorf("unknown chat template %q (not a built-in name nor Jinja source)", name)
}

// ForModel returns the Renderer of a model's own template source src (""
// when it has none): src itself when it parses (as Jinja, whatever
// rs.Jinja says), else the built-in format llama.cpp detects in it, else
// chatml. warn, when not nil, hears why src was not used.
func (rs Resolver) ForModel(src string, warn func(msg string, args ...any)) (Renderer, error) {
	if warn == nil {
		warn = func(string, ...any) {}
	}
	rs.Jinja = false
	if strings.TrimSpace(src) != "" {
		r, err := rs.For(src)
		if err == nil {
			return r, nil
		}
		if rs.detects(src) {
			warn("model's chat template does not parse; using the llama.cpp built-in format it matches", "err", err)
			return &nativeRenderer{tmpl: src, native: rs.Native}, nil
		}
		warn("model's chat template does not parse; using chatml", "err", err)
	}
	r, err := rs.For("chatml")
	if err != nil {
		return nil, errors.Join(errors.New("chatml template"), err)
	}
	return r, nil
}
