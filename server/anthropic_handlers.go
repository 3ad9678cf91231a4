package server

import (
	"context"
	"net/http"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/anthropic"
	"github.com/x/llama/server/internal/wire"
)

// Anthropic's Messages API: POST /v1/messages and
// POST /v1/messages/count_tokens. The dialect (its wire types and the
// translation to the internal request and back) is package
// server/internal/anthropic; these handlers decode a body, run the
// translated request with the chat machinery and write the answer or
// stream; errors take Anthropic's shape (errors.go).

// anthPrepare decodes and converts a Messages request and gets its
// instance. Unless it fails, release must be called.
func anthPrepare(s *Server, r *http.Request) (*anthropic.Request, *wire.Chat, *instance, func(), error) {
	var req anthropic.Request
	if err := decodeJSON(r, &req); err != nil {
		return nil, nil, nil, nil, err
	}
	creq, err := anthropic.ToChat(&req, s.mediaMarker)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	inst, release, err := s.instanceFor(r, req.Model)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return &req, creq, inst, release, nil
}

func handleAnthropicCountTokens(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req anthropic.Request
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
		if req.MaxTokens == nil {
			one := 1 // count_tokens takes no max_tokens
			req.MaxTokens = &one
		}
		creq, err := anthropic.ToChat(&req, s.mediaMarker)
		if err != nil {
			return err
		}
		inst, release, err := s.instanceFor(r, req.Model)
		if err != nil {
			return err
		}
		defer release()
		g, _, _, err := inst.startChat(creq)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(g.task.Prompt)})
		return nil
	}
}

func handleAnthropicMessages(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, creq, inst, release, err := anthPrepare(s, r)
		if err != nil {
			return err
		}
		defer release()
		arrived := inst.Engine.Expect()
		defer arrived()
		g, plan, co, err := inst.startChat(creq)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		events, err := s.runTask(ctx, inst, arrived, g.task)
		if err != nil {
			return err
		}
		id := wire.NewID("msg_")
		if req.Stream {
			streamAnthropic(ctx, w, plan, co.Model, id, events)
			return nil
		}
		res, msg, err := collectChat(ctx, inst, plan, events)
		if err != nil {
			return err
		}
		out := anthropic.NewResponse(id, co.Model, msg, res.Final)
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// streamAnthropic sends a message as Anthropic's stream (see
// anthropic.Stream).
func streamAnthropic(ctx context.Context, w http.ResponseWriter, plan *chatPlan, model, id string, events eventStream) {
	sse, _ := sseStart(ctx, w)
	st := anthropic.NewStream(id, model, func(name string, v any) bool { return sse.send(name, v) == nil })
	parser := plan.NewStream()
	for events.Next() {
		ev := events.Event()
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Progress != nil {
			continue
		}
		if !st.Start(ev) {
			return
		}
		if ev.Done {
			st.Finish(ev, parser.Finish(ev.Stop == engine.StopTypeLimit))
			return
		}
		if ev.Text == "" {
			continue
		}
		d := parser.Push(ev.Text)
		if !d.Empty() && !st.Delta(d) {
			return
		}
	}
}
