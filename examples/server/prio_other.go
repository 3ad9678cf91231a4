//go:build !linux

package main

// setProcessPriority does nothing here: the compute threads' priority
// (llama.ThreadPoolOptions) is ggml's to apply.
func setProcessPriority(int) error { return nil }
