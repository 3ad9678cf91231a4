//go:build !linux

package testenv

import "syscall"

func workerAttr() *syscall.SysProcAttr { return nil }
