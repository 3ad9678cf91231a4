package llama_test

import (
	"context"
	"sync"
	"unicode/utf8"
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
