package draft_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
)

// TestDraftModels holds batched drafting to Model.Draft: stories260K
// drafting for itself on four sequences of one context, round after round
// (histories that grow by what was accepted, one that starts over, one
// that sits a round out), gives each sequence the draft Draft gives it on
// a context of its own; and the mistakes of a caller are refused.
func TestDraftModels(t *testing.T) {
	ctx := context.Background()
	m := stories(t)
	tok := func(s string) []llama.Token {
		toks, err := m.Tokenize(s, llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		return toks
	}
	prompts := [][]llama.Token{tok("Once upon a time"), tok("Lily and Tom went to the park. They"),
		tok("The dog"), tok("One day, a little bird")}
	opts := llama.ContextOptions{ContextSize: 512, BatchSize: 64, Threads: 1, Sequences: len(prompts)}
	shared := newCtx(t, m, opts)
	var batched, alone []*draft.Model
	for i := range prompts {
		d, err := draft.NewModel(m, shared, draft.ModelOptions{NMax: 6, PMin: 0.2, Seq: i})
		require.NoError(t, err)
		batched = append(batched, d)
		o := opts
		o.Sequences = 1
		a, err := draft.NewModel(m, newCtx(t, m, o), draft.ModelOptions{NMax: 6, PMin: 0.2})
		require.NoError(t, err)
		alone = append(alone, a)
	}
	hist := make([][]llama.Token, len(prompts))
	for i, p := range prompts {
		hist[i] = append([]llama.Token(nil), p...)
	}
	drafted := 0
	for round := range 6 {
		var reqs []*draft.ModelRequest
		for i := range prompts {
			if round == 2 && i == 1 {
				reqs = append(reqs, nil) // sits this round out
				continue
			}
			reqs = append(reqs, &draft.ModelRequest{Model: batched[i], History: hist[i], Max: 4 + i})
		}
		require.NoError(t, draft.DraftModels(ctx, reqs))
		for i, r := range reqs {
			if r == nil {
				continue
			}
			want, err := alone[i].Draft(ctx, hist[i], 4+i)
			require.NoError(t, err)
			assert.Equal(t, want, r.Draft, "round %d, sequence %d", round, i)
			drafted += len(r.Draft)
			// Half the draft accepted, then a token of the target's.
			hist[i] = append(append(hist[i], r.Draft[:len(r.Draft)/2]...), llama.Token(100+round))
		}
		if round == 3 {
			hist[2] = append([]llama.Token(nil), prompts[2]...) // starts over
		}
	}
	assert.Greater(t, drafted, 20)

	other, err := draft.NewModel(m, newCtx(t, m, llama.ContextOptions{ContextSize: 64}), draft.ModelOptions{})
	require.NoError(t, err)
	err = draft.DraftModels(ctx, []*draft.ModelRequest{{Model: batched[0], History: hist[0], Max: 2}, {Model: other, History: hist[1], Max: 2}})
	assert.ErrorIs(t, err, llama.ErrInvalid)
	assert.ErrorContains(t, err, "different contexts")
	err = draft.DraftModels(ctx, []*draft.ModelRequest{{Model: batched[0], History: hist[0], Max: 2}, {Model: batched[0], History: hist[1], Max: 2}})
	assert.ErrorContains(t, err, "drafted twice")
	require.NoError(t, draft.DraftModels(ctx, []*draft.ModelRequest{{}, nil}))
	assert.ErrorIs(t, draft.DraftModels(ctx, []*draft.ModelRequest{{Model: &draft.Model{}}}), llama.ErrInvalid)
}
