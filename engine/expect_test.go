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
			require.NoError(t, e.do(func() { e.gatherWait = tc.wait }))
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
			submit(0)
			time.Sleep(20 * time.Millisecond) // the loop has woken for the first
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
