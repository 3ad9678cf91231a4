package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestEnginePrebuiltSampler: Submit builds a completion's sampler chains
// (its grammar's too) on the caller's goroutine, the slot takes them when
// the request starts, and a request that leaves the queue without a slot
// (its client gone, or the engine closed) frees them.
func TestEnginePrebuiltSampler(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, e *Engine, st *Stream)
	}{
		{"the client leaves while queued", func(t *testing.T, e *Engine, st *Stream) {
			st.Close()
			// The next Submit drops queued tasks whose client left.
			m := e.Model()
			next, err := e.Submit(context.Background(), engGreedyTask(engTokenize(t, m, "Once", true), 1))
			require.NoError(t, err)
			defer next.Close()
		}},
		{"the engine closes", func(t *testing.T, e *Engine, st *Stream) {
			require.NoError(t, e.Close())
			r := engCollect(t, st)
			assert.ErrorIs(t, r.done.Err, llama.ErrClosed)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 1})
			prompt := engTokenize(t, m, "Once upon a time", true)
			long := engGreedyTask(prompt, 400)
			long.Params.IgnoreEOS = true
			busy, err := e.Submit(context.Background(), long)
			require.NoError(t, err)
			defer busy.Close()
			require.True(t, busy.Next(), "the slot is taken")

			queued := engGreedyTask(prompt, 8)
			queued.Params.Grammar = `root ::= [a-z ]+`
			st, err := e.Submit(context.Background(), queued)
			require.NoError(t, err)
			e.mu.Lock()
			require.Len(t, e.queue, 1)
			ts := e.queue[0].smpl
			e.mu.Unlock()
			require.NotNil(t, ts, "built by Submit")
			require.NoError(t, ts.err)
			require.NotNil(t, ts.chain)
			require.NotNil(t, ts.gram, "the grammar too")
			assert.NoError(t, ts.chain.Reset(), "open while queued")

			tc.end(t, e, st)
			assert.Error(t, ts.chain.Reset(), "closed once the task left the queue")
			assert.Error(t, ts.gram.Reset())
		})
	}
	// A request that starts takes its chains: the grammar holds.
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 1})
	tk := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 8)
	tk.Params.Grammar = `root ::= "yes" | "no"`
	r := engRun(t, e, tk)
	assert.Contains(t, []string{"yes", "no"}, r.text)
}
