//go:build linux || darwin

package main

import (
	"runtime"
	"syscall"
)

// reusePort sets SO_REUSEPORT on a listening socket (--reuse-port).
func reusePort(_, _ string, rc syscall.RawConn) error {
	opt := 0xf // Linux
	if runtime.GOOS == "darwin" {
		opt = 0x200
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 1)
	}); err != nil {
		return err
	}
	return serr
}
