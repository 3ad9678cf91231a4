package llama_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

// loadModel loads a model of the shared folder for this test alone
// (closed at its end).
func loadModel(t testing.TB, name string) *llama.Model {
	t.Helper()
	return modeltest.Load(t, name, llama.ModelOptions{})
}

func loadStories(t *testing.T) *llama.Model { return loadModel(t, "stories260K.gguf") }

// TestMisuseBusy: a Context used by a second call while a Generate runs
// (from the loop body, or from another goroutine) reports ErrBusy, and the
// generation goes on undisturbed.
func TestMisuseBusy(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	want := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 12})

	b := llama.NewBatch(1, 1)
	require.NoError(t, b.Add(1, 0, 0, true))
	calls := []struct {
		name string
		call func() error
	}{
		{"Decode", func() error { return c.Decode(context.Background(), b) }},
		{"Generate", func() error {
			for _, err := range c.Generate(context.Background(), "Once", llama.GenerateOptions{MaxTokens: 1}).Seq() {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"Memory.Remove", func() error { _, err := c.Memory().Remove(0, 0, -1); return err }},
		{"Sample", func() error {
			s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.Greedy())
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Sample(c, -1)
			return err
		}},
		{"Embed", func() error { _, err := c.Embed(context.Background(), []string{"x"}, llama.EmbedOptions{}); return err }},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			var inBody, fromOther error
			for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 12}).Seq() {
				require.NoError(t, err)
				if got == "" {
					inBody = tc.call()
					done := make(chan error)
					go func() { done <- tc.call() }()
					fromOther = <-done
				}
				got += p.Text
			}
			assert.ErrorIs(t, inBody, llama.ErrBusy)
			assert.ErrorIs(t, fromOther, llama.ErrBusy)
			assert.Equal(t, want, got, "the generation was not disturbed")
			// Free again once the generation is over.
			_, err := c.Memory().Remove(0, 0, -1)
			require.NoError(t, err)
			require.NoError(t, c.Decode(context.Background(), b))
		})
	}
}

// TestMisuseBusyGoroutines: two goroutines generating on one Context at
// once: one of them gets ErrBusy, and the other's text is right.
func TestMisuseBusyGoroutines(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	want := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 16})
	started := make(chan struct{})
	proceed := make(chan struct{})
	firstText := make(chan string)
	go func() {
		var s string
		first := true
		for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 16}).Seq() {
			if err != nil {
				firstText <- "error: " + err.Error()
				return
			}
			if first {
				first = false
				close(started)
				<-proceed
			}
			s += p.Text
		}
		firstText <- s
	}()
	<-started
	var second error
	for _, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 16}).Seq() {
		if err != nil {
			second = err
		}
	}
	close(proceed)
	assert.ErrorIs(t, second, llama.ErrBusy)
	assert.Equal(t, want, <-firstText)
}

// TestMisuseClosedDuringGenerate: Context.Close or Model.Close while a
// Generate runs ends it with ErrClosed; the loop body may call Model
// methods while the model closes (it deadlocked: Generate held the model's
// read lock across yield).
func TestMisuseClosedDuringGenerate(t *testing.T) {
	cases := []struct {
		name  string
		close func(m *llama.Model, c *llama.Context)
	}{
		{"Context.Close in the loop body", func(_ *llama.Model, c *llama.Context) { require.NoError(t, c.Close()) }},
		{"Model.Close in the loop body", func(m *llama.Model, _ *llama.Context) { require.NoError(t, m.Close()) }},
		{"Model.Close from another goroutine, then a Model call", func(m *llama.Model, _ *llama.Context) {
			done := make(chan error)
			go func() { done <- m.Close() }()
			require.NoError(t, <-done)
			_, err := m.Tokenize("x", llama.TokenizeOptions{})
			require.ErrorIs(t, err, llama.ErrClosed)
		}},
		{"Context.Close from another goroutine", func(_ *llama.Model, c *llama.Context) {
			done := make(chan error)
			go func() { done <- c.Close() }()
			require.NoError(t, <-done)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := loadStories(t)
			c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
			require.NoError(t, err)
			var last error
			n := 0
			for _, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 20}).Seq() {
				if err != nil {
					last = err
					continue
				}
				if n++; n == 2 {
					_, err := m.Tokenize("a model call from the body", llama.TokenizeOptions{})
					require.NoError(t, err)
					tc.close(m, c)
				}
			}
			require.ErrorIs(t, last, llama.ErrClosed)
			assert.NotErrorIs(t, last, context.Canceled)
			assert.Equal(t, 2, n)
			assert.ErrorIs(t, c.Decode(context.Background(), llama.NewBatch(1, 1)), llama.ErrClosed)
		})
	}
}

// TestMisuseCloseRacesChildren: children made while the model closes are
// either refused (ErrClosed) or closed with it; none outlives the model.
func TestMisuseCloseRacesChildren(t *testing.T) {
	m := loadStories(t)
	f, err := gguf.Open(m.Path())
	require.NoError(t, err)
	lora := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(lora, f, nil, 4, 8, 1, 1))

	start := make(chan struct{})
	var wg sync.WaitGroup
	type child struct {
		c   *llama.Context
		s   *llama.SamplerChain
		a   *llama.Adapter
		err error
	}
	results := make([]child, 12)
	g := mustGrammar(t, `root ::= "a"`)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var r child
			switch i % 3 {
			case 0:
				r.c, r.err = m.NewContext(llama.ContextOptions{ContextSize: 64, Threads: 1})
			case 1:
				r.s, r.err = llama.NewSamplerChain(m, llama.SamplerChainOptions{}, g.Sampler(), llama.Greedy())
			case 2:
				r.a, r.err = m.LoadAdapter(lora)
			}
			results[i] = r
		}()
	}
	close(start)
	require.NoError(t, m.Close())
	wg.Wait()
	b := llama.NewBatch(1, 1)
	require.NoError(t, b.Add(1, 0, 0, true))
	for _, r := range results {
		if r.err != nil {
			assert.ErrorIs(t, r.err, llama.ErrClosed)
			continue
		}
		switch {
		case r.c != nil:
			assert.ErrorIs(t, r.c.Decode(context.Background(), b), llama.ErrClosed)
		case r.s != nil:
			assert.ErrorIs(t, r.s.Reset(), llama.ErrClosed)
		case r.a != nil:
			_, ok := r.a.Meta("adapter.type")
			assert.False(t, ok, "the adapter was freed with the model")
		}
	}
}

// TestMisuseAdapterInUse: closing an adapter a context uses is refused
// with ErrBusy until the context drops it.
func TestMisuseAdapterInUse(t *testing.T) {
	m := loadStories(t)
	f, err := gguf.Open(m.Path())
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(path, f, nil, 4, 8, 1, 1))
	a, err := m.LoadAdapter(path)
	require.NoError(t, err)
	c1 := newCtx(t, m, llama.ContextOptions{ContextSize: 128})
	c2 := newCtx(t, m, llama.ContextOptions{ContextSize: 128})
	require.NoError(t, c1.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 1}}))
	require.NoError(t, c2.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 1}}))
	assert.ErrorIs(t, a.Close(), llama.ErrBusy)
	require.NoError(t, c1.SetAdapters(nil))
	assert.ErrorIs(t, a.Close(), llama.ErrBusy, "c2 still uses it")
	require.NoError(t, c2.Close())
	require.NoError(t, a.Close())
	assert.ErrorIs(t, c1.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 1}}), llama.ErrClosed)
	assert.NotEmpty(t, generate(t, c1, "Once upon a time", llama.GenerateOptions{MaxTokens: 4}))
}

// TestMisuseNil: methods on nil pointers return errors matching ErrInvalid
// (or zero values), never panic.
func TestMisuseNil(t *testing.T) {
	var (
		m *llama.Model
		c *llama.Context
		b *llama.Batch
		s *llama.SamplerChain
		g *llama.Grammar
		a *llama.Adapter
	)
	m2 := stories(t)
	errs := map[string]func() error{
		"Model.Close":      m.Close,
		"Model.NewContext": func() error { _, err := m.NewContext(llama.ContextOptions{}); return err },
		"Model.Tokenize":   func() error { _, err := m.Tokenize("x", llama.TokenizeOptions{}); return err },
		"Model.Detokenize": func() error { _, err := m.Detokenize([]llama.Token{1}, llama.DetokenizeOptions{}); return err },
		"Model.TokenPiece": func() error { _, err := m.TokenPiece(1, false); return err },
		"Model.Info":       func() error { _, err := m.Info(); return err },
		"Model.Meta":       func() error { _, err := m.Meta(); return err },
		"Model.CheckToken": func() error { return m.CheckToken(1) },
		"Model.LoadAdapter": func() error {
			_, err := m.LoadAdapter("x")
			return err
		},
		"NewSamplerChain(nil)": func() error { _, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}); return err },
		"Context.Close":        c.Close,
		"Context.Decode":       func() error { return c.Decode(context.Background(), llama.NewBatch(1, 1)) },
		"Context.Logits":       func() error { _, err := c.Logits(0); return err },
		"Context.State":        func() error { _, err := c.State(); return err },
		"Context.Embed":        func() error { _, err := c.Embed(context.Background(), []string{"x"}, llama.EmbedOptions{}); return err },
		"Context.SetAdapters":  func() error { return c.SetAdapters(nil) },
		"Context.Generate": func() error {
			for _, err := range c.Generate(context.Background(), "x", llama.GenerateOptions{}).Seq() {
				return err
			}
			return nil
		},
		"Context.GenerateTokens": func() error {
			for _, err := range c.GenerateTokens(context.Background(), []llama.Token{1}, llama.GenerateOptions{}).Seq() {
				return err
			}
			return nil
		},
		"Batch.Add":         func() error { return b.Add(1, 0, 0, true) },
		"Batch.AddShared":   func() error { return b.AddShared(1, 0, []int{0}, true) },
		"Batch.AddSequence": func() error { return b.AddSequence([]llama.Token{1}, 0, 0, true) },
		"Decode(nil batch)": func() error {
			c2 := newCtx(t, m2, llama.ContextOptions{ContextSize: 64})
			return c2.Decode(context.Background(), b)
		},
		"SamplerChain.Close":  s.Close,
		"SamplerChain.Sample": func() error { _, err := s.Sample(c, 0); return err },
		"SamplerChain.Accept": func() error { return s.Accept(1) },
		"SamplerChain.Reset":  s.Reset,
		"SamplerChain.Clone":  func() error { _, err := s.Clone(); return err },
		"SamplerChain.Apply":  func() error { _, _, err := s.Apply([]llama.TokenData{{ID: 1}}); return err },
		"SamplerChain.ApplyInPlace": func() error {
			_, _, err := s.ApplyInPlace([]llama.TokenData{{ID: 1}})
			return err
		},
		"Grammar.Sampler": func() error {
			_, err := llama.NewSamplerChain(m2, llama.SamplerChainOptions{}, g.Sampler())
			return err
		},
		"Grammar.LazySampler": func() error {
			_, err := llama.NewSamplerChain(m2, llama.SamplerChainOptions{}, g.LazySampler([]string{"x"}, nil))
			return err
		},
		"Grammar.Match": func() error { _, err := g.Match(m2, "x"); return err },
		"Adapter.Close": a.Close,
		"SetAdapters(nil adapter)": func() error {
			c2 := newCtx(t, m2, llama.ContextOptions{ContextSize: 64})
			return c2.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: 1}})
		},
	}
	for name, f := range errs {
		t.Run(name, func(t *testing.T) {
			require.NotPanics(t, func() { assert.ErrorIs(t, f(), llama.ErrInvalid) })
		})
	}
	t.Run("zero values", func(t *testing.T) {
		require.NotPanics(t, func() {
			assert.Equal(t, 0, m.VocabSize())
			assert.Equal(t, "", m.Path())
			assert.False(t, m.IsEOG(1))
			assert.Equal(t, llama.NoToken, m.SpecialTokens().EOS)
			assert.Equal(t, "llama.Model(nil)", m.String())
			assert.Equal(t, 0, c.Size()+c.SeqSize()+c.BatchSize()+c.UBatchSize()+c.Sequences())
			assert.Nil(t, c.Model())
			assert.False(t, c.Memory().CanShift())
			assert.Equal(t, 0, b.Len()+b.Cap())
			b.Clear()
			b.SetOutput(0, true)
			tok, _, _ := b.Token(0)
			assert.Equal(t, llama.NoToken, tok)
			assert.Equal(t, "", g.Source()+g.Root()+a.Path())
			assert.Equal(t, uint32(0), s.Seed())
			assert.Equal(t, "<nil>", s.String())
		})
	})
}

// TestMisuseEncodeDecoderOnly: Encode on a model with neither an encoder
// nor a memory-less context (a decoder-only model, even with embeddings
// on) is an ErrInvalid; llama_encode would read a graph result it failed
// to build and crash the process.
func TestMisuseEncodeDecoderOnly(t *testing.T) {
	m := loadStories(t)
	for _, emb := range []bool{false, true} {
		c, err := m.NewContext(llama.ContextOptions{ContextSize: 128, Embeddings: emb})
		require.NoError(t, err)
		toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		b := llama.NewBatch(len(toks), 1)
		require.NoError(t, b.AddSequence(toks, 0, 0, true))
		assert.ErrorIs(t, c.Encode(context.Background(), b), llama.ErrInvalid, "embeddings %v", emb)
		require.NoError(t, c.Decode(context.Background(), b), "the context decodes after the refused encode")
		require.NoError(t, c.Close())
	}
}

// TestMisuseVocabOnly: a model loaded with VocabOnly tokenizes, but a
// context for it is ErrUnsupported: llama.cpp made one, and its first
// decode aborted the process (no backend holds weights).
func TestMisuseVocabOnly(t *testing.T) {
	m := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{VocabOnly: true})
	toks, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	assert.NotEmpty(t, toks)
	_, err = m.NewContext(llama.ContextOptions{ContextSize: 128})
	assert.ErrorIs(t, err, llama.ErrUnsupported)
	assert.ErrorContains(t, err, "VocabOnly")
	_, err = engine.New(m, engine.Options{Context: llama.ContextOptions{ContextSize: 128}})
	assert.ErrorIs(t, err, llama.ErrUnsupported, "the engine's context too")
}

// TestMisuseModelOptions: options out of their enumerations are
// ErrInvalid, not read as some other mode.
func TestMisuseModelOptions(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	for name, o := range map[string]llama.ModelOptions{
		"Load":      {Load: 99},
		"Load < 0":  {Load: -1},
		"Split":     {Split: 7},
		"Lazy":      {Lazy: 99},
		"GPULayers": {GPULayers: -2},
	} {
		m, err := llama.LoadModel(context.Background(), path, o)
		assert.ErrorIs(t, err, llama.ErrInvalid, name)
		if m != nil {
			m.Close()
		}
	}
}
