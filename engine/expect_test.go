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

// Requests announced with Expect start in one step when an idle engine
// wakes for the first of them; an expectation never met holds it back no
// longer than the engine's bound; arrived counts once.
func TestEngineExpect(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 1024}})
	prompt := engTokenize(t, m, "Once upon a time", true)
	decodes := func() int64 { return e.Metrics().DecodeTotal }
	for _, tc := range []struct {
		name     string
		wait     time.Duration // the engine's bound
		expected int           // requests announced
		submit   int           // of which are submitted (the first at once, the others later)
		decodes  int64
	}{
		{"three expected start together", time.Minute, 3, 3, 1},
		{"one never comes", 20 * time.Millisecond, 2, 1, 1},
		{"none expected", time.Minute, 0, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, e.do(func() { e.gatherWait, e.burstN = tc.wait, 0 }))
			require.Eventually(t, e.parked.Load, time.Minute, 100*time.Microsecond) // idle
			before := decodes()
			arrived := make([]func(), tc.expected)
			for i := range arrived {
				arrived[i] = e.Expect()
			}
			var wg sync.WaitGroup
			submit := func(i int) {
				st, err := e.Submit(context.Background(), engGreedyTask(prompt, 1))
				if i < len(arrived) {
					arrived[i]()
					arrived[i]() // a second call does nothing
				}
				require.NoError(t, err)
				wg.Go(func() { assert.NoError(t, engCollect(t, st).done.Err) })
			}
			parks := e.parks.Load()
			submit(0)
			// The others come once the loop has woken for the first (and
			// is gathering, or already done and parked again).
			require.Eventually(t, func() bool { return !e.parked.Load() || e.parks.Load() > parks }, time.Minute, 100*time.Microsecond)
			for i := 1; i < tc.submit; i++ {
				submit(i)
			}
			wg.Wait()
			assert.Equal(t, tc.decodes, decodes()-before, "decode steps")
			assert.Equal(t, int64(tc.expected-min(tc.expected, tc.submit)), e.expected.Load(), "still expected")
			for _, a := range arrived {
				a()
			}
			assert.Zero(t, e.expected.Load())
		})
	}
}

// An engine learns the burst that began a busy period (its first two
// steps' requests) and gathers as many at its next wake, within its bound;
// a busy period begun by one request forgets it.
func TestEngineBurst(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 1024}})
	prompt := engTokenize(t, m, "Once upon a time", true)
	decodes := func() int64 { return e.Metrics().DecodeTotal }
	var wg sync.WaitGroup
	collect := func(st *Stream, err error) {
		require.NoError(t, err)
		wg.Go(func() { assert.NoError(t, engCollect(t, st).done.Err) })
	}
	// parked waits for the loop to go idle: a request submitted before
	// would join its last turn, and the burst is learned by then.
	parked := func() {
		require.Eventually(t, e.parked.Load, time.Minute, 100*time.Microsecond)
	}
	submit := func(n int) (*Stream, error) {
		return e.Submit(context.Background(), engGreedyTask(prompt, n))
	}
	for _, tc := range []struct {
		name    string
		burst   int           // the burst learned before
		wait    time.Duration // the engine's bound
		second  string        // when a second request comes: "", "late" (after the loop woke for the first), "step 2"
		decodes int64
		learned int
	}{
		{"joining the second step teaches a burst", 0, time.Minute, "step 2", 8, 2},
		{"a learned burst is gathered", 2, time.Minute, "late", 1, 2},
		{"unlearned, a late request is a period of its own", 0, time.Minute, "late", 2, 0},
		{"a lone request forgets the burst", 2, 20 * time.Millisecond, "", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, e.do(func() {
				e.burstN, e.burstWait = tc.burst, tc.wait
				e.lead = time.Hour // long steps: the bound is the engine's
			}))
			parked()
			before := decodes()
			switch tc.second {
			case "step 2":
				// The loop runs the second control function after its
				// first turn, so the second request joins the second step.
				second := make(chan *Stream, 1)
				require.NoError(t, e.do(func() {
					collect(submit(8))
					e.mu.Lock()
					e.ctrl = append(e.ctrl, func() {
						st, err := submit(1)
						assert.NoError(t, err)
						second <- st
					})
					e.mu.Unlock()
				}))
				collect(<-second, nil)
			case "late":
				parks := e.parks.Load()
				collect(submit(1))
				if tc.burst > 0 {
					// The loop has woken for the first, and gathers.
					require.Eventually(t, func() bool { return !e.parked.Load() }, time.Minute, 100*time.Microsecond)
				} else {
					// The loop starts the first at once and is idle again
					// after it, well within the engine's bound of a minute.
					require.Eventually(t, func() bool { return e.parked.Load() && e.parks.Load() > parks }, 20*time.Second, 100*time.Microsecond)
				}
				collect(submit(1))
			default:
				collect(submit(1))
			}
			wg.Wait()
			parked()
			assert.Equal(t, tc.decodes, decodes()-before, "decode steps")
			var n int
			require.NoError(t, e.do(func() { n = e.burstN }))
			assert.Equal(t, tc.learned, n, "burst learned")
		})
	}
}
