//go:build !linux

package llama

// rpcDropConnections is a no-op where the process's sockets cannot be
// listed: after a worker failure, the workers that still run stay busy
// with the failed model's connections until the process ends.
func rpcDropConnections([]string) {}
