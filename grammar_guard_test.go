package llama_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

// TestGrammarGuard feeds grammars what would abort llama.cpp: accepting a
// token the grammar rejects, end of generation before the grammar is
// complete, and a lazy trigger whose text the grammar does not accept.
// Each must be an error, and the process must live.
func TestGrammarGuard(t *testing.T) {
	m := stories(t)
	tok := func(s string) llama.Token {
		ts, err := m.Tokenize(s, llama.TokenizeOptions{})
		require.NoError(t, err)
		return ts[len(ts)-1]
	}
	eos := m.SpecialTokens().EOS

	t.Run("accept rejected token", func(t *testing.T) {
		s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, mustGrammar(t, `root ::= "yes" | "no"`).Sampler(), llama.Greedy())
		require.NoError(t, err)
		defer s.Close()
		err = s.Accept(tok("Lily"))
		assert.ErrorIs(t, err, llama.ErrGrammar)
		// Failed: only end of generation remains possible.
		out, _, err := s.Apply([]llama.TokenData{{ID: tok("yes"), Logit: 10}, {ID: eos, Logit: 0}})
		require.NoError(t, err)
		for _, c := range out {
			if c.ID != eos {
				assert.Less(t, c.Logit, float32(-1e30))
			}
		}
	})
	t.Run("eos before complete", func(t *testing.T) {
		s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, mustGrammar(t, `root ::= "yes" | "no"`).Sampler())
		require.NoError(t, err)
		defer s.Close()
		assert.ErrorIs(t, s.Accept(eos), llama.ErrGrammar)
	})
	t.Run("lazy trigger text rejected", func(t *testing.T) {
		c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
		// The greedy story says "named Lily"; the trigger fires on "named",
		// whose text the grammar does not accept.
		s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{},
			mustGrammar(t, `root ::= "Lily" [a-z ]*`).LazySampler([]string{"named"}, nil), llama.Greedy())
		require.NoError(t, err)
		defer s.Close()
		var gotErr error
		for _, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 40, Sampler: s}).Seq() {
			if err != nil {
				gotErr = err
			}
		}
		assert.ErrorIs(t, gotErr, llama.ErrGrammar)
	})
	named := tok(" named")
	tokenGrammar := fmt.Sprintf(`root ::= <[%d]> " Zed" "."`, named)
	for _, lc := range []struct {
		name, grammar string
		patterns      []string
		tokens        []llama.Token
	}{
		// The match starts inside the token " named": its cut text.
		{"lazy trigger constrains after it", `root ::= "named" " Zed" "."`, []string{`(named)`}, nil},
		// As llama.cpp, the trigger token goes to the grammar as itself,
		// so a token reference can match it; so does a token the
		// pattern's match holds whole.
		{"lazy trigger token taken as the token", tokenGrammar, nil, []llama.Token{named}},
		{"lazy pattern replays whole tokens as themselves", tokenGrammar, []string{`girl( named)`}, nil},
		// As llama.cpp: a pattern ^...$ that does not match the whole
		// text is searched for anywhere in it, here its second
		// alternative.
		{"full pattern found anywhere", tokenGrammar, []string{`^x|girl( named)$`}, nil},
	} {
		t.Run(lc.name, func(t *testing.T) {
			c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
			s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{},
				mustGrammar(t, lc.grammar).LazySampler(lc.patterns, lc.tokens), llama.Greedy())
			require.NoError(t, err)
			defer s.Close()
			out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 40, Sampler: s})
			assert.True(t, strings.HasPrefix(out, ", there was a little girl named Zed."), out)
		})
	}
	t.Run("slow trigger patterns", func(t *testing.T) {
		// Each pattern holds thousands of live states a byte: searching
		// the text at every token soon takes longer than the bound.
		c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
		slow := slices.Repeat([]string{strings.Repeat(".*", 1360) + "Q"}, 60)
		s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, mustGrammar(t, `root ::= "x"`).LazySampler(slow, nil), llama.Greedy())
		require.NoError(t, err)
		defer s.Close()
		var gotErr error
		for _, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 200, Sampler: s}).Seq() {
			if err != nil {
				gotErr = err
			}
		}
		require.ErrorIs(t, gotErr, llama.ErrGrammar)
		assert.ErrorContains(t, gotErr, "trigger patterns took")
	})
	t.Run("bad trigger pattern", func(t *testing.T) {
		big := strings.Repeat("a{1000}", 580) // a 4 KB pattern of 580,000 instructions
		var nb strings.Builder                // a thousand tool names
		for i := range 1000 {
			fmt.Fprintf(&nb, "%c%d_get_tool|", 'a'+i%26, i*7919%10007)
		}
		names := nb.String()
		for _, bad := range []struct {
			name     string
			patterns []string
		}{
			{"lookahead", []string{"(?=x)"}},
			{"none", nil},
			{"repetitions multiply", []string{big}},
			{"nested repetitions", []string{"((a{100}){100}){100}"}},
			{"too large together", slices.Repeat([]string{"(" + names + "x)"}, 40)},
			{"captures times size", []string{strings.Repeat("(?:.?){1000}", 19) + strings.Repeat("()", 60) + "x"}},
			{"too many captures", []string{strings.Repeat("(a)", 65)}},
		} {
			_, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, mustGrammar(t, `root ::= "x"`).LazySampler(bad.patterns, nil))
			assert.ErrorIs(t, err, llama.ErrInvalid, bad.name)
		}
		assert.ErrorIs(t, llama.CheckTriggerPattern(big), llama.ErrInvalid)
		require.NoError(t, llama.CheckTriggerPattern("(?:"+names+"x)[\\s\\S]*"))
		s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, mustGrammar(t, `root ::= "x"`).LazySampler([]string{"(" + names + "x)", "a{1000}"}, nil))
		require.NoError(t, err)
		s.Close()
	})
	t.Run("clone keeps state", func(t *testing.T) {
		s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, mustGrammar(t, `root ::= "ab" "cd"`).Sampler())
		require.NoError(t, err)
		defer s.Close()
		c2, err := s.Clone()
		require.NoError(t, err)
		defer c2.Close()
		assert.ErrorIs(t, c2.Accept(eos), llama.ErrGrammar, "the clone fails on its own")
		out, _, err := s.Apply([]llama.TokenData{{ID: eos, Logit: 1}, {ID: tok("Lily"), Logit: 2}})
		require.NoError(t, err)
		for _, c := range out {
			assert.Less(t, c.Logit, float32(-1e30), "the original still constrains: neither EOS nor Lily starts \"ab\"")
		}
	})
}
