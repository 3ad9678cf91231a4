//go:build unix && !linux

package tools

// killStragglers has no cheap way to find a session's escapees without
// /proc: the process group kill is all there is.
func killStragglers(int, string) {}

// hideProcess has nothing to do: these systems do not show a process's
// environment to others through a file system.
func hideProcess() error { return nil }
