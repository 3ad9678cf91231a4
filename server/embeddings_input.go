package server

// Prompt inputs as llama.cpp's embedding and rerank endpoints take them: a
// string, a list of token ids, a list mixing strings and token ids, or a
// list of any of these (one prompt each).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/x/llama"
)

// embdPiece is a piece of a prompt: text or a token id.
type embdPiece struct {
	Text    string
	Token   llama.Token
	IsToken bool
}

// embdPrompt is one prompt given as text and token ids.
type embdPrompt []embdPiece

// parseEmbdPrompts reads llama.cpp's prompt shapes: a string or an array
// holding at least one number is one prompt; any other array is a list of
// prompts, each a string or an array of strings and numbers.
func parseEmbdPrompts(raw json.RawMessage) ([]embdPrompt, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New("the input is missing")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []embdPrompt{{{Text: s}}}, nil
	}
	if raw[0] != '[' {
		return nil, errors.New("the input must be a string, an array of tokens or an array of prompts")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	hasNumber := false
	for _, it := range items {
		if c := firstByte(it); c == '-' || (c >= '0' && c <= '9') {
			hasNumber = true
		}
	}
	if hasNumber {
		p, err := parseEmbdPrompt(raw)
		if err != nil {
			return nil, err
		}
		return []embdPrompt{p}, nil
	}
	if len(items) == 0 {
		return nil, errors.New("the input must not be empty")
	}
	out := make([]embdPrompt, 0, len(items))
	for i, it := range items {
		p, err := parseEmbdPrompt(it)
		if err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func firstByte(b []byte) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// parseEmbdPrompt reads one prompt: a string or an array of strings and
// token ids.
func parseEmbdPrompt(raw json.RawMessage) (embdPrompt, error) {
	switch firstByte(raw) {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return embdPrompt{{Text: s}}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		p := make(embdPrompt, 0, len(items))
		for _, it := range items {
			if firstByte(it) == '"' {
				var s string
				if err := json.Unmarshal(it, &s); err != nil {
					return nil, err
				}
				p = append(p, embdPiece{Text: s})
				continue
			}
			var n int64
			if err := json.Unmarshal(it, &n); err != nil {
				return nil, fmt.Errorf("a prompt element must be a string or a token id, not %s", it)
			}
			if n < 0 || n > 1<<31-1 {
				return nil, fmt.Errorf("token id %d out of range", n)
			}
			p = append(p, embdPiece{Token: llama.Token(n), IsToken: true})
		}
		return p, nil
	}
	return nil, fmt.Errorf("a prompt must be a string or an array of strings and token ids, not %s", raw)
}

// tokenize turns the prompt into tokens. Special tokens (BOS...) are added,
// when addSpecial is set, only to a leading string, as llama.cpp does.
// Token ids must exist in the model's vocabulary.
func (p embdPrompt) tokenize(m *llama.Model, addSpecial, parseSpecial bool) ([]llama.Token, error) {
	var out []llama.Token
	for i, pc := range p {
		if pc.IsToken {
			if err := m.CheckToken(pc.Token); err != nil {
				return nil, fmt.Errorf("invalid token id %d", pc.Token)
			}
			out = append(out, pc.Token)
			continue
		}
		toks, err := tokenizeText(m, pc.Text, llama.TokenizeOptions{AddSpecial: addSpecial && i == 0, ParseSpecial: parseSpecial})
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}
