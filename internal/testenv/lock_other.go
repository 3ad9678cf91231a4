//go:build !unix

package testenv

// lockFile is a no-op where flock is unavailable: the source tool is a bash
// script for Unix-like systems anyway, so concurrent unpacking only matters
// there.
func lockFile(string) (func(), error) { return func() {}, nil }
