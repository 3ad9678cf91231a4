package llama_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestIdle: after Idle the context's worker thread sleeps instead of
// polling for the next decode (the process uses next to no CPU while the
// test sleeps), and the next decode wakes it and computes what a context
// that never idled computes.
func TestIdle(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the CPU backend's pause is found through dladdr on Linux and macOS only")
	}
	m := loadModel(t, "llama-2-tiny-random.gguf")
	decode := promptDecoder(t, m)
	for _, tc := range []struct {
		name           string
		threads, batch int
	}{
		{"one pool", 2, 2},
		{"two pools", 1, 2},
		{"no worker", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 256, Threads: tc.threads, ThreadsBatch: tc.batch})
			want := decode(c)
			decode(c)
			require.NoError(t, c.Idle())
			cpu0 := processCPU()
			// The sleeps are the subject: the CPU the process uses in a quiet
			// window of wall time after Idle (nothing to wait for).
			time.Sleep(200 * time.Millisecond)
			used := processCPU() - cpu0
			t.Logf("CPU in 200 ms after a decode and Idle: %v", used)
			if cpu0 != 0 {
				assert.Less(t, used, 40*time.Millisecond, "the worker threads still poll after Idle")
			}
			assert.Equal(t, want, decode(c), "the decode after Idle differs")
			// A decode after Idle makes the threads poll again, and the
			// next Idle pauses them again: Idle is not only once.
			require.NoError(t, c.Idle())
			require.NoError(t, c.Idle(), "Idle twice")
			decode(c)
			require.NoError(t, c.Idle())
			cpu0 = processCPU()
			time.Sleep(200 * time.Millisecond) // a quiet window, as above
			used = processCPU() - cpu0
			if cpu0 != 0 {
				assert.Less(t, used, 40*time.Millisecond, "the worker threads poll after a decode and a second Idle")
			}
		})
	}
	c, err := m.NewContext(llama.ContextOptions{ContextSize: 256})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.Idle(), llama.ErrClosed)
}
