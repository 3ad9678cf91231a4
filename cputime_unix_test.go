//go:build unix

package llama_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used (user and system),
// which a benchmark on a loaded machine measures more steadily than the
// time on the clock; 0 where the system does not tell.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
