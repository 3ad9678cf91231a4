//go:build !linux && !darwin

package main

import (
	"errors"
	"syscall"
)

// reusePort is not available here.
func reusePort(_, _ string, _ syscall.RawConn) error {
	return errors.New("--reuse-port is not supported on this system")
}
