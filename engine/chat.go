package engine

// Chats for in-process users: a chat.Plan (from chat.ForModel's templates)
// turned into a Request, so that an engine user gets llama-server's tool
// calls and reasoning with no HTTP.

import (
	"fmt"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/sampling"
)

// ChatResolver is chat.NewResolver.
//
// Deprecated: use chat.NewResolver.
func ChatResolver(jinja bool) chat.Resolver { return chat.NewResolver(jinja) }

// ChatTemplates is chat.ForModel.
//
// Deprecated: use chat.ForModel, which needs no engine.
func ChatTemplates(m *llama.Model, warn func(msg string, args ...any)) (*chat.Templates, error) {
	return chat.ForModel(m, warn)
}

// ChatTemplatesFor is chat.ForModelWith.
//
// Deprecated: use chat.ForModelWith, which needs no engine.
func ChatTemplatesFor(m *llama.Model, r chat.Renderer) *chat.Templates {
	return chat.ForModelWith(m, r)
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
			if tok, ok := m.SingleToken(tr.Value); ok {
				g.Token = tok
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
