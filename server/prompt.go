package server

// An instance's prompts: text tokenized as llama.cpp does, chats rendered
// by the model's template, and the context size one task can use.

import (
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

// renderChat applies the instance's chat template
// (chat.Templates.Render); errors are 400s.
func (inst *instance) renderChat(msgs []chat.Message, tools []chat.Tool, addGen bool, extra map[string]any) (string, error) {
	out, err := inst.chatTemplates().Render(msgs, tools, addGen, extra)
	return out, chatError(err)
}

// slotContext is the context size one task can use.
func (inst *instance) slotContext() int {
	if n := inst.Engine.SlotContext(); n > 0 {
		return n
	}
	if o := inst.Opts.Engine; o.Context.ContextSize > 0 {
		if o.Parallel > 1 && !o.Context.KVUnified {
			return o.Context.ContextSize / o.Parallel
		}
		return o.Context.ContextSize
	}
	return inst.Model.TrainContext()
}
