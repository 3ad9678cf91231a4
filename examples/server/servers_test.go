package main

import (
	"testing"
)

// Helpers that run this server's binary and llama.cpp's llama-server the
// same way, for the tests that compare them.

// ourServer is this package's binary, built once per test run.
func ourServer(t *testing.T) string {
	t.Helper()
	return buildServer(t)
}
