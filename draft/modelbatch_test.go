package draft_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
)

// TestDraftModels holds batched drafting to Model.Draft: stories260K
// drafting for itself on four sequences of one context, round after round
// (histories that grow by what was accepted, one that starts over longer
// than a batch, one that sits a round out), gives each sequence the draft Draft gives it on
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
			// Starts over, longer than a batch (64): its catch-up takes
			// two batches.
			hist[2] = tok("The dog ran to the park. He saw a big tree and a little bird. The bird sang a song. " +
				"The dog was happy and he barked. Then the sun went down and the dog went home to sleep in his bed.")
			require.Greater(t, len(hist[2]), 64)
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

// FuzzDraftModels drafts with stories260K for itself on three sequences of
// one context at once, from fuzzed histories of valid tokens (some empty,
// some longer than the 128-token context), maxes and PMins, several
// rounds on the same drafters: never an error, never more than asked.
func FuzzDraftModels(f *testing.F) {
	f.Add([]byte("abcabcabcabc"), []byte("xyz"), []byte("Once upon a time"), 4, 2, 0.0)
	f.Add([]byte(""), []byte("a"), bytes.Repeat([]byte("long "), 40), 8, -3, 0.9)
	f.Fuzz(func(t *testing.T, h1, h2, h3 []byte, max, step int, pmin float64) {
		if len(h1)+len(h2)+len(h3) > 1024 {
			return
		}
		m := stories(t)
		c := newCtx(t, m, llama.ContextOptions{ContextSize: 384, BatchSize: 32, Threads: 1, Sequences: 3})
		var ds []*draft.Model
		for i := range 3 {
			d, err := draft.NewModel(m, c, draft.ModelOptions{NMax: 6, Seq: i})
			require.NoError(t, err)
			d.SetPMin(float32(pmin))
			ds = append(ds, d)
		}
		hists := [][]llama.Token{historyOf(h1, true), historyOf(h2, true), historyOf(h3, true)}
		for round := range 3 {
			var reqs []*draft.ModelRequest
			for i, h := range hists {
				reqs = append(reqs, &draft.ModelRequest{Model: ds[i], History: h, Max: max + round*step})
			}
			require.NoError(t, draft.DraftModels(context.Background(), reqs))
			for i, r := range reqs {
				require.LessOrEqual(t, len(r.Draft), ourMax(r.Max, 0))
				hists[i] = append(hists[i], r.Draft...)
			}
		}
	})
}
