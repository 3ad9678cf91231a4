//go:build !unix

package tools

import "os/exec"

// openNonblock is not needed where there are no FIFOs to open.
const openNonblock = 0

// setProcessGroup does nothing where process groups are not available.
func setProcessGroup(*exec.Cmd) {}

// killProcessGroup kills cmd's process.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// hideProcess has nothing to do where there is no /proc.
func hideProcess() error { return nil }
