//go:build linux

package engine

import (
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every function a cThread runs runs on its one thread, whichever thread
// the caller is on; a panic comes back to the caller.
func TestCThread(t *testing.T) {
	c := newCThread()
	defer c.close()
	tids := map[int]bool{}
	for range 50 {
		c.run(func() { tids[syscall.Gettid()] = true })
		runtime.Gosched()
	}
	assert.Len(t, tids, 1)
	for tid := range tids {
		assert.NotEqual(t, syscall.Gettid(), tid, "not the caller's thread")
	}
	require.PanicsWithValue(t, "boom", func() { c.run(func() { panic("boom") }) })
	ran := false
	c.run(func() { ran = true })
	assert.True(t, ran, "the thread survives a panic")
}
