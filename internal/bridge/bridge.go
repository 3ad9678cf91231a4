// Package bridge lets other packages of this module reach what package llama
// keeps unexported (the C pointers of its models and contexts) without
// exporting uintptr handles from the public API. Package llama fills the
// variables in its init; a package that imports llama can rely on them.
package bridge

import (
	"context"
	"sync/atomic"
)

var (
	// Model returns the C pointer of a *llama.Model, read-locked until
	// release is called (Close waits for it).
	Model func(m any) (ptr uintptr, release func(), err error)

	// Context runs f with the C pointer of a *llama.Context while holding
	// the context's lock, with ctx's end wired to the context's abort flag
	// (llama_decode calls made by f return 2 when ctx ends). f returns the
	// C status; Context turns a non-zero one into an error, removing
	// positions from rollbackFrom on of seq when ctx ended.
	Context func(c any, ctx context.Context, op string, seq, rollbackFrom int, f func(ptr uintptr) int32) error

	// AddChild registers close to be called when the model m is closed
	// (before the model is freed). It returns the function that unregisters
	// it, or ok false when the model is already closed.
	AddChild func(m any, close func()) (remove func(), ok bool)

	// GenerateFrom returns c.GenerateTokens(ctx, prompt, opts) with Keep,
	// the prompt starting at position pos of the sequence ([]llama.Token,
	// llama.GenerateOptions and *llama.Generation behind the any types).
	GenerateFrom func(c any, ctx context.Context, prompt, opts any, pos int) (any, error)

	// LogCallback returns the C log callback package llama currently gives
	// llama.cpp (a no-op one when no logger is set).
	LogCallback func() uintptr
)

// logHook is called by package llama whenever its logger changes, with
// the new C log callback.
var logHook atomic.Pointer[func(cb uintptr)]

// SetLogHook installs the function package llama calls with the new C log
// callback when its logger changes.
func SetLogHook(f func(cb uintptr)) { logHook.Store(&f) }

// LogChanged is called by package llama after it set a new log callback.
func LogChanged(cb uintptr) {
	if f := logHook.Load(); f != nil {
		(*f)(cb)
	}
}
