package openai

import (
	"encoding/json"

	"github.com/x/llama/server/internal/wire"
)

// CompletionBody is a /v1/completions body: llama.cpp's completion fields
// (the model, the generation parameters, the prompt) and OpenAI's own.
type CompletionBody struct {
	wire.ModelField
	wire.Gen
	// Prompt is a string, token ids, a mix of both, or an array of those
	// (the server reads it as /completion's prompt).
	Prompt json.RawMessage `json:"prompt"`
	Unsupported
	// N, or llama.cpp's NCmpl, is the number of completions of each
	// prompt (NCmpl wins).
	N     wire.Num       `json:"n"`
	NCmpl wire.Num       `json:"n_cmpl"`
	Echo  wire.Opt[bool] `json:"echo"`
	// Suffix is the text after the insertion point: the prompt is then
	// the text before it, and the model fills in the middle (as /infill).
	// It shadows Unsupported's suffix, which chat completions refuse.
	Suffix json.RawMessage `json:"suffix"`
	// Logprobs is the number of top tokens to return (llama.cpp's n_probs).
	Logprobs wire.Num `json:"logprobs"`
}

// Check rejects what the server cannot answer: no prompt, best_of, a
// suffix that is not a string, and echo with a suffix.
func (b *CompletionBody) Check() error {
	if len(b.Prompt) == 0 {
		return wire.Errorf(`"prompt" is required`)
	}
	if err := b.Unsupported.Check(); err != nil {
		return err
	}
	var echo bool
	if err := b.Echo.Read(&echo, "a boolean"); err != nil {
		return err
	}
	if b.HasSuffix() && wire.Kind(b.Suffix) != 's' {
		return wire.Errorf(`"suffix" must be a string`)
	}
	if echo && b.HasSuffix() {
		return wire.Errorf(`"echo" cannot be used with "suffix"`)
	}
	return nil
}

// Echoes reports whether the answer starts with its prompt (echo).
func (b *CompletionBody) Echoes() bool { return b.Echo.Set && !b.Echo.Bad && b.Echo.V }

// HasSuffix reports whether the body asks to fill in before a suffix.
func (b *CompletionBody) HasSuffix() bool { return len(b.Suffix) > 0 && !wire.IsNull(b.Suffix) }

// NProbs reads logprobs into nProbs, unless the body gives llama.cpp's own
// n_probs.
func (b *CompletionBody) NProbs(nProbs *int) error {
	if b.Logprobs.Set && !b.Params.Has("n_probs") {
		return b.Logprobs.Int(nProbs, 0, 20)
	}
	return nil
}

// Unsupported are the OpenAI fields the server cannot honour.
type Unsupported struct {
	BestOf json.RawMessage `json:"best_of"`
	Suffix json.RawMessage `json:"suffix"`
}

// Check rejects best_of and suffix.
func (u *Unsupported) Check() error {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"best_of", u.BestOf}, {"suffix", u.Suffix}} {
		if len(f.raw) > 0 {
			return wire.Errorf("unsupported parameter: %s", f.name)
		}
	}
	return nil
}
