//go:build race

package testenv

// Race reports whether the race detector is on.
const Race = true
