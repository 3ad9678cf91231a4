package engine

import "runtime"

// cThread runs functions on one OS thread of its own, for the calls into
// llama.cpp that allocate heavily: a grammar's pass over a whole row
// allocates and frees a vector for each token of the vocabulary, tens of
// MB or more on a large one. glibc's malloc keeps what a thread frees in
// that thread's arena, and Go runs the engine's loop on whichever thread
// is free, so the passes made there left an arena of that size for every
// thread the loop had run on (a server's resident size grew by hundreds
// of MB). On one thread they reuse one arena, as llama-server's one
// thread does. (The loop itself cannot be locked to a thread: its
// first-token hand-off runs the reader on the loop's thread.)
type cThread struct {
	work chan func()
	done chan any // f's panic value, or nil
}

// newCThread starts the thread; close ends it.
func newCThread() *cThread {
	t := &cThread{work: make(chan func()), done: make(chan any)}
	go func() {
		runtime.LockOSThread() // for good: the thread ends with the goroutine
		for f := range t.work {
			t.done <- t.call(f)
		}
	}()
	return t
}

func (t *cThread) call(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// run runs f on the thread and waits for it. A panic of f is raised
// again on the caller's goroutine, where the engine recovers it.
func (t *cThread) run(f func()) {
	t.work <- f
	if p := <-t.done; p != nil {
		panic(p)
	}
}

// close ends the thread; run must not be called after.
func (t *cThread) close() { close(t.work) }
