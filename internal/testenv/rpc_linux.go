package testenv

import "syscall"

// workerAttr ends a worker with the test binary, even when a timeout's
// panic skips the cleanups.
func workerAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
