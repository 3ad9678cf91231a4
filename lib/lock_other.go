//go:build !unix

package lib

// lockFile is a no-op where the builds that take it are not supported.
func lockFile(string) (func(), error) { return func() {}, nil }
