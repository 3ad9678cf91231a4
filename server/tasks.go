package server

// A request's task: checked against the context, submitted to the
// engine, its first event awaited (so that a task failing at once gets an
// HTTP error status) and its events collected into a result.

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/x/llama/engine"

	"github.com/x/llama"
)

// runTask checks t's prompt against the context and submits it. Cancelling
// ctx (the request's context) cancels the task.
func (s *Server) runTask(ctx context.Context, inst *instance, t *engine.Request) (<-chan engine.Event, error) {
	if t.Kind == engine.KindCompletion {
		if err := inst.limitTask(t); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err // the client left while the request was prepared
		}
		if len(t.Prompt) == 0 {
			return nil, badRequest("the prompt is empty")
		}
		if n := inst.slotContext(); len(t.Prompt) >= n {
			return nil, exceedContext(len(t.Prompt), n)
		}
	}
	ch, err := inst.Engine.Submit(ctx, t)
	if err != nil {
		if errors.Is(err, engine.ErrBusy) {
			return nil, &httpError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Msg: err.Error(), Err: err}
		}
		return nil, err
	}
	return ch, nil
}

// peekEvents waits for a task's first event, so that a task failing at
// once is answered with an HTTP error status rather than inside a stream
// already started. It returns the events, the first one included.
func peekEvents(ctx context.Context, ch <-chan engine.Event) (<-chan engine.Event, error) {
	var first engine.Event
	select {
	case ev, ok := <-ch:
		if !ok {
			return nil, errors.New("the engine ended the task without a result")
		}
		first = ev
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if first.Err != nil {
		return nil, first.Err
	}
	out := make(chan engine.Event, 1)
	out <- first
	go func() {
		defer close(out)
		for ev := range ch {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// step is one generated token and its probabilities.
type step struct {
	Token   llama.Token
	Text    string
	Sampled *engine.TokenProb
	Probs   []engine.TokenProb
}

// completionResult is a finished task's output.
type completionResult struct {
	Text   string
	Tokens []llama.Token
	Steps  []step       // only with n_probs
	Final  engine.Event // the Done event
}

// collect reads events until the task ends; end-of-generation tokens of m
// are left out of Tokens. An engine.Event.Err, or ctx ending first, is returned
// as the error.
func collect(ctx context.Context, m *llama.Model, events <-chan engine.Event) (*completionResult, error) {
	var res completionResult
	var sb strings.Builder
	for ev := range events {
		if ev.Err != nil {
			return nil, ev.Err
		}
		if ev.Progress != nil {
			continue
		}
		if ev.Done {
			res.Final = ev
			break
		}
		sb.WriteString(ev.Text)
		if m == nil || !m.IsEOG(ev.Token) {
			res.Tokens = append(res.Tokens, ev.Token)
		}
		if ev.Sampled != nil || len(ev.Probs) > 0 {
			res.Steps = append(res.Steps, step{Token: ev.Token, Text: ev.Text, Sampled: ev.Sampled, Probs: ev.Probs})
		}
	}
	res.Text = sb.String()
	if !res.Final.Done {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("the engine ended the task without a result")
	}
	return &res, nil
}
