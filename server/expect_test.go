package server

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/engine"
)

// expectEngine records the order of a request's engine calls: Expect,
// Submit, and the reading of the submitted tasks' events.
type expectEngine struct {
	engineAPI
	mu               sync.Mutex
	expects, pending int  // Expect calls, and those not yet ended
	readEarly        bool // events were read while their request was still expected
}

func (e *expectEngine) Expect() func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expects++
	e.pending++
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.pending--
		})
	}
}

func (e *expectEngine) Submit(ctx context.Context, t ...*engine.Request) (eventStream, error) {
	st, err := e.engineAPI.Submit(ctx, t...)
	if err != nil {
		return nil, err
	}
	return &expectStream{eventStream: st, e: e}, nil
}

type expectStream struct {
	eventStream
	e *expectEngine
}

func (s *expectStream) Next() bool {
	s.e.mu.Lock()
	s.e.readEarly = s.e.readEarly || s.e.pending > 0
	s.e.mu.Unlock()
	return s.eventStream.Next()
}

// Every generation endpoint announces its request to the engine
// (engine.Engine.Expect) and ends the announcement once its tasks are
// submitted, before it waits for their first event: an idle engine holds
// its first step back for the requests it expects, so a handler that
// awaited an event first would hold its own request back.
func TestGenerationExpect(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	inst := defaultInstance(t, s)
	real := inst.Engine
	t.Cleanup(func() { inst.Engine = real })
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/completion", map[string]any{"prompt": "Once", "n_predict": 2}},
		{"/completion", map[string]any{"prompt": "Once", "n_predict": 2, "stream": true}},
		{"/v1/completions", map[string]any{"prompt": "Once", "max_tokens": 2}},
		{"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "max_tokens": 2}},
		{"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "max_tokens": 2, "stream": true}},
		{"/v1/messages", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "max_tokens": 2}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			e := &expectEngine{engineAPI: real}
			inst.Engine = e
			code, out := postRaw(t, ts.URL+tc.path, tc.body)
			require.Equal(t, http.StatusOK, code, "%s", out)
			assert.Equal(t, 1, e.expects, "Expect calls")
			assert.Zero(t, e.pending, "expectations not ended")
			assert.False(t, e.readEarly, "events read before the expectation ended")
		})
	}
}
