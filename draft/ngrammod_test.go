package draft_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
)

// seqTokens returns n tokens that never repeat an n-gram: i+100.
func seqTokens(from, n int) []llama.Token {
	out := make([]llama.Token, n)
	for i := range out {
		out[i] = llama.Token(from + i)
	}
	return out
}

// TestNgramMod holds the drafter to llama.cpp's ngram-mod: a sequence
// that repeats an earlier part drafts what followed it there, up to NMax
// and not past what the table knows; a draft shorter than NMin is
// dropped; the n-grams of another sequence sharing the table are found
// too; five poorly accepted drafts in a row clear the table.
func TestNgramMod(t *testing.T) {
	ctx := context.Background()
	part := seqTokens(100, 40)
	// A prompt with part in it, then a generation that starts part again.
	prompt := append(append(seqTokens(1000, 30), part...), seqTokens(2000, 10)...)
	history := append(append([]llama.Token{}, prompt...), part[:5]...)

	tb := draft.NewNgramModTable(4)
	d := &draft.NgramMod{Table: tb, NMin: 2, NMax: 16}
	got, err := d.Draft(ctx, history, 100)
	require.NoError(t, err)
	assert.Equal(t, part[5:21], got, "what followed the last 4 tokens, 16 at most")

	got, _ = d.Draft(ctx, history, 3)
	assert.Equal(t, part[5:8], got, "max caps the draft")

	// Near the end of part, the draft runs on into what followed part in
	// the prompt, then into what followed that: this generation.
	h2 := append(append([]llama.Token{}, prompt...), part[:36]...)
	got, _ = d.Draft(ctx, h2, 100)
	want := append(append(append([]llama.Token{}, part[36:]...), seqTokens(2000, 10)...), part[:2]...)
	assert.Equal(t, want, got)

	// NMin drops a draft the table cannot make that long: after a
	// sequence of X, part, Y and a last token q (whose n-gram is not in
	// the table yet), a chain from part[4] ends after Y: 46 tokens.
	tb2 := draft.NewNgramModTable(4)
	seen := append(append(append(seqTokens(1000, 30), part...), seqTokens(2000, 10)...), 7)
	got, _ = (&draft.NgramMod{Table: tb2, NMin: 1}).Draft(ctx, seen, 100)
	assert.Empty(t, got)
	start := append(seqTokens(5000, 3), part[:4]...)
	got, _ = (&draft.NgramMod{Table: tb2, NMin: 50}).Draft(ctx, start, 100)
	assert.Empty(t, got, "46 tokens known: under NMin 50")
	got, _ = (&draft.NgramMod{Table: tb2, NMin: 40}).Draft(ctx, start, 100)
	assert.Equal(t, append(append([]llama.Token{}, part[4:]...), seqTokens(2000, 10)...), got)

	// Another sequence sharing the table finds this one's n-grams.
	other := &draft.NgramMod{Table: tb, NMin: 1, NMax: 8}
	got, _ = other.Draft(ctx, append(seqTokens(5000, 3), part[:4]...), 100)
	assert.Equal(t, part[4:12], got)

	// Five drafts in a row with less than a quarter accepted clear the
	// shared table.
	for range 5 {
		got, _ = d.Draft(ctx, history, 100)
		require.NotEmpty(t, got)
		d.Accepted(0)
	}
	got, _ = other.Draft(ctx, append(seqTokens(5000, 3), part[:4]...), 100)
	assert.Empty(t, got, "the table was cleared")
}
