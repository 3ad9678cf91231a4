package draft_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/llama"
	"github.com/x/llama/draft"
)

// TestNgramMap holds the map to llama.cpp's ngram-map-k and -k4v, step by
// step: each row runs Begin (when it has a prompt) and Draft calls with
// verdicts on one map, and checks each draft.
func TestNgramMap(t *testing.T) {
	toks := func(v ...int) []llama.Token {
		out := make([]llama.Token, len(v))
		for i, x := range v {
			out[i] = llama.Token(x)
		}
		return out
	}
	// The key 1 2 follows a first token (position 0 never counts, as in
	// llama.cpp) and comes back as the last two tokens.
	repeat := toks(99, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2)
	// A shorter sequence with the same key and continuation.
	other := toks(98, 1, 2, 3, 4, 5, 6, 7, 1, 2)
	// The key 1 2 followed by 3 4, then 5 6, and back at the end.
	split := toks(99, 1, 2, 3, 4, 1, 2, 5, 6, 77, 78, 79, 1, 2)
	// The same, then 3 4 once more: 3 4 is seen twice as often as 5 6.
	major := toks(99, 1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 3, 4, 77, 78, 79, 80, 1, 2)
	type step struct {
		begin    []llama.Token // Begin(begin) first, when set
		history  []llama.Token
		max      int
		want     []llama.Token
		accepted int // the verdict, after a draft
	}
	for _, tt := range []struct {
		name  string
		m     *draft.NgramMap
		steps []step
	}{
		{"drafts what followed the key", &draft.NgramMap{SizeN: 2, SizeM: 3}, []step{
			{history: repeat, max: 10, want: toks(3, 4, 5), accepted: 3},
			{history: repeat, max: 2, want: toks(3, 4), accepted: 2},
		}},
		{"too short a history", &draft.NgramMap{SizeN: 2, SizeM: 3}, []step{
			{history: repeat[:7], max: 10},
			{history: toks(5, 1, 2, 7, 7, 7, 1, 2), max: 10, want: toks(7, 7, 7), accepted: 0},
		}},
		{"remembers what was accepted of the key", &draft.NgramMap{SizeN: 2, SizeM: 3}, []step{
			{history: repeat, max: 10, want: toks(3, 4, 5), accepted: 1},
			{history: repeat, max: 10, want: toks(3), accepted: 1},
			// A prompt that goes on from the last: the statistics stay.
			{begin: repeat[:len(repeat)-1], history: repeat, max: 10, want: toks(3), accepted: 0},
			{history: repeat, max: 10, want: toks()},
		}},
		{"a shorter prompt forgets", &draft.NgramMap{SizeN: 2, SizeM: 3}, []step{
			{history: repeat, max: 10, want: toks(3, 4, 5), accepted: 0},
			{begin: other[:len(other)-1], history: other, max: 10, want: toks(3, 4, 5)},
		}},
		{"a shorter history begins by itself", &draft.NgramMap{SizeN: 2, SizeM: 3}, []step{
			{history: repeat, max: 10, want: toks(3, 4, 5), accepted: 0},
			{history: other, max: 10, want: toks(3, 4, 5)},
		}},
		{"k4v: continuations as frequent as each other", &draft.NgramMap{SizeN: 2, SizeM: 2, Values: true}, []step{
			{history: split, max: 10},
		}},
		{"k4v: one continuation twice as frequent", &draft.NgramMap{SizeN: 2, SizeM: 2, Values: true}, []step{
			{history: major, max: 10, want: toks(3, 4), accepted: 1},
			{history: major, max: 10, want: toks(3), accepted: 1},
		}},
		{"k4v: min hits", &draft.NgramMap{SizeN: 2, SizeM: 2, Values: true, MinHits: 3}, []step{
			{history: major, max: 10},
			{history: major, max: 10},
			{history: major, max: 10, want: toks(3, 4)},
		}},
		{"k4v ignores min hits without values", &draft.NgramMap{SizeN: 2, SizeM: 2, MinHits: 3}, []step{
			{history: major, max: 10, want: toks(3, 4)},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i, s := range tt.steps {
				if s.begin != nil {
					tt.m.Begin(s.begin)
				}
				got, err := tt.m.Draft(context.Background(), s.history, s.max)
				assert.NoError(t, err)
				assert.Equal(t, len(s.want), len(got), "step %d: %v", i, got)
				if len(s.want) > 0 {
					assert.Equal(t, s.want, got, "step %d", i)
					tt.m.Accepted(s.accepted)
				}
			}
		})
	}
}
