//go:build linux

package engine

import (
	"syscall"
	"time"
)

// napThread puts the calling thread to sleep for d in the kernel,
// leaving its core to other threads.
func napThread(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	_ = syscall.Nanosleep(&ts, nil)
}
