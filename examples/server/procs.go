package main

import (
	"os"
	"runtime"
)

// The compute threads and Go's scheduler share the cores. llama.cpp's
// threads meet at a barrier after each operation of a decode, so a
// Go thread that takes a core from one of them for a moment (a handler
// writing a token, the scheduler looking for work, the collector) stalls
// them all. When the compute threads take every core, as they do by
// default, the Go scheduler gets one: handlers still run, on the core a
// decode leaves when it returns to Go or beside it, but no more than one
// at a time. $GOMAXPROCS, when set, wins.

// goMaxProcs returns the GOMAXPROCS for ncpu cores beside compute threads
// (the larger of -t and -tb; 0: all the cores): the cores they leave, at
// least one.
func goMaxProcs(ncpu, threads, threadsBatch int) int {
	n := max(threads, threadsBatch)
	if n <= 0 {
		n = ncpu
	}
	return max(1, ncpu-n)
}

// setGoMaxProcs applies goMaxProcs unless $GOMAXPROCS is set.
func setGoMaxProcs(threads, threadsBatch int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(goMaxProcs(runtime.NumCPU(), threads, threadsBatch))
}
