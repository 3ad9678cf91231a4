package server

import (
	"context"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// engineAPI is what the handlers use of an engine: *engine.Engine behind
// engineClient, whose Submit hands events over a channel tied to the
// request's context.
type engineAPI interface {
	Submit(ctx context.Context, t *engine.Request) (<-chan engine.Event, error)
	Model() *llama.Model
	SlotsInfo() []engine.SlotInfo
	Metrics() engine.Metrics
	SaveSlot(id int, path string) (nTokens int, nBytes int, err error)
	RestoreSlot(id int, path string) (nTokens int, nBytes int, err error)
	EraseSlot(id int) (nErased int, err error)
	Adapters() []engine.AdapterInfo
	SetAdapterScales([]engine.LoRAScale) error
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

// Submit queues t and returns its events on a channel, closed after the
// last one or when ctx is done; every handler's ctx is its request's, which
// ends with the handler, so the goroutine feeding the channel always ends.
func (c engineClient) Submit(ctx context.Context, t *engine.Request) (<-chan engine.Event, error) {
	st, err := c.Engine.Submit(ctx, t)
	if err != nil {
		return nil, err
	}
	ch := make(chan engine.Event, 16)
	go func() {
		defer close(ch)
		defer st.Close()
		for st.Next() {
			select {
			case ch <- st.Event():
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// defaultSampling returns the sampling parameters requests start from:
// o.Sampling (a copy) or DefaultSamplingParams.
func (o *Options) defaultSampling() engine.SamplingParams {
	if o.Sampling == nil {
		return engine.DefaultSamplingParams()
	}
	p := *o.Sampling
	p.DRYSequenceBreakers = append([]string(nil), p.DRYSequenceBreakers...)
	p.Samplers = append([]string(nil), p.Samplers...)
	if p.LogitBias != nil {
		b := make(map[llama.Token]float32, len(p.LogitBias))
		for k, v := range p.LogitBias {
			b[k] = v
		}
		p.LogitBias = b
	}
	return p
}
