//go:build unix

package testenv

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path, creating it, and returns the
// function that releases it. The kernel drops the lock if the process dies.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
