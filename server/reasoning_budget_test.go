package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestReasoningBudgetSampler walks the budget sampler through its states
// in a chain on stories260K's vocabulary: prompt tokens accepted before
// the first Apply are ignored, a start tag arms it, the budget's last
// token starts the forcing (the forced token is the only candidate,
// whatever the samplers before it kept), a natural end tag ends the
// count, a new start tag re-arms it, and a budget of 0 forces at once.
func TestReasoningBudgetSampler(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	tok := func(s string) []llama.Token {
		toks, err := m.Tokenize(s, llama.TokenizeOptions{ParseSpecial: true})
		require.NoError(t, err)
		return toks
	}
	start, end, msg := tok("<think>"), tok("</think>"), tok("Done.")
	word := tok("cat")[0]
	other := tok("dog")[0]
	spec := budgetSpec{model: m, start: "<think>", ends: []string{"</think>"}, msg: "Done.", budget: 3}
	big := spec
	big.budget = 10
	type step struct {
		accept []llama.Token
		force  llama.Token // the token Apply leaves (llama.NoToken: none forced)
	}
	forcing := func() []step { // the message then the end tag, one token each
		var s []step
		for _, t := range append(append([]llama.Token{}, msg...), end...) {
			s = append(s, step{accept: []llama.Token{t}, force: t})
		}
		return s
	}
	seq := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	free := func(toks ...llama.Token) []step { return []step{{accept: toks, force: llama.NoToken}} }
	for _, tc := range []struct {
		name  string
		spec  budgetSpec
		steps []step
	}{
		{"idle until a start tag", spec, free(word, word, word, word, word)},
		{"start tag, budget, forcing, then free", spec, seq(free(start...), free(word, word), free(word), forcing(), free(word, word, word, word))},
		// (The end tag's tokens count: the budget must outlast them.)
		{"natural end stops the count", big, seq(free(start...), free(word), free(end...), free(word, word, word, word, word, word, word, word, word, word, word))},
		{"a new start tag re-arms", big, seq(free(start...), free(end...), free(start...), free(word, word, word, word, word, word, word, word, word, word), forcing())},
		{"open in the prompt", budgetSpec{model: m, start: "<think>", ends: []string{"</think>"}, msg: "Done.", budget: 3, open: true, used: 1},
			seq(free(word, word), forcing())},
		{"budget 0 forces at once", budgetSpec{model: m, start: "<think>", ends: []string{"</think>"}, msg: "Done.", budget: 0},
			seq(free(start...), forcing(), free(word))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.spec.sampler()
			require.NotNil(t, r)
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.TopK(1), llama.Custom(r), llama.Greedy())
			require.NoError(t, err)
			defer chain.Close()
			// Prompt tokens (before any Apply) change nothing.
			for _, t2 := range append(append([]llama.Token{}, start...), word) {
				require.NoError(t, chain.Accept(t2))
			}
			cands := []llama.TokenData{{ID: word, Logit: 2}, {ID: other, Logit: 1}}
			for i, s := range tc.steps {
				for _, a := range s.accept {
					out, sel, err := chain.Apply(cands)
					require.NoError(t, err)
					got := out[sel].ID
					if s.force != llama.NoToken {
						assert.Equal(t, s.force, got, "step %d: forced", i)
					} else {
						assert.Equal(t, word, got, "step %d: free", i)
					}
					require.NoError(t, chain.Accept(a))
				}
			}
		})
	}
}
