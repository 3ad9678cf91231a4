package main

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// setProcessPriority gives the process the nice value llama.cpp gives it
// for --prio (low 5, medium -5, high -10, realtime -20). Linux keeps a
// nice value per thread, and a new thread takes its creator's: every
// thread the process has now is set, and Go's later threads follow.
func setProcessPriority(prio int) error {
	if prio == 0 {
		return nil
	}
	nice := map[int]int{-1: 5, 1: -5, 2: -10, 3: -20}[prio]
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
