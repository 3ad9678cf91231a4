//go:build unix

package webui

import "syscall"

// openNonblocking is added to the flags of files opened for reading
// from a folder a client names files in: opening a FIFO then returns at
// once instead of waiting for a writer (the type is checked on the open
// file, and anything but a regular file refused).
const openNonblocking = syscall.O_NONBLOCK
