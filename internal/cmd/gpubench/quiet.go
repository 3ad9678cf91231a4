package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/internal/benchlimit"
)

// Between rounds the side that just ran must not take the cores from the
// next: ggml's compute threads keep polling for the next decode after
// their last one (about 6.5 million pause instructions at the default
// polling level: a fraction of a second on an idle core, several times
// that on a busy machine, where a spinning thread gets a share of a
// core). Our engine pauses its threads once it has nothing to decode;
// llama-server's poll on, and a fixed pause after its rounds let them
// spin into the start of ours, its first decodes and first token
// included. So after each round gpubench waits until the processes under
// test are idle.

// Idle means under quietShare of one core over a window of quietWindow;
// the wait gives up after quietMax (a process that never quiets: the
// next round runs anyway).
const (
	quietWindow = 25 * time.Millisecond
	quietShare  = 0.05
	quietMax    = 5 * time.Second
)

// settle waits benchlimit.Settle, then until the processes pids (this
// process and llama-server's) are idle, and returns how long that took
// beyond the pause.
func settle(pids []int) time.Duration {
	time.Sleep(benchlimit.Settle)
	return time.Duration(max(waitIdle(pids, cpuTime, time.Sleep)-1, 0)) * quietWindow
}

// waitIdle waits until the CPU time of pids (cpu reads it) grows by under
// quietShare of quietWindow within one window, or quietMax has passed,
// and returns the windows it waited.
func waitIdle(pids []int, cpu func(pid int) (time.Duration, bool), sleep func(time.Duration)) int {
	total := func() (time.Duration, bool) {
		var sum time.Duration
		for _, p := range pids {
			d, ok := cpu(p)
			if !ok {
				return 0, false
			}
			sum += d
		}
		return sum, true
	}
	prev, ok := total()
	if !ok {
		return 0
	}
	n := 0
	for ; time.Duration(n)*quietWindow < quietMax; n++ {
		sleep(quietWindow)
		cur, ok := total()
		if !ok || float64(cur-prev) < quietShare*float64(quietWindow) {
			return n + 1
		}
		prev = cur
	}
	return n
}

// cpuTime returns the CPU time of process pid's threads so far, from
// Linux's schedstat (nanoseconds); false where it cannot be read.
func cpuTime(pid int) (time.Duration, bool) {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, true
}
