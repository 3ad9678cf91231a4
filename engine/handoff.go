package engine

import (
	"runtime"
	"slices"
	"time"
)

// firstTokenNap is how long the loop's thread sleeps after a step that
// woke a reader for its first token, on a CPU whose cores the decode
// takes (see handOffFirst).
const firstTokenNap = 100 * time.Microsecond

// coresTaken reports whether a model's decodes, on threads compute
// threads, leave no core to the rest of the machine: the model runs on
// the CPU with a thread per core or more.
func coresTaken(onGPU bool, threads, cores int) bool {
	return !onGPU && threads >= cores
}

// handOffFirst lets a request's first token reach its client before the
// next decode, when the decode takes every core.
//
// Between two decodes ggml's compute threads keep their cores (the pool's
// threads poll for the next graph, and the loop's own thread computes
// with them), so whatever else must run to deliver a token waits for the
// kernel to take a core from them: the reader's goroutine, woken on this
// loop's P, and the client itself when it runs on this machine (a UI, an
// editor, an agent). Measured with stories260K on two cores, that wait
// put the first token of a lone stream milliseconds behind llama-server's,
// whose HTTP thread writes and then sleeps, handing its core to the
// client. So, once per request:
//
//   - runtime.Gosched runs the woken reader on this thread now (yielding
//     again, a bounded number of times, until it has taken its token): it
//     writes its token before the decode starts;
//   - a short sleep of the thread (firstTokenNap, not Go's timer, which
//     would keep the thread spinning) leaves its core to the client that
//     the write woke.
//
// Later tokens do not pay it: their readers are woken as before, and a
// step's cost stays what the decode takes.
func (e *Engine) handOffFirst() {
	// Go's scheduler runs a goroutine this one woke next, but not always
	// (the race detector shuffles its order): yield until the readers
	// have taken their tokens, a bounded number of times.
	for range maxHandOffYields {
		runtime.Gosched()
		if !slices.ContainsFunc(e.firstOut, (*outbox).unread) {
			break
		}
	}
	napThread(firstTokenNap)
}

// maxHandOffYields bounds the yields of handOffFirst: a reader that does
// not take its token within them is not waited for.
const maxHandOffYields = 64

// testBeforeDecode, when set, is called by the loop right before each
// step's decode (tests only).
var testBeforeDecode func()
