//go:build !linux

package engine

import "time"

// napThread sleeps for d (the goroutine's; the thread may run others).
func napThread(d time.Duration) { time.Sleep(d) }
