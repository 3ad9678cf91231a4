package draft_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/internal/testenv"
)

// mtpModel writes and loads (with its MTP block) a random GLM-4.5-layout
// model; passThrough makes its layers pass their input on, so that its
// head drafts what the model says.
func mtpModel(t *testing.T, passThrough bool) *llama.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "glm.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "glm4moe", NLayer: 2, NextN: 1, Seed: 7,
		PassThrough: passThrough, VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")}))
	return modeltest.LoadPath(t, path, llama.ModelOptions{MTP: true})
}

// generate runs a generation and returns its text and draft counts.
func generate(t *testing.T, c *llama.Context, prompt string, o llama.GenerateOptions) (string, llama.SpeculativeStats) {
	t.Helper()
	g := c.Generate(context.Background(), prompt, o)
	var sb strings.Builder
	for p, err := range g.Seq() {
		require.NoError(t, err)
		sb.WriteString(p.Text)
	}
	return sb.String(), g.Speculative()
}

// TestMTP drafts with a model's MTP head: through Generate the text is
// plain generation's and the head's drafts are accepted; three sequences
// drafting together get the drafts each gets alone; Begin with another
// prompt forgets the head's memory past the common prefix; and misuses
// are errors, not aborts.
func TestMTP(t *testing.T) {
	ctx := context.Background()
	m := mtpModel(t, true)
	info, err := m.Info()
	require.NoError(t, err)
	assert.Equal(t, 1, info.MTPLayers)
	tok := func(s string) []llama.Token {
		toks, err := m.Tokenize(s, llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		return toks
	}
	opts := llama.ContextOptions{ContextSize: 1024, BatchSize: 64, Threads: 1}

	t.Run("generate", func(t *testing.T) {
		c := newCtx(t, m, opts)
		plain, _ := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 60})
		require.NoError(t, c.Memory().Clear())
		d, err := draft.NewMTP(c, draft.MTPOptions{NMax: 4})
		require.NoError(t, err)
		defer d.Close()
		g := llama.GenerateOptions{MaxTokens: 60, Speculative: &llama.Speculative{Drafters: []llama.Drafter{d.Seq(0)}, Adapt: llama.DraftAdapt{Off: true}}}
		text, stats := generate(t, c, "Once upon a time", g)
		assert.Equal(t, plain, text)
		assert.Positive(t, stats.Drafted)
		assert.Greater(t, stats.Accepted, stats.Drafted/2, "%+v", stats)
	})

	t.Run("batched", func(t *testing.T) {
		prompts := [][]llama.Token{tok("Once upon a time"), tok("The cat sat on the mat."), tok("One day, a boy found a box in the garden.")}
		o := opts
		o.Sequences = len(prompts)
		c := newCtx(t, m, o)
		shared, err := draft.NewMTP(c, draft.MTPOptions{NMax: 5})
		require.NoError(t, err)
		defer shared.Close()
		b := llama.NewBatch(c.BatchSize(), 1)
		for i, p := range prompts {
			require.NoError(t, b.AddSequence(p, 0, i, false))
		}
		require.NoError(t, c.Decode(ctx, b))
		require.NoError(t, shared.Decoded(ctx, b))
		reqs := make([]*draft.MTPRequest, len(prompts))
		for i, p := range prompts {
			reqs[i] = &draft.MTPRequest{Seq: shared.Seq(i), History: append(p, 100+llama.Token(i)), Max: 5}
		}
		require.NoError(t, shared.DraftAll(ctx, reqs))
		// The head's memory of a sequence, saved and brought back after
		// it was forgotten, takes the next draft's positions where they
		// follow (this model's head reads little of its memory: the
		// conversations of TestMTPAgainstLlamaServer check what it holds).
		st, err := shared.Seq(0).State()
		require.NoError(t, err)
		shared.Seq(0).Reset()
		require.NoError(t, shared.Seq(0).SetState(st, prompts[0]))
		again, err := shared.Seq(0).Draft(ctx, reqs[0].History, 5)
		require.NoError(t, err)
		assert.Equal(t, reqs[0].Draft, again)
		for i, p := range prompts {
			o := opts
			alone := newCtx(t, m, o)
			d, err := draft.NewMTP(alone, draft.MTPOptions{NMax: 5})
			require.NoError(t, err)
			b.Clear()
			require.NoError(t, b.AddSequence(p, 0, 0, false))
			require.NoError(t, alone.Decode(ctx, b))
			require.NoError(t, d.Decoded(ctx, b))
			got, err := d.Seq(0).Draft(ctx, append(p, 100+llama.Token(i)), 5)
			require.NoError(t, err)
			assert.Len(t, got, 5)
			assert.Equal(t, got, reqs[i].Draft, "sequence %d", i)
			// Begin with another prompt: the head forgets the sequence
			// past the common prefix, and takes the positions it has not
			// seen into an emptied memory (llama.cpp takes a sequence's
			// tokens only in order).
			d.Seq(0).Begin(p[:1])
			_, err = d.Seq(0).Draft(ctx, append(p, 100+llama.Token(i)), 5)
			require.NoError(t, err)
			b.Clear()
			require.NoError(t, b.Add(7, len(p)+3, 0, true))
			require.NoError(t, alone.Memory().Clear())
			require.NoError(t, alone.Decode(ctx, b))
			require.NoError(t, d.Decoded(ctx, b), "a position after a gap")
			require.NoError(t, d.Close())
			require.NoError(t, d.Close()) // idempotent
		}
	})

	t.Run("misuse", func(t *testing.T) {
		c := newCtx(t, m, opts)
		d, err := draft.NewMTP(c, draft.MTPOptions{})
		require.NoError(t, err)
		defer d.Close()
		b := llama.NewBatch(8, 1)
		require.NoError(t, b.Add(1, 0, 3, false))
		assert.ErrorIs(t, d.Decoded(ctx, b), llama.ErrInvalid, "a sequence the target has not")
		assert.Nil(t, d.Seq(1))
		_, err = (*draft.MTPSeq)(nil).Draft(ctx, []llama.Token{1}, 3)
		assert.ErrorIs(t, err, llama.ErrInvalid)

		// Hidden rows: of the right width, on an MTP context only.
		b.Clear()
		require.NoError(t, b.Add(1, 0, 0, true))
		assert.ErrorIs(t, b.SetHidden(1, make([]float32, 4)), llama.ErrInvalid)
		require.NoError(t, b.SetHidden(0, make([]float32, c.HiddenSize())))
		assert.ErrorIs(t, b.SetHidden(0, make([]float32, 3)), llama.ErrInvalid)
		assert.ErrorIs(t, c.Decode(ctx, b), llama.ErrInvalid)
		_, err = c.Hidden(5)
		assert.ErrorIs(t, err, llama.ErrInvalid)

		// An MTP context needs a model loaded with MTP and MTP blocks.
		_, err = stories(t).NewContext(llama.ContextOptions{ContextSize: 256, MTP: true})
		assert.ErrorIs(t, err, llama.ErrUnsupported)
		_, err = draft.NewMTP(newCtx(t, stories(t), llama.ContextOptions{ContextSize: 256}), draft.MTPOptions{})
		assert.ErrorIs(t, err, llama.ErrUnsupported)
		path := filepath.Join(t.TempDir(), "glm.gguf")
		require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "glm4moe", NLayer: 2, NextN: 1, Seed: 7,
			VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")}))
		plain := modeltest.LoadPath(t, path, llama.ModelOptions{})
		_, err = plain.NewContext(llama.ContextOptions{ContextSize: 256, MTP: true})
		assert.ErrorIs(t, err, llama.ErrInvalid)
		assert.True(t, strings.Contains(err.Error(), "ModelOptions.MTP"), err)
	})
}
