package llama_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// TestStopReasonString: a StopReason prints as a word, not a number.
func TestStopReasonString(t *testing.T) {
	for _, tc := range []struct {
		r    llama.StopReason
		want string
	}{
		{llama.StopNone, "none"},
		{llama.StopEOG, "eog"},
		{llama.StopMaxTokens, "max-tokens"},
		{llama.StopString, "stop-string"},
		{llama.StopContext, "context-full"},
		{llama.StopReason(42), "StopReason(42)"},
	} {
		assert.Equal(t, tc.want, tc.r.String())
		assert.Equal(t, tc.want, fmt.Sprint(tc.r))
	}
}

// TestGenerationStats: the Generation that Generate returns keeps Stats,
// which count the prompt's and the generated tokens and time them;
// its errors come from Seq.
func TestGenerationStats(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	ctx := context.Background()
	prompt, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		opts      llama.GenerateOptions
		prompt    string
		reason    llama.StopReason
		generated int
		promptN   int
	}{
		{"max tokens", llama.GenerateOptions{MaxTokens: 8}, "Once upon a time", llama.StopMaxTokens, 8, len(prompt)},
		{"stop string", llama.GenerateOptions{MaxTokens: 64, Stop: []string{"Lily"}}, "Once upon a time", llama.StopString, -1, len(prompt)},
		{"kept prefix", llama.GenerateOptions{MaxTokens: 4, Keep: true}, " she", llama.StopMaxTokens, 4, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gen := c.Generate(ctx, tc.prompt, tc.opts)
			var text string
			for p, err := range gen.Seq() {
				require.NoError(t, err)
				text += p.Text
			}
			assert.NotEmpty(t, text)
			assert.Equal(t, tc.reason, gen.Reason())
			st := gen.Stats()
			assert.Equal(t, gen.Generated(), st.Generated)
			if tc.generated >= 0 {
				assert.Equal(t, tc.generated, st.Generated)
			} else {
				assert.Positive(t, st.Generated)
			}
			if tc.promptN >= 0 {
				assert.Equal(t, tc.promptN, st.PromptTokens)
			} else {
				// Keep: only the new prompt's tokens are decoded.
				assert.Positive(t, st.PromptTokens)
				assert.Less(t, st.PromptTokens, len(prompt))
			}
			assert.Positive(t, st.PromptTime)
			assert.Positive(t, st.GenerateTime)
			assert.Positive(t, st.PromptPerSecond())
			assert.Positive(t, st.GeneratedPerSecond())
		})
	}
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			c    *llama.Context
			p    string
		}{{"empty prompt", c, ""}, {"nil context", nil, "Once"}} {
			gen := tc.c.Generate(ctx, tc.p, llama.GenerateOptions{})
			n := 0
			for _, err := range gen.Seq() {
				assert.ErrorIs(t, err, llama.ErrInvalid, tc.name)
				n++
			}
			assert.Equal(t, 1, n, tc.name)
			assert.Equal(t, llama.GenerationStats{}, gen.Stats(), tc.name)
		}
	})
	assert.Zero(t, llama.GenerationStats{}.GeneratedPerSecond())
}

// TestBatchAddNegativeToken: Add refuses a negative token (NoToken among
// them), as its doc says, and the batch is left as it was.
func TestBatchAddNegativeToken(t *testing.T) {
	for _, tok := range []llama.Token{llama.NoToken, -2, -1 << 31} {
		b := llama.NewBatch(4, 2)
		require.NoError(t, b.Add(1, 0, 0, false))
		assert.ErrorIs(t, b.Add(tok, 1, 0, true), llama.ErrInvalid)
		assert.ErrorIs(t, b.AddShared(tok, 1, []int{0, 1}, true), llama.ErrInvalid)
		assert.ErrorIs(t, b.AddSequence([]llama.Token{2, tok}, 1, 0, true), llama.ErrInvalid)
		assert.LessOrEqual(t, b.Len(), 2, "AddSequence stops at the bad token")
	}
}

// TestModelClosedBeforeEngine: closing the model under an engine or a
// context is safe, and what they do next fails with ErrClosed saying that
// the model was closed before them.
func TestModelClosedBeforeEngine(t *testing.T) {
	load := func(t *testing.T) (*llama.Model, []llama.Token) {
		m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
		require.NoError(t, err)
		toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		return m, toks
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) error
	}{
		{"engine", func(t *testing.T) error {
			m, toks := load(t)
			eng, err := engine.New(m, engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 256, Threads: 1}})
			require.NoError(t, err)
			defer func() { assert.NoError(t, eng.Close()) }()
			require.NoError(t, m.Close())
			var got error
			for _, err := range eng.Generate(context.Background(), engine.NewRequest(toks)) {
				if err != nil {
					got = err
				}
			}
			return got
		}},
		{"context", func(t *testing.T) error {
			m, toks := load(t)
			c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
			require.NoError(t, err)
			require.NoError(t, m.Close())
			b := llama.NewBatch(16, 1)
			require.NoError(t, b.AddSequence(toks, 0, 0, true))
			return c.Decode(context.Background(), b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(t)
			require.ErrorIs(t, err, llama.ErrClosed)
			assert.Contains(t, err.Error(), "before its model")
		})
	}
	t.Run("model alone", func(t *testing.T) {
		m, _ := load(t)
		require.NoError(t, m.Close())
		_, err := m.NewContext(llama.ContextOptions{})
		require.ErrorIs(t, err, llama.ErrClosed)
		assert.NotContains(t, err.Error(), "before its model", "no context was open")
	})
}
