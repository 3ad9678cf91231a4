package llama_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// offerDrafter offers a draft of as many tokens as asked at every every-th
// call, and records the verdicts it hears.
type offerDrafter struct {
	every    int
	calls    int
	accepted []int
}

func (d *offerDrafter) Draft(_ context.Context, _ []llama.Token, max int) ([]llama.Token, error) {
	d.calls++
	if d.every > 1 && d.calls%d.every != 0 {
		return nil, nil
	}
	return make([]llama.Token, max), nil
}

func (d *offerDrafter) Accepted(n int) { d.accepted = append(d.accepted, n) }

// TestAdaptiveDrafterBackoff follows DraftAdapt's rules step by step: the
// length of the draft at each of 200 steps (0: none) for a target that keeps
// nothing, everything or 3 tokens of each draft, with drafters offering at
// every step or at every 5th.
func TestAdaptiveDrafterBackoff(t *testing.T) {
	none := func(int) int { return 0 }
	all := func(k int) int { return k }
	three := func(k int) int { return min(k, 3) }
	cases := []struct {
		name  string
		adapt llama.DraftAdapt
		nMin  int
		every int
		keep  func(k int) int
		// want: the draft length at the steps listed; from step from on,
		// rest at the others; 0 before.
		want       map[int]int
		from, rest int
	}{
		{name: "rejected: sit-outs of 8, 32, 128 steps, probes of 2",
			keep: none, want: map[int]int{0: 8, 9: 2, 42: 2, 171: 2}},
		{name: "rejected, sparse offers: sit-outs as long as 8, 32 offers take",
			every: 5, keep: none, want: map[int]int{4: 8, 49: 2}},
		{name: "accepted: doubling up to what is asked",
			keep: all, want: map[int]int{0: 8, 1: 16, 2: 32}, from: 3, rest: 48},
		{name: "3 kept: down to 4-token drafts, which pay",
			keep: three, want: map[int]int{0: 8}, from: 9, rest: 4},
		{name: "start",
			adapt: llama.DraftAdapt{Start: 2}, keep: all, want: map[int]int{0: 2, 1: 4, 2: 8, 3: 16, 4: 32}, from: 5, rest: 48},
		{name: "max skip",
			adapt: llama.DraftAdapt{MaxSkip: 8}, keep: none, want: func() map[int]int {
				w := map[int]int{0: 8}
				for i := 9; i < 200; i += 9 {
					w[i] = 2
				}
				return w
			}()},
		{name: "huge max skip",
			adapt: llama.DraftAdapt{MaxSkip: math.MaxInt}, keep: none, want: map[int]int{0: 8, 9: 2, 42: 2, 171: 2}},
		{name: "n_min: probes no shorter",
			nMin: 3, keep: none, want: map[int]int{0: 8, 9: 3, 42: 3, 171: 3}},
		{name: "off: every step, all asked",
			adapt: llama.DraftAdapt{Off: true}, keep: none, from: 0, rest: 48},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inner := &offerDrafter{every: tc.every}
			a := &llama.AdaptiveDrafter{Drafter: inner, Adapt: tc.adapt, NMin: tc.nMin}
			var got, heard []int
			for range 200 {
				toks, err := a.Draft(context.Background(), nil, 48)
				require.NoError(t, err)
				got = append(got, len(toks))
				if len(toks) > 0 {
					n := tc.keep(len(toks))
					// A capped draft kept entirely is not reported.
					if tc.adapt.Off || n < len(toks) || len(toks) == 48 {
						heard = append(heard, n)
					}
					a.Accepted(n)
				}
			}
			want := make([]int, 200)
			for i := range want {
				if n, ok := tc.want[i]; ok {
					want[i] = n
				} else if tc.rest > 0 && i >= tc.from {
					want[i] = tc.rest
				}
			}
			assert.Equal(t, want, got)
			assert.Equal(t, heard, inner.accepted, "the verdicts the wrapped drafter hears")
		})
	}
}

// tokenDrafter drafts from a known continuation of the prompt: the tokens
// plain generation gives (right) or others (wrong, rejected at once).
type tokenDrafter struct {
	prompt int
	tokens []llama.Token
	wrong  bool
	vocab  int
}

func (d *tokenDrafter) Draft(_ context.Context, history []llama.Token, max int) ([]llama.Token, error) {
	i := len(history) - d.prompt // generated tokens so far, the next one's index
	if i >= len(d.tokens) {
		return nil, nil
	}
	out := append([]llama.Token(nil), d.tokens[i:min(i+max, len(d.tokens))]...)
	if d.wrong {
		for j := range out {
			out[j] = (out[j] + 1) % llama.Token(d.vocab)
		}
	}
	return out, nil
}

func (d *tokenDrafter) Accepted(int) {}

// TestSpeculativeAdapts runs speculative generation on stories260K with
// drafts that are always rejected or always accepted, adapted and not, and
// counts the drafts checked: rejected ones back off to a few, accepted ones
// grow; the output is plain generation's either way.
func TestSpeculativeAdapts(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	const prompt = "Once upon a time"
	plain := runGen(t, c, prompt, llama.GenerateOptions{MaxTokens: 200, IgnoreEOG: true})
	require.Len(t, plain.pieces, 200)
	toks, err := m.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	require.NoError(t, err)
	var gen []llama.Token
	for _, p := range plain.pieces {
		gen = append(gen, p.Token)
	}
	cases := []struct {
		name  string
		wrong bool
		adapt llama.DraftAdapt
		nMax  int
		want  llama.SpeculativeStats
	}{
		// Steps 0, 9, 42, 171 (see TestAdaptiveDrafterBackoff).
		{name: "rejected, adapted", wrong: true, want: llama.SpeculativeStats{Drafts: 4, Drafted: 8 + 3*2}},
		// 8 tokens at every step but the last (no room under MaxTokens);
		// fewer in the 8 before it.
		{name: "rejected, fixed", wrong: true, adapt: llama.DraftAdapt{Off: true}, nMax: 8,
			want: llama.SpeculativeStats{Drafts: 198, Drafted: 191*8 + 7*8/2}},
		// 8, 16, 32, 64, then the 74 left under MaxTokens (each step
		// samples one token past its draft).
		{name: "accepted, adapted", want: llama.SpeculativeStats{Drafts: 5, Drafted: 194, Accepted: 194}},
		{name: "accepted, fixed", adapt: llama.DraftAdapt{Off: true}, want: llama.SpeculativeStats{Drafts: 1, Drafted: 198, Accepted: 198}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &tokenDrafter{prompt: len(toks), tokens: gen, wrong: tc.wrong, vocab: m.VocabSize()}
			got := runGen(t, c, prompt, llama.GenerateOptions{MaxTokens: 200, IgnoreEOG: true,
				Speculative: &llama.Speculative{Drafters: []llama.Drafter{d}, Adapt: tc.adapt, NMax: tc.nMax}})
			require.Equal(t, plain.pieces, got.pieces)
			assert.Equal(t, tc.want, got.stats)
		})
	}
}
