package engine

// Chats for in-process users: a model's chat templates as package chat
// takes them, and a chat.Plan turned into a Request, so that an engine
// user gets llama-server's tool calls and reasoning with no HTTP.

import (
	"fmt"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/sampling"
)

// ChatResolver resolves chat templates given as text, llama.cpp's
// built-in format names rendered by llama.ApplyChatTemplate. jinja makes
// text that is not a built-in name Jinja source even without tags.
func ChatResolver(jinja bool) chat.Resolver {
	return chat.Resolver{Native: nativeChatTemplate, Jinja: jinja}
}

// nativeChatTemplate renders msgs' text with llama.cpp's built-in format
// tmpl.
func nativeChatTemplate(tmpl string, msgs []chat.Message, addAssistant bool) (string, error) {
	lm := make([]llama.ChatMessage, len(msgs))
	for i, m := range msgs {
		lm[i] = llama.ChatMessage{Role: m.Role, Content: m.Content}
	}
	return llama.ApplyChatTemplate(tmpl, lm, addAssistant)
}

// ChatTemplates returns the chat templates of model m as llama-server
// picks them: the model's own (chatml when it has none, or one that does
// not parse, which is reported to warn if not nil), its "tool_use"
// template for chats with tools when it has one that parses, and its BOS
// and EOS texts.
func ChatTemplates(m *llama.Model, warn func(msg string, args ...any)) (*chat.Templates, error) {
	if warn == nil {
		warn = func(string, ...any) {}
	}
	src, _ := m.ChatTemplate("")
	r, err := ChatResolver(false).ForModel(src, warn)
	if err != nil {
		return nil, err
	}
	t := ChatTemplatesFor(m, r)
	if src, ok := m.ChatTemplate("tool_use"); ok && strings.TrimSpace(src) != "" {
		if tt, err := chat.ParseTemplate(src); err == nil {
			t.ToolUse = chat.NewJinjaRenderer(tt)
		} else {
			warn("model's tool_use chat template does not parse; using its main template for tools", "err", err)
		}
	}
	return t, nil
}

// ChatTemplatesFor returns templates that render with r and m's special
// tokens.
func ChatTemplatesFor(m *llama.Model, r chat.Renderer) *chat.Templates {
	sp := m.SpecialTokens()
	return &chat.Templates{
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

// ChatTriggers converts a chat plan's grammar triggers for model m: a
// token trigger whose text is one token of m becomes that token, other
// token triggers become words.
func ChatTriggers(m *llama.Model, trs []chat.Trigger) []sampling.GrammarTrigger {
	var out []sampling.GrammarTrigger
	for _, tr := range trs {
		g := sampling.GrammarTrigger{Token: llama.NoToken}
		switch tr.Kind {
		case chat.TriggerWord:
			g.Word = tr.Value
		case chat.TriggerPattern:
			g.Pattern = tr.Value
		case chat.TriggerPatternFull:
			g.Pattern, g.PatternFull = tr.Value, true
		case chat.TriggerToken:
			toks, err := m.Tokenize(tr.Value, llama.TokenizeOptions{ParseSpecial: true})
			if err == nil && len(toks) == 1 {
				g.Token = toks[0]
			} else {
				g.Word = tr.Value
			}
		}
		out = append(out, g)
	}
	return out
}

// SetChat sets r to generate the answer of chat plan p with model m: its
// Prompt is p's prompt tokenized as llama-server tokenizes it (special
// tokens added and parsed), and its Params take p's grammar, lazy
// triggers and preserved tokens. The other settings of r are left as
// they are; read the output with p.ParseOutput or p.NewStream.
func (r *Request) SetChat(m *llama.Model, p *chat.Plan) error {
	toks, err := m.Tokenize(p.Prompt, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return fmt.Errorf("engine: tokenize the chat prompt: %w", err)
	}
	r.Prompt = toks
	SetChatGrammar(m, &r.Params, p)
	return nil
}

// SetChatGrammar sets the grammar of chat plan p in params when p has
// one: a tool grammar with its lazy triggers (added to those of params)
// and preserved tokens, or a response format's grammar. A plan without a
// grammar leaves params as they are.
func SetChatGrammar(m *llama.Model, params *sampling.Params, p *chat.Plan) {
	if p.Grammar == "" {
		return
	}
	params.Grammar = p.Grammar
	if p.ToolGrammar {
		params.GrammarLazy = p.GrammarLazy
		params.GrammarTriggers = append(params.GrammarTriggers, ChatTriggers(m, p.GrammarTriggers)...)
		params.PreservedTokens = p.PreservedTokens
	}
}
