package llama

import (
	"context"
	"runtime"

	"github.com/ebitengine/purego"
	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/capi"
)

// The bridge gives this module's other packages (package mtmd) the C
// pointers of models and contexts without exporting them.

type childFunc struct{ f func() }

func (c *childFunc) closeFromParent() { c.f() }

func init() {
	bridge.Model = func(x any) (uintptr, func(), error) {
		m, ok := x.(*Model)
		if !ok || m == nil {
			return 0, nil, errorf(CodeInvalid, "model", "no model")
		}
		done, err := m.use("model")
		if err != nil {
			return 0, nil, err
		}
		return uintptr(m.ptr), done, nil
	}
	bridge.AddChild = func(x any, f func()) (func(), bool) {
		m, ok := x.(*Model)
		if !ok || m == nil {
			return nil, false
		}
		c := &childFunc{f: f}
		if !m.addChild(c) {
			return nil, false
		}
		return func() { m.removeChild(c) }, true
	}
	bridge.Context = bridgeContext
	bridge.GenerateFrom = func(x any, ctx context.Context, prompt, opts any, pos int) (any, error) {
		c, ok1 := x.(*Context)
		toks, ok2 := prompt.([]Token)
		o, ok3 := opts.(GenerateOptions)
		if !ok1 || !ok2 || !ok3 || c == nil {
			return nil, errorf(CodeInvalid, "generate", "bad bridge call")
		}
		return c.generateFrom(ctx, toks, o, pos), nil
	}
	bridge.LogCallback = currentLogCallback
}

func bridgeContext(x any, ctx context.Context, op string, seq, from int, f func(uintptr) int32) error {
	c, ok := x.(*Context)
	if !ok || c == nil {
		return errorf(CodeInvalid, op, "no context")
	}
	if err := c.lock(op); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK(op, seq, false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &Error{Code: CodeCanceled, Op: op, Err: err}
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, c.setAbort)
	}
	c.idle = false // f may decode (mtmd evaluates its chunks with llama_decode)
	rc := f(uintptr(c.ptr))
	if stop != nil && !stop() {
		for c.abort.Load() == 0 {
			runtime.Gosched()
		}
	}
	c.abort.Store(0)
	// The outputs of the last decode are no longer known to this package.
	c.nOut = 0
	if rc == 0 {
		return nil
	}
	capi.MemorySeqRm(c.mem, int32(seq), clampPos(from), -1)
	if c.closing.Load() {
		return closedErr(op, "context")
	}
	if err := ctx.Err(); err != nil {
		return &Error{Code: CodeCanceled, Op: op, Err: err}
	}
	return errorf(CodeDecode, op, "libmtmd failed with code %d", rc)
}

func currentLogCallback() uintptr {
	if logger.Load() == nil {
		return capi.NoopFunc
	}
	logCBOnce.Do(func() { logCB = purego.NewCallback(logCallback) })
	return logCB
}
