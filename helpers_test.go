package llama_test

import (
	"context"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

func isValidUTF8(s string) bool { return utf8.ValidString(s) }

// decodeStarted is a context.Context that is live when Decode first checks
// it (ctx.Err) and calls onStart the moment Decode asks for its Done channel
// to arm its abort, right before llama.cpp starts on the batch. With
// cancel=true it is itself done from then on, so the cancellation lands
// while llama.cpp decodes: the tests wait on that event instead of guessing
// a time with a sleep.
type decodeStarted struct {
	context.Context
	cancel  bool
	onStart func()

	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func newDecodeStarted(cancel bool, onStart func()) *decodeStarted {
	return &decodeStarted{Context: context.Background(), cancel: cancel, onStart: onStart, done: make(chan struct{})}
}

func (c *decodeStarted) Done() <-chan struct{} {
	c.once.Do(func() {
		if c.onStart != nil {
			c.onStart()
		}
		if c.cancel {
			c.mu.Lock()
			c.err = context.Canceled
			c.mu.Unlock()
			close(c.done)
		}
	})
	return c.done
}

func (c *decodeStarted) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// promptDecoder returns a function that decodes one fixed prompt on a
// context from an empty memory and returns a copy of its last logits: the
// same computation on contexts made with different options.
func promptDecoder(t *testing.T, m *llama.Model) func(*llama.Context) []float32 {
	prompt, err := m.Tokenize("Once upon a time there was", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	return func(c *llama.Context) []float32 {
		b := llama.NewBatch(len(prompt), 1)
		for i, tok := range prompt {
			require.NoError(t, b.Add(tok, i, 0, i == len(prompt)-1))
		}
		require.NoError(t, c.Memory().Clear())
		require.NoError(t, c.Decode(context.Background(), b))
		l, err := c.Logits(len(prompt) - 1)
		require.NoError(t, err)
		return append([]float32(nil), l...)
	}
}

// mustGrammar parses a grammar the test knows to be well formed (root "root").
func mustGrammar(t testing.TB, src string) *llama.Grammar {
	t.Helper()
	g, err := llama.ParseGrammar(context.Background(), src, "")
	require.NoError(t, err)
	return g
}
