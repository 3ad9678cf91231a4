package server

import (
	"context"
	"net/http"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/openai"
	"github.com/x/llama/server/internal/responses"
	"github.com/x/llama/server/internal/wire"
)

// OpenAI's Responses API: POST /v1/responses and
// POST /v1/responses/input_tokens. The dialect (its wire types, the
// translation of its own fields to the internal request and of the answer
// to output items and stream events) is package server/internal/responses;
// a body's other fields are chat completion fields, translated by the
// OpenAI chat dialect (openai.ToChat) as llama.cpp converts a Responses request
// to a chat completion one. These handlers decode, run the chat and write.

// respBody is a Responses request body: its own fields and chat
// completion fields. The chat body sits one level deeper (respChatFields),
// so that the Responses fields of the same name (tools, messages) shadow
// its own, for wire.Decode as for Go's field selection.
type respBody struct {
	responses.Request
	respChatFields
}

// respChatFields are the chat completion fields of a Responses body.
type respChatFields struct{ openai.ChatBody }

// respToChat translates the Responses fields of b (see
// responses.Request.ToChat); openai.ToChat translates the others.
func (b *respBody) respToChat(marker string) (*wire.Chat, error) {
	return b.ToChat(marker, responses.ChatFields{ToolChoice: &b.ToolChoice, ReasoningEffort: &b.ReasoningEffort, Gen: &b.Gen})
}

// respPrepare reads a Responses body as a chat request. Unless it fails,
// release must be called.
func respPrepare(s *Server, r *http.Request) (*genRequest, *chatPlan, chatOptions, *instance, func(), error) {
	var b respBody
	if err := decodeBody(r, &b); err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	model, err := b.ModelName()
	if err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	req, err := b.respToChat(s.mediaMarker)
	if err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	inst, release, err := s.instanceFor(r, model)
	if err != nil {
		return nil, nil, chatOptions{}, nil, nil, err
	}
	g, plan, co, err := func() (*genRequest, *chatPlan, chatOptions, error) {
		if err := oaiToChat(inst, &b.ChatBody, req); err != nil {
			return nil, nil, chatOptions{}, err
		}
		return inst.startChat(req)
	}()
	if err != nil {
		release()
		return nil, nil, chatOptions{}, nil, nil, err
	}
	return g, plan, co, inst, release, nil
}

func handleResponsesInputTokens(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		g, _, _, _, release, err := respPrepare(s, r)
		if err != nil {
			return err
		}
		defer release()
		writeJSON(w, http.StatusOK, inputTokens{Object: "response.input_tokens", InputTokens: len(g.task.Prompt)})
		return nil
	}
}

func handleResponses(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		g, plan, co, inst, release, err := respPrepare(s, r)
		if err != nil {
			return err
		}
		defer release()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		events, err := s.runTask(ctx, inst, nil, g.task)
		if err != nil {
			return err
		}
		base := responses.NewObject(co.Model)
		if g.opt.Stream {
			streamResponses(ctx, w, plan, base, events, g.opt.TimingsPerToken)
			return nil
		}
		res, msg, err := collectChat(ctx, inst, plan, events)
		if err != nil {
			return err
		}
		out := responses.Complete(base, responses.Items(msg), res.Final)
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// streamResponses sends the Responses event stream (see
// responses.Stream), with timings on each token's deltas when
// timingsPerToken.
func streamResponses(ctx context.Context, w http.ResponseWriter, plan *chatPlan, base responses.Object, events eventStream, timingsPerToken bool) {
	sse, _ := sseStart(ctx, w)
	var tokenTimings *wire.Timings // timings_per_token: set on a token's text deltas
	st := responses.NewStream(base, func(typ string, ev responses.Event) bool {
		if tokenTimings != nil && (typ == "response.output_text.delta" || typ == "response.reasoning_text.delta" || typ == "response.function_call_arguments.delta") {
			ev.Timings = tokenTimings
		}
		ev.Type, ev.SequenceNumber = typ, sse.seq()
		return sse.send(typ, ev) == nil
	})
	if !st.Begin() {
		return
	}
	parser := plan.NewStream()
	for events.Next() {
		ev := events.Event()
		if ev.Err != nil {
			sse.fail(ev.Err)
			return
		}
		if ev.Progress != nil {
			// llama-server's return_progress: in_progress events with
			// prompt_progress.
			if !st.Progress(wire.NewProgress(ev.Progress)) {
				return
			}
			continue
		}
		if ev.Done {
			tokenTimings = nil
			st.Finish(parser.Finish(ev.Stop == engine.StopTypeLimit), ev, wire.NewTimings(ev.Timings))
			return
		}
		if ev.Text == "" {
			continue
		}
		if timingsPerToken {
			tokenTimings = wire.NewTimings(ev.Timings)
		}
		if d := parser.Push(ev.Text); !d.Empty() && !st.Delta(d) {
			return
		}
	}
}
