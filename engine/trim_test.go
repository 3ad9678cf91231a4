package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// An engine idle for TrimIdle after work returns the C heap's free memory
// once per idle spell; an engine that has not worked since, or whose
// TrimIdle is negative, does not.
func TestEngineTrimIdle(t *testing.T) {
	if !llama.TrimMemory() {
		t.Fatal("the C library has no malloc_trim: these tests run on glibc")
	}
	for _, tc := range []struct {
		name  string
		idle  time.Duration
		trims int64 // after two requests, each followed by an idle spell
	}{
		{"after each busy period", 20 * time.Millisecond, 2},
		{"never", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256}, TrimIdle: tc.idle})
			prompt := engTokenize(t, m, "Once upon a time", true)
			for range 2 {
				st, err := e.Submit(context.Background(), engGreedyTask(prompt, 4))
				require.NoError(t, err)
				require.NoError(t, engCollect(t, st).done.Err)
				require.Eventually(t, e.parked.Load, time.Minute, 100*time.Microsecond)
				time.Sleep(10*tc.idle + 50*time.Millisecond) // several TrimIdle: still one trim (made off the loop)
			}
			assert.Equal(t, tc.trims, e.trims.Load())
		})
	}
}

// The default is DefaultTrimIdle.
func TestEngineTrimIdleDefault(t *testing.T) {
	_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256}})
	assert.Equal(t, DefaultTrimIdle, e.trimIdle)
}
