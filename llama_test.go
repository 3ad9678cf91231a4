package llama_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

// The greedy continuation llama.cpp itself prints for stories260K.
const storyPrefix = ", there was a little girl named Lily. She loved to play outside in the park."

// stories returns the shared stories260K model (loaded once per test binary).
func stories(t testing.TB) *llama.Model { return modeltest.Shared(t, "stories260K.gguf", false) }

func newCtx(t testing.TB, m *llama.Model, o llama.ContextOptions) *llama.Context {
	t.Helper()
	return modeltest.NewContext(t, m, o)
}

func generate(t testing.TB, c *llama.Context, prompt string, o llama.GenerateOptions) string {
	t.Helper()
	var b strings.Builder
	for p, err := range c.Generate(context.Background(), prompt, o).Seq() {
		require.NoError(t, err)
		b.WriteString(p.Text)
	}
	return b.String()
}

func TestGreedyStory(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 64})
	require.True(t, strings.HasPrefix(out, storyPrefix), "got %q", out)
	// The same again from a cleared sequence gives the same text.
	assert.Equal(t, out, generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 64}))
}

func TestModelInfo(t *testing.T) {
	m := stories(t)
	info, err := m.Info()
	require.NoError(t, err)
	assert.Equal(t, "llama", info.Architecture)
	assert.Equal(t, 64, info.EmbeddingSize)
	assert.Equal(t, 5, info.Layers)
	assert.Equal(t, 8, info.Heads)
	assert.Equal(t, 4, info.HeadsKV)
	assert.Equal(t, 2048, info.TrainContext)
	assert.Equal(t, 512, info.VocabSize)
	assert.Equal(t, "spm", info.VocabType)
	assert.Greater(t, info.Params, uint64(200_000))
	meta, err := m.Meta()
	require.NoError(t, err)
	assert.Equal(t, "llama", meta["general.architecture"])
	assert.Contains(t, meta, "llama.context_length")
	v, ok := m.MetaValue("llama.embedding_length")
	assert.True(t, ok)
	assert.Equal(t, "64", v)
	_, ok = m.MetaValue("no.such.key")
	assert.False(t, ok)
	_, ok = m.ChatTemplate("")
	assert.False(t, ok, "stories260K has no chat template")

	sp := m.SpecialTokens()
	assert.Equal(t, llama.Token(1), sp.BOS)
	assert.Equal(t, llama.Token(2), sp.EOS)
	assert.True(t, sp.AddBOS)
	assert.True(t, m.IsEOG(sp.EOS))
	assert.False(t, m.IsEOG(100))
	attr, err := m.TokenAttr(sp.BOS)
	require.NoError(t, err)
	assert.NotZero(t, attr&llama.AttrControl)
}

func TestTokenizeRoundTrip(t *testing.T) {
	m := stories(t)
	for _, text := range []string{"Once upon a time", "", "héllo wörld ✓ 🙂", "a\nb\tc"} {
		toks, err := m.Tokenize(text, llama.TokenizeOptions{})
		require.NoError(t, err)
		back, err := m.Detokenize(toks, llama.DetokenizeOptions{})
		require.NoError(t, err)
		assert.Equal(t, text, back)
		var pieces strings.Builder
		for _, tk := range toks {
			p, err := m.TokenPiece(tk, false)
			require.NoError(t, err)
			pieces.WriteString(p)
		}
		assert.Equal(t, strings.TrimPrefix(text, ""), strings.TrimPrefix(pieces.String(), " "))
	}
	withBOS, err := m.Tokenize("hi", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	assert.Equal(t, llama.Token(1), withBOS[0])
}

// TestSingleToken: text that tokenizes, special text parsed, to exactly
// one token is that token; other text is not.
func TestSingleToken(t *testing.T) {
	m := stories(t)
	for _, tt := range []struct {
		text string
		want llama.Token
		ok   bool
	}{
		{"<s>", 1, true},
		{"</s>", 2, true},
		{"Once upon a time", llama.NoToken, false},
		{"", llama.NoToken, false},
		{"<s><s>", llama.NoToken, false},
	} {
		tok, ok := m.SingleToken(tt.text)
		assert.Equal(t, tt.ok, ok, "%q", tt.text)
		assert.Equal(t, tt.want, tok, "%q", tt.text)
	}
	one, err := m.Tokenize("a", llama.TokenizeOptions{})
	require.NoError(t, err)
	require.Len(t, one, 1)
	tok, ok := m.SingleToken("a")
	assert.True(t, ok)
	assert.Equal(t, one[0], tok)
}

// TestVocabConformance tokenizes llama.cpp's conformance strings with each
// of the nine reference vocabularies and compares token for token.
func TestVocabConformance(t *testing.T) {
	dir := filepath.Join(testenv.ModelsDir(t), "vocab")
	files, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	require.NoError(t, err)
	require.Len(t, files, 9, "nine vocabularies expected in %s", dir)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			m := modeltest.LoadPath(t, f, llama.ModelOptions{VocabOnly: true})
			inp, err := os.ReadFile(f + ".inp")
			require.NoError(t, err)
			out, err := os.ReadFile(f + ".out")
			require.NoError(t, err)
			texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
			wants := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			require.Equal(t, "", texts[len(texts)-1])
			texts = texts[:len(texts)-1]
			require.Len(t, texts, 46)
			require.Len(t, wants, len(texts))
			for i, text := range texts {
				toks, err := m.Tokenize(text, llama.TokenizeOptions{})
				require.NoError(t, err)
				got := make([]string, len(toks))
				for k, tk := range toks {
					got[k] = strconv.Itoa(int(tk))
				}
				assert.Equal(t, strings.TrimSpace(wants[i]), strings.Join(got, " "), "pair %d: %q", i, text)
			}
		})
	}
}

// TestCancelPromptDecode cancels a context.Context while a long prompt is
// decoding: Decode returns with a cancellation error, what the interrupted
// batch put in memory is gone while what was there before stays, and the
// Context still generates correctly.
func TestCancelPromptDecode(t *testing.T) {
	m := stories(t)
	const kept, n = 64, 2048
	c := newCtx(t, m, llama.ContextOptions{ContextSize: kept + n + 256, BatchSize: n, UBatchSize: 128, Threads: 2})
	b := llama.NewBatch(n, 1)
	for i := range kept {
		require.NoError(t, b.Add(llama.Token(3+i%500), i, 0, i == kept-1))
	}
	require.NoError(t, c.Decode(context.Background(), b))
	b.Clear()
	for i := range n {
		require.NoError(t, b.Add(llama.Token(3+i%500), kept+i, 0, i == n-1))
	}

	// Cancelled as Decode starts, so during llama.cpp's work on the batch.
	ctx := newDecodeStarted(true, nil)
	err := c.Decode(ctx, b)
	require.Error(t, err)
	assert.ErrorIs(t, err, llama.ErrCanceled)
	assert.ErrorIs(t, err, context.Canceled)
	lo, hi, err := c.Memory().PosRange(0)
	require.NoError(t, err)
	assert.Equal(t, 0, lo, "what was decoded before stays")
	assert.Equal(t, kept-1, hi, "the interrupted batch is removed from memory")

	out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 32})
	assert.True(t, strings.HasPrefix(out, ", there was a little girl named Lily"), "got %q", out)
}

func TestCancelGenerate(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for _, err := range c.Generate(ctx, "Once upon a time", llama.GenerateOptions{}).Seq() {
		if err != nil {
			last = err
			break
		}
		n++
		if n == 5 {
			cancel()
		}
	}
	assert.ErrorIs(t, last, context.Canceled)
	assert.Equal(t, 5, n)
}

func TestBadInput(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, BatchSize: 64, Sequences: 2})
	bg := context.Background()
	batch := func(f func(b *llama.Batch)) *llama.Batch {
		b := llama.NewBatch(128, 1)
		f(b)
		return b
	}
	tests := []struct {
		name string
		run  func() error
		code llama.ErrorCode
	}{
		{"token too big", func() error {
			return c.Decode(bg, batch(func(b *llama.Batch) { b.Add(512, 0, 0, true) }))
		}, llama.CodeInvalid},
		{"negative token", func() error {
			return c.Decode(bg, batch(func(b *llama.Batch) { b.Add(-5, 0, 0, true) }))
		}, llama.CodeInvalid},
		{"batch past n_batch", func() error {
			return c.Decode(bg, batch(func(b *llama.Batch) {
				for i := range 65 {
					b.Add(10, i, 0, false)
				}
			}))
		}, llama.CodeInvalid},
		{"position past n_ctx", func() error {
			return c.Decode(bg, batch(func(b *llama.Batch) { b.Add(10, 256, 0, true) }))
		}, llama.CodeNoKVSlot},
		{"sequence out of range", func() error {
			return c.Decode(bg, batch(func(b *llama.Batch) { b.Add(10, 0, 2, true) }))
		}, llama.CodeInvalid},
		{"empty batch", func() error { return c.Decode(bg, llama.NewBatch(4, 1)) }, llama.CodeInvalid},
		{"nil batch", func() error { return c.Decode(bg, nil) }, llama.CodeInvalid},
		{"logits without output", func() error { _, err := c.Logits(3); return err }, llama.CodeInvalid},
		{"embeddings without option", func() error { _, err := c.Embeddings(0); return err }, llama.CodeUnsupported},
		{"detokenize bad id", func() error {
			_, err := m.Detokenize([]llama.Token{1, 99999}, llama.DetokenizeOptions{})
			return err
		}, llama.CodeInvalid},
		{"piece bad id", func() error { _, err := m.TokenPiece(-1, false); return err }, llama.CodeInvalid},
		{"empty prompt", func() error {
			for _, err := range c.Generate(bg, "", llama.GenerateOptions{}).Seq() {
				if err != nil {
					return err
				}
			}
			return nil
		}, llama.CodeInvalid},
		{"prompt longer than context", func() error {
			for _, err := range c.Generate(bg, strings.Repeat("Once upon a time ", 100), llama.GenerateOptions{}).Seq() {
				if err != nil {
					return err
				}
			}
			return nil
		}, llama.CodeNoKVSlot},
		{"negative max tokens", func() error {
			for _, err := range c.Generate(bg, "hi", llama.GenerateOptions{MaxTokens: -1}).Seq() {
				if err != nil {
					return err
				}
			}
			return nil
		}, llama.CodeInvalid},
		{"missing model file", func() error {
			_, err := llama.LoadModel(bg, "/nonexistent.gguf", llama.ModelOptions{})
			return err
		}, llama.CodeLoad},
		{"not a gguf", func() error {
			p := filepath.Join(t.TempDir(), "x.gguf")
			require.NoError(t, os.WriteFile(p, []byte("not a model at all"), 0o644))
			_, err := llama.LoadModel(bg, p, llama.ModelOptions{})
			return err
		}, llama.CodeLoad},
		{"bad kv override", func() error {
			_, err := llama.LoadModel(bg, m.Path(), llama.ModelOptions{KVOverrides: map[string]any{"x": []int{1}}})
			return err
		}, llama.CodeInvalid},
		{"bad context option", func() error { _, err := m.NewContext(llama.ContextOptions{TypeK: "q9"}); return err }, llama.CodeInvalid},
		{"bad sampler param", func() error {
			_, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.TopP(float32(nan()), 1))
			return err
		}, llama.CodeInvalid},
		{"logit bias bad token", func() error {
			_, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.LogitBias(map[llama.Token]float32{9999: 1}))
			return err
		}, llama.CodeInvalid},
		{"invalid grammar", func() error {
			_, err := llama.ParseGrammar(context.Background(), `root ::= foo`, "")
			return err
		}, llama.CodeGrammar},
		{"bad shift", func() error { return c.Memory().Shift(7, 0, -1, 1) }, llama.CodeInvalid},
		{"bad threads", func() error { return c.SetThreads(0, 1) }, llama.CodeInvalid},
		{"bad seq state", func() error { return c.SetSeqState(0, []byte("garbage")) }, llama.CodeLoad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			require.Error(t, err)
			var le *llama.Error
			require.True(t, errors.As(err, &le), "%T: %v", err, err)
			assert.Equal(t, tt.code, le.Code, "%v", err)
			assert.True(t, strings.HasPrefix(err.Error(), "llama: "), err.Error())
		})
	}
	// The context still works after all that.
	out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16})
	assert.True(t, strings.HasPrefix(out, ", there was a little girl"), out)
}

func nan() float64 { z := 0.0; return z / z }

// TestLlamaCppReasons: a load or a context llama.cpp refuses reports the
// reason llama.cpp gives only in its log, with or without a logger.
func TestLlamaCppReasons(t *testing.T) {
	m := stories(t)
	full, err := os.ReadFile(m.Path())
	require.NoError(t, err)
	truncated := filepath.Join(t.TempDir(), "truncated.gguf")
	require.NoError(t, os.WriteFile(truncated, full[:len(full)*3/4], 0o644))
	for _, tt := range []struct {
		name string
		run  func() error
		want string
	}{
		{"a truncated model", func() error {
			_, err := llama.LoadModel(context.Background(), truncated, llama.ModelOptions{})
			return err
		}, "data is not within the file bounds"},
		{"a quantized V cache without flash attention", func() error {
			_, err := m.NewContext(llama.ContextOptions{ContextSize: 256, TypeV: "q8_0", FlashAttention: llama.FlashAttentionOff})
			return err
		}, "could not create the context: quantized V cache requires flash_attn to be enabled"},
		{"a K cache type whose blocks do not divide the heads", func() error {
			_, err := m.NewContext(llama.ContextOptions{ContextSize: 256, TypeK: "q4_0"})
			return err
		}, "does not divide n_embd_head_k"},
	} {
		for _, logged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, logger %v", tt.name, logged), func(t *testing.T) {
				if logged {
					llama.SetLogger(slog.New(slog.DiscardHandler))
					defer llama.SetLogger(nil)
				}
				err := tt.run()
				require.ErrorIs(t, err, llama.ErrLoad)
				assert.Contains(t, err.Error(), tt.want)
				assert.NotContains(t, err.Error(), "enough free memory", "no allocation failed")
			})
		}
	}
}

func TestCloseLifecycle(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	c, err := m.NewContext(llama.ContextOptions{ContextSize: 128, Threads: 1})
	require.NoError(t, err)
	s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Greedy())
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())

	_, err = m.Tokenize("x", llama.TokenizeOptions{})
	assert.ErrorIs(t, err, llama.ErrClosed)
	_, err = m.NewContext(llama.ContextOptions{})
	assert.ErrorIs(t, err, llama.ErrClosed)
	b := llama.NewBatch(1, 1)
	require.NoError(t, b.Add(1, 0, 0, true))
	assert.ErrorIs(t, c.Decode(context.Background(), b), llama.ErrClosed)
	_, err = s.Sample(c, 0)
	assert.ErrorIs(t, err, llama.ErrClosed)
	_, err = m.Info()
	assert.ErrorIs(t, err, llama.ErrClosed)
	for _, err := range c.Generate(context.Background(), "x", llama.GenerateOptions{}).Seq() {
		assert.ErrorIs(t, err, llama.ErrClosed)
	}
	// A Context closed under an open model: the error is Generate's own.
	m2, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	defer m2.Close()
	c2, err := m2.NewContext(llama.ContextOptions{ContextSize: 128, Threads: 1})
	require.NoError(t, err)
	require.NoError(t, c2.Close())
	for _, err := range c2.GenerateTokens(context.Background(), []llama.Token{1}, llama.GenerateOptions{}).Seq() {
		require.ErrorIs(t, err, llama.ErrClosed)
		assert.Equal(t, "generate", err.(*llama.Error).Op)
	}
}

// TestCloseDuringDecode closes the model from another goroutine while its
// context decodes: Close interrupts the decode and waits for it, nothing
// crashes, and the context is closed afterwards.
func TestCloseDuringDecode(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	c, err := m.NewContext(llama.ContextOptions{ContextSize: 2048, BatchSize: 2048, UBatchSize: 64, Threads: 1})
	require.NoError(t, err)
	b := llama.NewBatch(2048, 1)
	for i := range 2048 {
		require.NoError(t, b.Add(llama.Token(3+i%500), i, 0, false))
	}
	closed := make(chan error, 1)
	// Close starts as the decode starts (it then waits for the decode).
	ctx := newDecodeStarted(false, func() { go func() { closed <- m.Close() }() })
	err = c.Decode(ctx, b)
	require.Error(t, err, "Close interrupts the decode")
	assert.True(t, errors.Is(err, llama.ErrCanceled) || errors.Is(err, llama.ErrClosed), "%v", err)
	require.NoError(t, <-closed)
	assert.ErrorIs(t, c.Decode(context.Background(), b), llama.ErrClosed)
}

func TestStopStrings(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	var g *llama.Generation
	toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	g = c.GenerateTokens(context.Background(), toks, llama.GenerateOptions{MaxTokens: 64, Stop: []string{"Lily"}})
	var out strings.Builder
	for p, err := range g.Seq() {
		require.NoError(t, err)
		out.WriteString(p.Text)
	}
	assert.Equal(t, ", there was a little girl named ", out.String())
	assert.Equal(t, llama.StopString, g.Reason())
	assert.Equal(t, "Lily", g.StopWord())

	g = c.GenerateTokens(context.Background(), toks, llama.GenerateOptions{MaxTokens: 10})
	n := 0
	for _, err := range g.Seq() {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, llama.StopMaxTokens, g.Reason())
	assert.Equal(t, 10, g.Generated())
}

// TestUTF8Pieces generates with the random-weight Llama 2 vocab, whose byte
// tokens split characters, and checks that no piece is invalid UTF-8.
func TestUTF8Pieces(t *testing.T) {
	m := modeltest.Load(t, "llama-2-tiny-random.gguf", llama.ModelOptions{})
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Dist(7))
	require.NoError(t, err)
	defer s.Close()
	// Force byte tokens: ban everything but byte tokens <0xE2>, <0x9C>, <0x93> ("✓").
	var pieces []string
	for p, err := range c.Generate(context.Background(), "check", llama.GenerateOptions{MaxTokens: 60, Sampler: s}).Seq() {
		require.NoError(t, err)
		pieces = append(pieces, p.Text)
	}
	for _, p := range pieces {
		assert.True(t, isValidUTF8(p), "%q", p)
	}
}
