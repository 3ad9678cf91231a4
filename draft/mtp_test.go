package draft_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
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

	t.Run("threads", func(t *testing.T) {
		// The head runs with the target's threads unless told otherwise.
		for _, tc := range []struct {
			name   string
			target llama.ContextOptions
			head   llama.ContextOptions
			want   [2]int
		}{
			{"target's", llama.ContextOptions{Threads: 1, ThreadsBatch: 2}, llama.ContextOptions{}, [2]int{1, 2}},
			{"own", llama.ContextOptions{Threads: 1}, llama.ContextOptions{Threads: 2, ThreadsBatch: 2}, [2]int{2, 2}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				o := tc.target
				o.ContextSize, o.BatchSize = 256, 32
				d, err := draft.NewMTP(newCtx(t, m, o), draft.MTPOptions{Context: tc.head})
				require.NoError(t, err)
				defer d.Close()
				n, nb := draft.HeadThreads(d)
				assert.Equal(t, tc.want, [2]int{n, nb})
			})
		}
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

	t.Run("replayed", func(t *testing.T) {
		// A draft partly kept: the target takes the rest back (path 0), or
		// goes back to a checkpoint before the draft and decodes the kept
		// tokens again with its next token (path 1, a recurrent model's
		// way, told to the head with Replayed). The head drafts the same
		// after either, whatever the next token (without Replayed it
		// would see the first kept token again with a wrong row).
		p := tok("Once upon a time")
		n := len(p)
		rm := mtpModel(t, false) // its head reads the rows
		var drafts [2][][]llama.Token
		for path := range 2 {
			c := newCtx(t, rm, opts)
			d, err := draft.NewMTP(c, draft.MTPOptions{NMax: 4})
			require.NoError(t, err)
			defer d.Close()
			b := llama.NewBatch(c.BatchSize(), 1)
			decode := func(toks []llama.Token, pos int) {
				b.Clear()
				for i, tok := range toks {
					require.NoError(t, b.Add(tok, pos+i, 0, true))
				}
				require.NoError(t, c.Decode(ctx, b))
				require.NoError(t, d.Decoded(ctx, b))
			}
			decode(p, 0)
			decode([]llama.Token{100, 200, 201, 202, 203}, n) // the last token and a draft of 4
			d.Seq(0).Accepted(2)
			if path == 0 {
				_, err = c.Memory().Remove(0, n+3, -1)
				require.NoError(t, err)
				decode([]llama.Token{300}, n+3)
			} else {
				_, err = c.Memory().Remove(0, n, -1)
				require.NoError(t, err)
				d.Seq(0).Replayed(3)
				decode([]llama.Token{100, 200, 201, 300}, n)
			}
			for next := range llama.Token(40) {
				dr, err := d.Seq(0).Draft(ctx, append(slices.Clone(p), 100, 200, 201, 300, 400+next*97), 4)
				require.NoError(t, err)
				require.NotEmpty(t, dr)
				drafts[path] = append(drafts[path], dr)
			}
		}
		assert.Equal(t, drafts[0], drafts[1])
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
		// A head of another vocabulary.
		_, err = draft.NewMTP(c, draft.MTPOptions{Model: stories(t)})
		assert.ErrorIs(t, err, llama.ErrInvalid)
		path := filepath.Join(t.TempDir(), "glm.gguf")
		require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "glm4moe", NLayer: 2, NextN: 1, Seed: 7,
			VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")}))
		plain := modeltest.LoadPath(t, path, llama.ModelOptions{})
		_, err = plain.NewContext(llama.ContextOptions{ContextSize: 256, MTP: true})
		assert.ErrorIs(t, err, llama.ErrInvalid)
		assert.True(t, strings.Contains(err.Error(), "ModelOptions.MTP"), err)
	})
}

// FuzzDraftMTP drives an MTP head over two sequences as a server would,
// with the fuzzer choosing the tokens, how much of each draft the target
// keeps, where a sequence begins again (Begin, a gap in its positions as
// after a restore), when its memory is saved and brought back and when
// the context shifts: no call fails, and no draft is longer than asked.
func FuzzDraftMTP(f *testing.F) {
	f.Add([]byte("abcabcabcabc"), []byte("Once upon a time"), []byte{3, 1, 0, 7, 2, 9}, 4)
	f.Add([]byte(""), []byte("x"), []byte{255, 128, 64, 5}, 9)
	// The model is made before the fuzzing starts (each worker process
	// runs this), so that no input is charged with it.
	path := filepath.Join(f.TempDir(), "glm.gguf")
	require.NoError(f, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "glm4moe", NLayer: 2, NextN: 1, Seed: 3,
		VocabFrom: filepath.Join(testenv.ModelsDir(f), "vocab", "ggml-vocab-llama-spm.gguf")}))
	m := modeltest.LoadPath(f, path, llama.ModelOptions{MTP: true})
	f.Fuzz(func(t *testing.T, h1, h2, ops []byte, n int) {
		if len(h1)+len(h2) > 512 || len(ops) > 64 {
			return
		}
		ctx := context.Background()
		c := newCtx(t, m, llama.ContextOptions{ContextSize: 1024, BatchSize: 64, Threads: 1, Sequences: 2})
		d, err := draft.NewMTP(c, draft.MTPOptions{NMax: 6, PMin: 0.1})
		require.NoError(t, err)
		defer d.Close()
		hists := [][]llama.Token{append([]llama.Token{1}, historyOf(h1, true)...), append([]llama.Token{1}, historyOf(h2, true)...)}
		inMem := []int{0, 0} // tokens of each history in the target's memory
		b := llama.NewBatch(c.BatchSize(), 1)
		// decode puts each history but its last token into the target, in
		// batches, and shows them to the head.
		decode := func() {
			for {
				b.Clear()
				for s, h := range hists {
					for inMem[s] < len(h)-1 && b.Len() < b.Cap() {
						require.NoError(t, b.Add(h[inMem[s]], inMem[s], s, false))
						inMem[s]++
					}
				}
				if b.Len() == 0 {
					return
				}
				require.NoError(t, c.Decode(ctx, b))
				require.NoError(t, d.Decoded(ctx, b))
			}
		}
		for i, op := range ops {
			s := i % 2
			switch op % 5 {
			case 0: // Begin again with a prefix of the history
				k := min(int(op/4), len(hists[s]))
				hists[s] = hists[s][:max(k, 1)]
				inMem[s] = min(inMem[s], len(hists[s])-1)
				_, err := c.Memory().Remove(s, inMem[s], -1)
				require.NoError(t, err)
				d.Seq(s).Begin(hists[s])
			case 1: // save and bring back the head's memory
				st, err := d.Seq(s).State()
				require.NoError(t, err)
				if op&4 != 0 {
					d.Seq(s).Reset()
				}
				require.NoError(t, d.Seq(s).SetState(st, hists[s][:inMem[s]]))
			case 3: // a context shift, on both memories
				keep, discard := int(op>>2)%8, int(op>>5)+1
				if inMem[s] > keep+discard {
					for _, mem := range []func(p0, p1 int) error{
						func(p0, p1 int) error { _, err := c.Memory().Remove(s, p0, p1); return err }, d.Seq(s).Remove} {
						require.NoError(t, mem(keep, keep+discard))
					}
					require.NoError(t, c.Memory().Shift(s, keep+discard, inMem[s], -discard))
					require.NoError(t, d.Seq(s).Shift(keep+discard, inMem[s], -discard))
					hists[s] = append(hists[s][:keep:keep], hists[s][keep+discard:]...)
					inMem[s] -= discard
				}
			case 4: // a draft's checkpoint restored: the last tokens go in again
				k := min(int(op>>3)%5, inMem[s])
				_, err := c.Memory().Remove(s, inMem[s]-k, -1)
				require.NoError(t, err)
				inMem[s] -= k
				d.Seq(s).Replayed(k)
			case 2: // a gap: the target's memory restored elsewhere
				_, err := c.Memory().Remove(s, 0, -1)
				require.NoError(t, err)
				hists[s] = append(hists[s][:0:0], hists[s]...)
				inMem[s] = 0
				decode()
				d.Seq(s).Begin(hists[s])
			}
			decode()
			reqs := []*draft.MTPRequest{{Seq: d.Seq(0), History: hists[0], Max: n}, {Seq: d.Seq(1), History: hists[1], Max: n + int(op%3)}}
			require.NoError(t, d.DraftAll(ctx, reqs))
			for s, r := range reqs {
				require.LessOrEqual(t, len(r.Draft), ourMax(r.Max, 0))
				// The target keeps part of the draft: the last token and
				// the kept ones go in, with the next token after them.
				keep := min(len(r.Draft), int(op)%(len(r.Draft)+1))
				hists[s] = append(hists[s], r.Draft[:keep]...)
				hists[s] = append(hists[s], llama.Token(int(op)%32))
				if len(hists[s]) > 900 {
					hists[s] = hists[s][:2]
					_, err := c.Memory().Remove(s, 0, -1)
					require.NoError(t, err)
					inMem[s] = 0
				}
				d.Seq(s).Accepted(keep)
			}
		}
	})
}
