package server

import (
	"context"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// engineAPI is what the handlers use of an engine: *engine.Engine behind
// engineClient (tests put wrappers in front of it).
type engineAPI interface {
	// Submit queues tasks together (engine.Engine.SubmitAll) and returns
	// their events as one stream, in the order they come; the stream ends
	// with ctx.
	Submit(ctx context.Context, tasks ...*engine.Request) (eventStream, error)
	// Expect announces a request being prepared (engine.Engine.Expect).
	Expect() (arrived func())
	Model() *llama.Model
	SlotsInfo() []engine.SlotInfo
	Slots() int
	SlotContext() int
	Metrics() engine.Metrics
	SaveSlot(id int, path string) (nTokens int, nBytes int, err error)
	RestoreSlot(id int, path string) (nTokens int, nBytes int, err error)
	EraseSlot(id int) (nErased int, err error)
	Adapters() []engine.AdapterInfo
	SetAdapterScales([]engine.LoRAScale) error
	Close() error
}

// eventStream is the events of submitted tasks, read like sql.Rows: an
// *engine.Stream. Index is the task of the current event.
type eventStream interface {
	Next() bool
	Event() engine.Event
	Index() int
	Err() error
	Close() error
}

// engineClient adapts *engine.Engine to engineAPI.
type engineClient struct{ *engine.Engine }

// newEngine starts an engine on m.
func newEngine(m *llama.Model, o engine.Options) (engineAPI, error) {
	e, err := engine.New(m, o)
	if err != nil {
		return nil, err
	}
	return engineClient{e}, nil
}

func (c engineClient) Submit(ctx context.Context, tasks ...*engine.Request) (eventStream, error) {
	st, err := c.Engine.SubmitAll(ctx, tasks)
	if err != nil {
		return nil, err
	}
	return st, nil
}
