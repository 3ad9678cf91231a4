//go:build unix

package engine

import "syscall"

// openNoFollow are the open flags of slot files: do not follow a final
// symbolic link, do not block on a FIFO.
const openNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
