//go:build !linux

package testenv

import "syscall"

func workerAttr() *syscall.SysProcAttr { return nil }

func listensOn(pid, port int) (ok, known bool) { return false, false }
