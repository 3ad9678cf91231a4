package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestOutboxQuiet: a quiet outbox (Request.WakeAtEnd) queues its events
// without signalling the reader until the last one; a plain one signals
// every push.
func TestOutboxQuiet(t *testing.T) {
	for _, tc := range []struct {
		name  string
		quiet bool
	}{
		{"plain", false},
		{"quiet", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutbox()
			o.quiet = tc.quiet
			for i := range 3 {
				o.push(&Event{Generated: i}, false)
				assert.Equal(t, !tc.quiet, len(o.sig) == 1, "a signal after push %d", i)
				if len(o.sig) == 1 {
					<-o.sig
				}
			}
			o.push(&Event{Generated: 3, Done: true}, true)
			require.Len(t, o.sig, 1, "the last push signals")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := &Stream{ctx: ctx, cancel: cancel, ob: o}
			var got []int
			for st.Next() {
				got = append(got, st.Event().Generated)
			}
			assert.Equal(t, []int{0, 1, 2, 3}, got, "every event, in order")
		})
	}
}

// TestEngineWakeAtEnd: requests that wake their reader at the end only
// get the same events as those that wake it per token, and a cancelled
// one still ends its reader's wait.
func TestEngineWakeAtEnd(t *testing.T) {
	// ContextShift: the cancelled request below never ends by itself, so
	// only the cancel can end it, however late its timer fires.
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}, Parallel: 2, ContextShift: true})
	prompt := engTokenize(t, m, "Once upon a time", true)
	var results [2]engResult
	var wg sync.WaitGroup
	for i, quiet := range []bool{false, true} {
		wg.Go(func() {
			req := engGreedyTask(prompt, 24)
			req.Stop = []string{"girl"} // the text until the stop string, then Done
			req.WakeAtEnd = quiet
			results[i] = engRun(t, e, req)
		})
	}
	wg.Wait()
	assert.Equal(t, results[0].text, results[1].text)
	assert.Equal(t, results[0].tokens, results[1].tokens)
	assert.Equal(t, results[0].done.Stop, results[1].done.Stop)
	assert.Equal(t, StopTypeWord, results[1].done.Stop)

	// Cancelled mid-way: Next returns, with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	req := engGreedyTask(prompt, -1)
	req.Params.IgnoreEOS = true
	req.WakeAtEnd = true
	st, err := e.Submit(ctx, req)
	require.NoError(t, err)
	time.AfterFunc(20*time.Millisecond, cancel)
	for st.Next() {
	}
	assert.ErrorIs(t, st.Err(), context.Canceled)
	st.Close()
}
