//go:build unix

package tools

import (
	"os/exec"
	"syscall"
)

// openNonblock opens a FIFO without waiting for its other end.
const openNonblock = syscall.O_NONBLOCK

// setProcessGroup starts cmd in a session (and process group) of its
// own, so that killProcessGroup also ends what it started.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killProcessGroup kills cmd's process group, then (on Linux) every
// process left of its session, of the processes that carry its run tag
// in their environment (children that called setsid themselves) and
// their descendants. cmd must have started.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	killStragglers(pid, runTagOf(cmd.Env))
}
