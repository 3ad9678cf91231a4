// Package bridge lets package mtmd reach what package llama keeps
// unexported (the C pointers of its models and contexts, and where a
// generation's prompt starts) without widening llama's API.
//
// Package llama embeds the link types of this package in its Model,
// Context and Generation, unexported (through type aliases), so that a
// *llama.Model has the unexported method of *Model and satisfies the
// interfaces the functions here take: package mtmd passes its *llama.Model
// to ModelOf, and so on, and everything is checked by the compiler. The
// links carry no exported field or method, so nothing shows through
// llama's types.
package bridge

import (
	"context"
	"sync"
)

// ModelOps is what package llama lends of a model.
type ModelOps interface {
	// Use returns the model's C pointer, read-locked until release is
	// called (Close waits for it).
	Use(op string) (ptr uintptr, release func(), err error)
	// AddChild registers close to be called when the model is closed
	// (before it is freed). It returns the function that unregisters it,
	// or ok false when the model is already closed.
	AddChild(close func()) (remove func(), ok bool)
	// BPE reports whether the vocabulary is BPE, whose pre-tokenizer must
	// not see runs longer than pretok.MaxRun. It takes the model's lock
	// the first time: call it before Use.
	BPE() bool
	// Tokenizing waits for room to tokenize n bytes of text within the
	// model's tokenizing budget (see llama.Model.Tokenize) and returns
	// its release.
	Tokenizing(n int) (release func())
}

// Model is the link embedded in llama.Model.
type Model struct{ ops ModelOps }

// NewModel returns the link of a model whose operations are ops.
func NewModel(ops ModelOps) Model { return Model{ops: ops} }

func (l *Model) modelLink() *Model { return l }

type modelHolder interface{ modelLink() *Model }

// ModelOf returns the operations of m (a *llama.Model, not nil); nil for
// a model LoadModel did not make.
func ModelOf(m modelHolder) ModelOps { return m.modelLink().ops }

// ContextOps is what package llama lends of a context.
type ContextOps interface {
	// Run runs f with the context's C pointer while holding the
	// context's lock, with ctx's end wired to the context's abort flag
	// (llama_decode calls made by f return 2 when ctx ends). f returns
	// the C status; Run turns a non-zero one into an error, removing the
	// positions from rollbackFrom on of seq.
	Run(ctx context.Context, op string, seq, rollbackFrom int, f func(ptr uintptr) int32) error
}

// Context is the link embedded in llama.Context.
type Context struct{ ops ContextOps }

// NewContext returns the link of a context whose operations are ops.
func NewContext(ops ContextOps) Context { return Context{ops: ops} }

func (l *Context) contextLink() *Context { return l }

type contextHolder interface{ contextLink() *Context }

// ContextOf returns the operations of c (a *llama.Context, not nil); nil
// for a context NewContext did not make.
func ContextOf(c contextHolder) ContextOps { return c.contextLink().ops }

// Generation is the link embedded in llama.Generation: where its prompt
// starts when package mtmd says (its zero value: after the sequence's
// largest position, or at 0 without Keep).
type Generation struct {
	start int
	set   bool
}

func (l *Generation) generationLink() *Generation { return l }

type generationHolder interface{ generationLink() *Generation }

// StartAt makes the prompt of g (a *llama.Generation made with Keep, not
// run yet) start at position pos of its sequence rather than after the
// sequence's largest position: M-RoPE models' media take more positions
// than the memory's largest position shows.
func StartAt(g generationHolder, pos int) {
	l := g.generationLink()
	l.start, l.set = pos, true
}

// Start returns the position StartAt set, if any.
func Start(l *Generation) (pos int, ok bool) { return l.start, l.set }

// The C log callback of package llama, and package mtmd's hook.
var (
	logMu   sync.Mutex
	logCB   uintptr
	logHook func(cb uintptr)
)

// LogChanged is called by package llama with the C log callback it gives
// llama.cpp, when it loads the library and whenever its logger changes.
func LogChanged(cb uintptr) {
	logMu.Lock()
	defer logMu.Unlock()
	logCB = cb
	if logHook != nil {
		logHook(cb)
	}
}

// SetLogHook installs the function called with package llama's C log
// callback: now, when package llama has set one, and on each change.
func SetLogHook(f func(cb uintptr)) {
	logMu.Lock()
	defer logMu.Unlock()
	logHook = f
	if logCB != 0 {
		f(logCB)
	}
}
