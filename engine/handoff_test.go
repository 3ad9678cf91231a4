package engine

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

func TestCoresTaken(t *testing.T) {
	for _, tc := range []struct {
		name           string
		onGPU          bool
		threads, cores int
		want           bool
	}{
		{"a thread per core", false, 2, 2, true},
		{"more threads than cores", false, 4, 2, true},
		{"a core left", false, 1, 2, false},
		{"half the cores", false, 8, 16, false},
		{"on a GPU", true, 16, 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, coresTaken(tc.onGPU, tc.threads, tc.cores))
		})
	}
}

// TestEngineFirstTokenHandOff: when the decode takes every core, the
// reader of a stream has its first token before the next decode starts
// (on one P, so that nothing but the hand-off can run it); later tokens
// are not waited for.
func TestEngineFirstTokenHandOff(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512, Threads: runtime.NumCPU()}})
	require.True(t, e.coresTaken)
	var got atomic.Int32 // events the reader has taken
	var atDecode []int32 // got at each decode's start
	testBeforeDecode = func() { atDecode = append(atDecode, got.Load()) }
	t.Cleanup(func() { testBeforeDecode = nil })
	st, err := e.Submit(context.Background(), engGreedyTask(engTokenize(t, m, "Once upon a time", true), 8))
	require.NoError(t, err)
	defer st.Close()
	for st.Next() {
		got.Add(1)
	}
	require.NoError(t, st.Err())
	require.Len(t, atDecode, 8, "the prompt's decode and 7 more")
	assert.Equal(t, int32(0), atDecode[0])
	assert.Equal(t, int32(1), atDecode[1], "the first token is read before the second decode")
}
