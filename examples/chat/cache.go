package main

import (
	"context"
	"iter"

	"github.com/x/llama"
)

// promptCache remembers the tokens in the context's memory (sequence 0) so
// that each turn decodes only what differs from the previous one: the
// conversation so far stays in the KV cache.
type promptCache struct {
	past []llama.Token
}

// generate tokenizes the whole prompt, keeps the longest prefix already in
// memory, decodes the rest and generates, recording what it decodes.
func (pc *promptCache) generate(ctx context.Context, c *llama.Context, prompt string, o llama.GenerateOptions) (iter.Seq2[llama.Piece, error], error) {
	toks, err := c.Model().Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return nil, err
	}
	n := 0
	for n < len(pc.past) && n < len(toks) && pc.past[n] == toks[n] {
		n++
	}
	if n == len(toks) { // decode at least the last token to get logits
		n--
	}
	if len(toks)+max(o.MaxTokens, 0) >= c.SeqSize() { // no room: start over
		n = 0
	}
	if _, err := c.Memory().Remove(0, n, -1); err != nil {
		return nil, err
	}
	pc.past = append(pc.past[:0], toks[:n]...)
	o.Keep = true
	g := c.GenerateTokens(ctx, toks[n:], o)
	pc.past = append(pc.past, toks[n:]...)
	return func(yield func(llama.Piece, error) bool) {
		defer func() {
			// Keep only what memory holds (a token that ended generation,
			// or one cut off by cancellation, was never decoded).
			if _, hi, err := c.Memory().PosRange(0); err == nil && hi+1 < len(pc.past) {
				pc.past = pc.past[:max(hi+1, 0)]
			}
		}()
		for p, err := range g.Seq() {
			if err == nil && p.Token != llama.NoToken {
				pc.past = append(pc.past, p.Token)
			}
			if !yield(p, err) {
				return
			}
		}
	}, nil
}
