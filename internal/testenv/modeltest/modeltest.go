// Package modeltest holds the tests' helpers that need the llama package:
// loading the shared test models and making contexts that close when the
// test ends, and a context.Context that ends when a decode starts. It is
// not part of testenv because testenv is imported by internal tests of
// packages llama imports (capi, and llama's own), which llama cannot be
// imported back into.
package modeltest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// Load loads the model name of the shared models folder (testenv.Model)
// with opts for this test alone: it is closed when the test ends.
func Load(t testing.TB, name string, opts llama.ModelOptions) *llama.Model {
	t.Helper()
	return LoadPath(t, testenv.Model(t, name), opts)
}

// LoadPath is Load for a model at path.
func LoadPath(t testing.TB, path string, opts llama.ModelOptions) *llama.Model {
	t.Helper()
	m, err := llama.LoadModel(context.Background(), path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

type sharedKey struct {
	path    string
	cpuOnly bool
}

type sharedModel struct {
	once sync.Once
	m    *llama.Model
	err  error
}

var (
	sharedMu sync.Mutex
	shared   = map[sharedKey]*sharedModel{}
)

// Shared returns the model name of the shared models folder, loaded once
// per test binary (with or without CPUOnly) and never closed: the tests of
// a package that only read a model share it instead of loading it each.
// A test that closes the model, or changes what it holds, uses Load.
func Shared(t testing.TB, name string, cpuOnly bool) *llama.Model {
	t.Helper()
	k := sharedKey{testenv.Model(t, name), cpuOnly}
	sharedMu.Lock()
	s := shared[k]
	if s == nil {
		s = &sharedModel{}
		shared[k] = s
	}
	sharedMu.Unlock()
	s.once.Do(func() {
		s.m, s.err = llama.LoadModel(context.Background(), k.path, llama.ModelOptions{CPUOnly: cpuOnly})
	})
	require.NoError(t, s.err)
	return s.m
}

// NewContext makes a context of m with opts, one thread where opts.Threads
// is zero (the tests share few cores), closed when the test ends.
func NewContext(t testing.TB, m *llama.Model, opts llama.ContextOptions) *llama.Context {
	t.Helper()
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	c, err := m.NewContext(opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// DecodeStarted is a context.Context that is live when a decode first
// checks it (Err) and calls OnStart the moment the decode asks for its Done
// channel to arm its abort, right before llama.cpp starts on the batch.
// With Cancel set it is itself done from then on, so the cancellation
// lands while llama.cpp works: tests wait on that event instead of
// guessing a time with a sleep.
type DecodeStarted struct {
	context.Context
	Cancel  bool
	OnStart func()

	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// NewDecodeStarted returns a DecodeStarted over context.Background.
func NewDecodeStarted(cancel bool, onStart func()) *DecodeStarted {
	return &DecodeStarted{Context: context.Background(), Cancel: cancel, OnStart: onStart, done: make(chan struct{})}
}

// Done calls OnStart on its first call and, with Cancel, ends the context.
func (c *DecodeStarted) Done() <-chan struct{} {
	c.once.Do(func() {
		if c.OnStart != nil {
			c.OnStart()
		}
		if c.Cancel {
			c.mu.Lock()
			c.err = context.Canceled
			c.mu.Unlock()
			close(c.done)
		}
	})
	return c.done
}

// Err is context.Canceled once Done has ended the context, else nil.
func (c *DecodeStarted) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
