package engine

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// callSampler is a Go sampler that calls f once, from the engine's loop.
type callSampler struct {
	once sync.Once
	f    func()
}

func (c *callSampler) Name() string            { return "call" }
func (c *callSampler) Apply(*llama.Candidates) { c.once.Do(c.f) }
func (c *callSampler) Accept(llama.Token)      {}
func (c *callSampler) Reset()                  {}

// TestEngineCallsFromLoop: Close and the slot actions called from code the
// loop runs (a request's Go sampler) used to wait for the loop, that is
// for themselves: the engine hung for good, its requests and every later
// Close with it. Close now returns and the engine stops once the sampler
// returns; a slot action fails with ErrInvalid.
func TestEngineCallsFromLoop(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		call   func(e *Engine) error
		closed bool // the request ends with ErrClosed
	}{
		{"Close", func(e *Engine) error { return e.Close() }, true},
		{"SaveSlot", func(e *Engine) error { _, _, err := e.SaveSlot(1, filepath.Join(dir, "s")); return err }, false},
		{"RestoreSlot", func(e *Engine) error {
			_, _, err := e.RestoreSlot(1, filepath.Join(dir, "r"))
			return err
		}, false},
		{"EraseSlot", func(e *Engine) error { _, err := e.EraseSlot(1); return err }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Parallel: 2, SampleThreads: 1})
			_, _, err := e.SaveSlot(0, filepath.Join(dir, "r")) // a valid file for RestoreSlot
			require.NoError(t, err)
			req := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 4)
			errc := make(chan error, 1)
			req.Samplers = []llama.Sampler{llama.Custom(&callSampler{f: func() { errc <- tc.call(e) }})}
			st, err := e.Submit(context.Background(), req)
			require.NoError(t, err)
			done := make(chan Event, 1)
			go func() {
				var last Event
				for st.Next() {
					last = st.Event()
				}
				done <- last
			}()
			select {
			case last := <-done:
				require.True(t, last.Done)
				if tc.closed {
					assert.ErrorIs(t, last.Err, ErrClosed)
				} else {
					assert.NoError(t, last.Err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the request never ended: the engine's loop waits for itself")
			}
			callErr := <-errc
			if tc.closed {
				assert.NoError(t, callErr)
			} else {
				assert.ErrorIs(t, callErr, llama.ErrInvalid)
			}
			closed := make(chan struct{})
			go func() { e.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(20 * time.Second):
				t.Fatal("Close hangs")
			}
		})
	}
}
