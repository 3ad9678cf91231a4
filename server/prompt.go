package server

// An instance's prompts: text tokenized as llama.cpp does, chats rendered
// by the model's template, and the context size one task can use.

import (
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
)

// tokenizePrompt tokenizes prompt text the way llama.cpp does: the model's
// special tokens added (BOS) and special token text parsed.
func (inst *instance) tokenizePrompt(text string) ([]llama.Token, error) {
	if err := inst.checkPromptText(text); err != nil {
		return nil, err
	}
	toks, err := tokenizeText(inst.Model, text, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return nil, badRequest("cannot tokenize the prompt: %v", err)
	}
	return toks, nil
}

// specialText returns a special token's text ("" when absent).
func (inst *instance) specialText(t llama.Token) string {
	if t == llama.NoToken {
		return ""
	}
	s, err := inst.Model.TokenPiece(t, true)
	if err != nil {
		return ""
	}
	return s
}

// renderChat applies the instance's chat template. A BOS text the template
// writes at the start is removed when the tokenizer adds BOS itself, so the
// prompt does not start with two. Template errors are 400s.
func (inst *instance) renderChat(msgs []chat.Message, tools []chat.Tool, addGen bool, extra map[string]any) (string, error) {
	sp := inst.Model.SpecialTokens()
	bos, eos := inst.specialText(sp.BOS), inst.specialText(sp.EOS)
	tmpl := inst.template(len(tools) > 0)
	out, err := tmpl.Render(chat.TemplateInput{
		Messages: msgs, Tools: tools, AddGenerationPrompt: addGen,
		BOSToken: bos, EOSToken: eos, Extra: inst.templateKwargs(tmpl, extra),
	})
	if err != nil {
		return "", badRequest("cannot apply the chat template: %v", err)
	}
	if sp.AddBOS && bos != "" {
		out = strings.TrimPrefix(out, bos)
	}
	return out, nil
}

// templateKwargs returns extra with enable_thinking set as llama.cpp sets
// it when the request does not: true with --reasoning on, false with off,
// and with auto (the default) whether the template reacts to it.
func (inst *instance) templateKwargs(tmpl promptRenderer, extra map[string]any) map[string]any {
	if _, ok := extra["enable_thinking"]; ok {
		return extra
	}
	out := make(map[string]any, len(extra)+1)
	for k, v := range extra {
		out[k] = v
	}
	switch inst.Opts.Reasoning {
	case "on":
		out["enable_thinking"] = true
	case "off":
		out["enable_thinking"] = false
	default:
		out["enable_thinking"] = tmpl.Caps().SupportsThinking
	}
	return out
}

// slotContext is the context size one task can use.
func (inst *instance) slotContext() int {
	if slots := inst.Engine.SlotsInfo(); len(slots) > 0 && slots[0].NCtx > 0 {
		return slots[0].NCtx
	}
	if o := inst.Opts.Engine; o.CtxSize > 0 {
		{
			if o.Parallel > 1 && !o.KVUnified {
				return o.CtxSize / o.Parallel
			}
			return o.CtxSize
		}
	}
	return inst.Model.TrainContext()
}
