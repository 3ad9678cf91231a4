package chat

// A model's chat templates: what an app that chats with a llama.Model
// needs from this package, with no engine.

import (
	"strings"

	"github.com/x/llama"
)

// NewResolver returns llama-server's Resolver: llama.cpp's built-in
// formats render with llama.ApplyChatTemplate, and jinja (--jinja) makes
// text that is not a built-in name Jinja source even without tags.
func NewResolver(jinja bool) Resolver {
	return Resolver{Native: nativeChatTemplate, Jinja: jinja}
}

// nativeChatTemplate renders msgs' text with llama.cpp's built-in format
// tmpl.
func nativeChatTemplate(tmpl string, msgs []Message, addAssistant bool) (string, error) {
	lm := make([]llama.ChatMessage, len(msgs))
	for i, m := range msgs {
		lm[i] = llama.ChatMessage{Role: m.Role, Content: m.Content}
	}
	return llama.ApplyChatTemplate(tmpl, lm, addAssistant)
}

// ForModel returns the chat templates of model m as llama-server picks
// them: the model's own (chatml when it has none, or one that does not
// parse, which is reported to warn if not nil), its "tool_use" template
// for chats with tools when it has one that parses, and its BOS and EOS
// texts. Prepare a chat with the result, tokenize the Plan's Prompt with
// special tokens added and parsed, and read the output with the Plan.
func ForModel(m *llama.Model, warn func(msg string, args ...any)) (*Templates, error) {
	if warn == nil {
		warn = func(string, ...any) {}
	}
	src, _ := m.ChatTemplate("")
	r, err := NewResolver(false).ForModel(src, warn)
	if err != nil {
		return nil, err
	}
	t := ForModelWith(m, r)
	if src, ok := m.ChatTemplate("tool_use"); ok && strings.TrimSpace(src) != "" {
		if tt, err := ParseTemplate(src); err == nil {
			t.ToolUse = NewJinjaRenderer(tt)
		} else {
			warn("model's tool_use chat template does not parse; using its main template for tools", "err", err)
		}
	}
	return t, nil
}

// ForModelWith returns templates that render with r (a template of the
// user's, see Resolver.For) and m's special tokens.
func ForModelWith(m *llama.Model, r Renderer) *Templates {
	sp := m.SpecialTokens()
	return &Templates{
		Default: r,
		BOS:     specialText(m, sp.BOS),
		EOS:     specialText(m, sp.EOS),
		AddBOS:  sp.AddBOS,
	}
}

// specialText returns a special token's text ("" when absent).
func specialText(m *llama.Model, t llama.Token) string {
	if t == llama.NoToken {
		return ""
	}
	s, err := m.TokenPiece(t, true)
	if err != nil {
		return ""
	}
	return s
}
