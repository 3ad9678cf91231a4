package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// Each dialect renders the same errors in its own shape, byte for byte as
// clients of llama-server see them.
func TestDialectRender(t *testing.T) {
	ctxErr := &engine.ContextSizeError{PromptTokens: 9, CtxSize: 8}
	cases := []struct {
		name   string
		d      dialect
		err    error
		status int
		body   string
	}{
		{"llama bad request", llamaErrors, badRequest("bad %d", 1), 400,
			`{"error":{"code":400,"message":"bad 1","type":"invalid_request_error"}}`},
		{"llama context", llamaErrors, fmt.Errorf("run: %w", ctxErr), 400,
			`{"error":{"code":400,"message":"request (9 tokens) exceeds the available context size (8 tokens), try increasing it","n_ctx":8,"n_prompt_tokens":9,"type":"exceed_context_size_error"}}`},
		{"llama busy", llamaErrors, engine.ErrQueueFull, 503,
			`{"error":{"code":503,"message":"llama: engine: too many requests queued","type":"unavailable_error"}}`},
		{"llama invalid", llamaErrors, fmt.Errorf("x: %w", llama.ErrInvalid), 400,
			`{"error":{"code":400,"message":"x: ` + llama.ErrInvalid.Error() + `","type":"invalid_request_error"}}`},
		{"llama unsupported", llamaErrors, fmt.Errorf("engine: this server is for embeddings, not completions: %w", llama.ErrUnsupported), 501,
			`{"error":{"code":501,"message":"engine: this server is for embeddings, not completions: ` + llama.ErrUnsupported.Error() + `","type":"not_supported_error"}}`},
		{"llama canceled", llamaErrors, context.Canceled, 503,
			`{"error":{"code":503,"message":"request canceled: context canceled","type":"unavailable_error"}}`},
		{"llama other", llamaErrors, errors.New("boom"), 500,
			`{"error":{"code":500,"message":"boom","type":"server_error"}}`},
		{"llama disabled", llamaErrors, errFeatureDisabled(), 403,
			`{"error":{"message":"this feature is disabled","type":"feature_disabled"}}`},
		{"openai bad request", openAIErrors, badRequest("bad %d", 1), 400,
			`{"error":{"code":400,"message":"bad 1","type":"invalid_request_error"}}`},
		{"responses busy", responsesErrors, engine.ErrQueueFull, 503,
			`{"error":{"code":503,"message":"llama: engine: too many requests queued","type":"unavailable_error"}}`},
		{"anthropic context", anthropicErrors, ctxErr, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"request (9 tokens) exceeds the available context size (8 tokens), try increasing it"}}`},
		{"anthropic busy", anthropicErrors, engine.ErrQueueFull, 503,
			`{"type":"error","error":{"type":"overloaded_error","message":"llama: engine: too many requests queued"}}`},
		{"anthropic other", anthropicErrors, errors.New("boom"), 500,
			`{"type":"error","error":{"type":"api_error","message":"boom"}}`},
		{"tools not found", toolErrors, &httpError{Status: 404, Type: errInvalidRequest, Msg: "unknown tool"}, 404,
			`{"code":404,"message":"unknown tool","type":"invalid_request_error"}`},
		{"tools disabled", toolErrors, errFeatureDisabled(), 403,
			`{"error":{"message":"this feature is disabled","type":"feature_disabled"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.d.serve(func(http.ResponseWriter, *http.Request) error { return c.err })
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			assert.Equal(t, c.status, rec.Code)
			assert.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"))
			assert.Equal(t, c.body+"\n", rec.Body.String())
		})
	}
}

// A handler that answers itself and returns nil gets nothing added.
// An error in a stream is sent in the stream's dialect, which the route
// serving the request names (dialect.serve).
func TestDialectStreamed(t *testing.T) {
	cases := []struct {
		d    dialect
		want string
	}{
		{llamaErrors, `data: {"error":{"code":503,"message":"llama: engine: too many requests queued","type":"unavailable_error"}}` + "\n\n"},
		{openAIErrors, `data: {"error":{"code":503,"message":"llama: engine: too many requests queued","type":"unavailable_error"}}` + "\n\n"},
		{responsesErrors, "event: error\n" + `data: {"type":"error","sequence_number":1,"error":{"code":503,"message":"llama: engine: too many requests queued","type":"unavailable_error"}}` + "\n\n"},
		{anthropicErrors, "event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"llama: engine: too many requests queued"}}` + "\n\n"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.d), func(t *testing.T) {
			h := c.d.serve(func(w http.ResponseWriter, r *http.Request) error {
				sse, err := sseStart(r.Context(), w)
				require.NoError(t, err)
				require.NoError(t, sse.send("ping", "{}"))
				sse.fail(engine.ErrQueueFull)
				return nil
			})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
			assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
			assert.Equal(t, "event: ping\ndata: {}\n\n"+c.want, rec.Body.String())
		})
	}
}

func TestDialectServeNil(t *testing.T) {
	h := llamaErrors.serve(func(w http.ResponseWriter, _ *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return nil
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, `{"ok":true}`+"\n", rec.Body.String())
}
