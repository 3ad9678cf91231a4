package llama

import (
	"context"

	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/capi"
)

// The links of internal/bridge, embedded unexported in Model, Context and
// Generation: they give package mtmd the C pointers of models and
// contexts, and where a generation starts, without exporting them.
type (
	modelLink      = bridge.Model
	contextLink    = bridge.Context
	generationLink = bridge.Generation
)

// modelBridge and contextBridge are Model and Context with the methods the
// bridge's interfaces ask for, which Model and Context do not export.
type (
	modelBridge   Model
	contextBridge Context
)

type childFunc struct{ f func() }

func (c *childFunc) closeFromParent() { c.f() }

func (b *modelBridge) Use(op string) (uintptr, func(), error) {
	m := (*Model)(b)
	done, err := m.use(op)
	if err != nil {
		return 0, nil, err
	}
	return uintptr(m.ptr), done, nil
}

func (b *modelBridge) AddChild(f func()) (func(), bool) {
	m := (*Model)(b)
	c := &childFunc{f: f}
	if !m.addChild(c) {
		return nil, false
	}
	return func() { m.removeChild(c) }, true
}

func (b *modelBridge) BPE() bool { return (*Model)(b).isBPE() }

func (b *modelBridge) Tokenizing(n int) func() { return (*Model)(b).tokenizingRoom(n) }

func (b *contextBridge) Run(ctx context.Context, op string, seq, from int, f func(uintptr) int32) error {
	c := (*Context)(b)
	if err := c.lock(op); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.seqOK(op, seq, false); err != nil {
		return err
	}
	// libmtmd evaluates on the calling thread where it stands (n = 0).
	run, err := c.beginCompute(ctx, op, 0)
	if err != nil {
		return err
	}
	// f evaluates chunks with llama_decode and the projector: with RPC
	// workers, under the guard, waiting for the result (see rpcCompute).
	var rc int32
	err = c.model.rpcGuard(op, func() {
		if rc = f(uintptr(c.ptr)); rc == 0 && len(c.model.rpcServers) > 0 {
			capi.Synchronize(c.ptr)
		}
	})
	c.endCompute(run)
	if err != nil {
		return err
	}
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
