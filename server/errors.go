package server

// Errors. A handler returns an error when it fails before writing its
// response; the dialect of its route (routes.go) renders it: llama.cpp's
// and OpenAI's {"error":{"code","message","type"}}, Anthropic's
// {"type":"error","error":{"type","message"}}, or the unwrapped object of
// POST /tools. classify maps any error to a status and a type. Errors
// after a stream has started are sent in the stream (sseWriter.fail), in
// the same dialect's stream shape (dialect.streamed).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/ollama"
	"github.com/x/llama/server/internal/wire"
)

// Error types of llama.cpp's server, sent in the "type" field of an error.
const (
	errInvalidRequest  = "invalid_request_error"
	errAuthentication  = "authentication_error"
	errNotFound        = "not_found_error"
	errServer          = "server_error"
	errPermission      = "permission_error"
	errUnavailable     = "unavailable_error"
	errNotSupported    = "not_supported_error"
	errExceedContext   = "exceed_context_size_error"
	defaultMaxBodySize = 64 << 20
)

// errorStatus returns the HTTP status llama.cpp uses for an error type.
func errorStatus(errType string) int {
	switch errType {
	case errInvalidRequest, errExceedContext:
		return http.StatusBadRequest
	case errAuthentication:
		return http.StatusUnauthorized
	case errPermission:
		return http.StatusForbidden
	case errNotFound:
		return http.StatusNotFound
	case errNotSupported:
		return http.StatusNotImplemented
	case errUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorBody is the wire form of an error in the llama and OpenAI
// dialects: {"error":{...}}; clients and tests decode it.
type errorBody struct {
	Error errorDetail `json:"error"`
}

// errorDetail is the error object of llama-server: the object of
// errorBody, and the whole body of POST /tools' errors. Its fields are in
// the order of their names, as llama-server's JSON objects are.
type errorDetail struct {
	// Code is an HTTP status; 0 (left out) for the errors llama-server
	// sends without one.
	Code    int    `json:"code,omitempty"`
	Message string `json:"message"`
	// NCtx and NPromptTokens accompany exceed_context_size_error.
	NCtx          int    `json:"n_ctx,omitempty"`
	NPromptTokens int    `json:"n_prompt_tokens,omitempty"`
	Type          string `json:"type"`
}

// httpError is an error answered with a status and an error type.
type httpError struct {
	Status int
	Type   string
	Msg    string
	// NPromptTokens and NCtx are sent with exceed_context_size_error.
	NPromptTokens, NCtx int
	// NoCode leaves "code" out of the error object, as llama-server's
	// answers to a disabled feature and to a bad stream lookup do.
	NoCode bool
	// Err is the cause, if any.
	Err error
}

func (e *httpError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *httpError) Unwrap() error { return e.Err }

// apiError is an error of type errType with the status llama.cpp uses for
// it (see errorStatus).
func apiError(errType, format string, args ...any) *httpError {
	return &httpError{Status: errorStatus(errType), Type: errType, Msg: fmt.Sprintf(format, args...)}
}

// badRequest is a 400 invalid_request_error.
func badRequest(format string, args ...any) *httpError {
	return &httpError{Status: http.StatusBadRequest, Type: errInvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

// notSupported is a 501 not_supported_error.
func notSupported(format string, args ...any) *httpError {
	return apiError(errNotSupported, format, args...)
}

// unavailable is a 503 unavailable_error.
func unavailable(format string, args ...any) *httpError {
	return apiError(errUnavailable, format, args...)
}

// serverError is a 500 server_error.
func serverError(format string, args ...any) *httpError {
	return apiError(errServer, format, args...)
}

// errFileNotFound is llama-server's answer to an unknown path.
func errFileNotFound() *httpError { return apiError(errNotFound, "File Not Found") }

// errFeatureDisabled is llama-server's answer to a feature it was not
// started with: a 403 with no "code".
func errFeatureDisabled() *httpError {
	return &httpError{Status: http.StatusForbidden, Type: "feature_disabled", Msg: "this feature is disabled", NoCode: true}
}

// exceedContext is llama.cpp's error for a prompt that does not fit.
func exceedContext(nPrompt, nCtx int) *httpError {
	return &httpError{
		Status: http.StatusBadRequest, Type: errExceedContext,
		Msg:           fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", nPrompt, nCtx),
		NPromptTokens: nPrompt, NCtx: nCtx,
	}
}

// classify maps an error to its answer: an *httpError as it is, and the
// engine's and the library's errors by type: a prompt too long for the
// context a 400 exceed_context_size_error, a busy queue a 503, invalid
// input or a grammar error a 400, what the model or server cannot do a 501,
// a canceled request a 503, the rest a 500.
// A panic the engine recovered (in a drafter, a sampler, its own code) is
// a 500 whatever its value wraps: the fault is the server's.
func classify(err error) *httpError {
	var he *httpError
	var ce *engine.ContextSizeError
	var pe *llama.PanicError
	var we *wire.Error
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &we):
		// A mistake in the request, found while decoding or translating it.
		return badRequest("%s", we.Msg)
	case errors.As(err, &pe):
		return &httpError{Status: http.StatusInternalServerError, Type: errServer, Msg: err.Error(), Err: err}
	case errors.As(err, &ce):
		return exceedContext(ce.PromptTokens, ce.CtxSize)
	case errors.Is(err, engine.ErrQueueFull):
		return &httpError{Status: http.StatusServiceUnavailable, Type: errUnavailable, Msg: err.Error(), Err: err}
	case errors.Is(err, llama.ErrRPC):
		// A worker of the model's RPC devices is unreachable or failed.
		return &httpError{Status: http.StatusServiceUnavailable, Type: errUnavailable, Msg: err.Error(), Err: err}
	case errors.Is(err, llama.ErrInvalid), errors.Is(err, llama.ErrGrammar):
		return &httpError{Status: http.StatusBadRequest, Type: errInvalidRequest, Msg: err.Error(), Err: err}
	case errors.Is(err, llama.ErrUnsupported):
		// What this model or server cannot do (a completion on a reranking
		// server), as llama-server's not_supported_error.
		return &httpError{Status: errorStatus(errNotSupported), Type: errNotSupported, Msg: err.Error(), Err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &httpError{Status: http.StatusServiceUnavailable, Type: errUnavailable, Msg: "request canceled: " + err.Error(), Err: err}
	}
	return &httpError{Status: http.StatusInternalServerError, Type: errServer, Msg: err.Error(), Err: err}
}

// dialect is the error shape of an API; each route names its own
// (routes.go), and its errors, before a response and in a stream, are
// rendered by that dialect alone.
type dialect uint8

const (
	// llamaErrors is llama-server's native API's shape:
	// {"error":{"code":status,"message":...,"type":...}} with the
	// error's extra fields; in a stream, a data event of the same.
	llamaErrors dialect = iota
	// openAIErrors is OpenAI's API's shape, which llama-server sends as
	// its own: the same objects as llamaErrors.
	openAIErrors
	// responsesErrors is the Responses API's: llamaErrors' body before
	// the response; in a stream, an "error" event
	// {"type":"error","sequence_number":n,"error":{...}}.
	responsesErrors
	// anthropicErrors is Anthropic's shape:
	// {"type":"error","error":{"type":...,"message":...}}, with
	// Anthropic's type names; in a stream, an "error" event of the same.
	anthropicErrors
	// toolErrors is the shape of POST /tools, which llama-server sends
	// unwrapped: {"code":...,"message":...,"type":...}, the code being
	// the HTTP status, always (llama-server answers an unknown tool with
	// a 404 whose code is 400; ours says 404 in both).
	toolErrors
	// ollamaErrors is Ollama's shape: {"error": message}; in a stream
	// of JSON lines, a last line of the same.
	ollamaErrors
)

// detail is he's error object with code as its "code".
func (he *httpError) detail(code int) errorDetail {
	if he.NoCode {
		code = 0
	}
	return errorDetail{Code: code, Message: he.Msg, Type: he.Type, NPromptTokens: he.NPromptTokens, NCtx: he.NCtx}
}

// keyRefusal is the dialect a refused API key is answered in on d's
// routes: llama-server's on every route it has (it answers them all in its
// own shape), Ollama's on Ollama's, whose clients read only theirs.
func (d dialect) keyRefusal() dialect {
	if d == ollamaErrors {
		return ollamaErrors
	}
	return llamaErrors
}

// render returns err's HTTP status and its body in d's shape.
func (d dialect) render(err error) (int, any) {
	he := classify(err)
	switch d {
	case anthropicErrors:
		return he.Status, anthErrorBody{Type: "error", Error: anthErrorInfo{Type: anthErrorType(he.Type, he.Status), Message: he.Msg}}
	case toolErrors:
		if !he.NoCode {
			return he.Status, he.detail(he.Status)
		}
	case ollamaErrors:
		return he.Status, ollama.ErrorLine{Error: he.Msg}
	}
	return he.Status, errorBody{he.detail(he.Status)}
}

// streamed returns err as the event a stream of d sends: its "event:"
// name ("" for none) and its data; seq is the number of events sent
// before it.
func (d dialect) streamed(err error, seq int) (event string, data any) {
	switch d {
	case anthropicErrors:
		_, body := d.render(err)
		return "error", body
	case responsesErrors:
		he := classify(err)
		return "error", respErrorEvent{Type: "error", SequenceNumber: seq, Error: he.detail(he.Status)}
	}
	_, body := llamaErrors.render(err)
	return "", body
}

// respErrorEvent is the Responses API's error event.
type respErrorEvent struct {
	Type           string      `json:"type"` // always "error"
	SequenceNumber int         `json:"sequence_number"`
	Error          errorDetail `json:"error"`
}

// anthErrorBody is the wire form of an error in Anthropic's shape.
type anthErrorBody struct {
	Type  string        `json:"type"` // always "error"
	Error anthErrorInfo `json:"error"`
}

// anthErrorInfo is the object of anthErrorBody.
type anthErrorInfo struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthErrorType maps llama.cpp's error types to Anthropic's.
func anthErrorType(t string, status int) string {
	switch t {
	case errInvalidRequest, errExceedContext, errNotSupported:
		return "invalid_request_error"
	case errAuthentication:
		return "authentication_error"
	case errPermission:
		return "permission_error"
	case errNotFound:
		return "not_found_error"
	case errUnavailable:
		return "overloaded_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// write answers err in d's shape.
func (d dialect) write(w http.ResponseWriter, err error) {
	status, body := d.render(err)
	writeJSON(w, status, body)
}

// handlerFunc is an endpoint's handler. It returns an error when it fails
// before writing its response, which its route's dialect renders; once
// the response has started (a stream), it reports errors in the response
// itself and returns nil.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// serve turns h into an http.Handler that answers h's error in d's
// shape; the streams h starts (sseStart) send theirs in d's shape too.
func (d dialect) serve(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), dialectKey{}, d))
		if err := h(w, r); err != nil && !errors.Is(err, errStreamed) {
			d.write(w, err)
		}
	})
}

// dialectKey is the context key of the dialect of the route serving a
// request.
type dialectKey struct{}

// dialectOf returns the dialect of the route serving ctx's request
// (llamaErrors outside of a route).
func dialectOf(ctx context.Context) dialect {
	d, _ := ctx.Value(dialectKey{}).(dialect)
	return d
}

// marshalJSON is json.Marshal without its HTML escapes: "<", ">" and "&"
// go out as written, as llama-server writes them (a chat template in
// /props, a prompt from /apply-template, "<tool_call>" in an answer read
// raw). Answers go out with "X-Content-Type-Options: nosniff" (jsonHeaders),
// so that no browser reads one as a page.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := newJSONEncoder(&b)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// newJSONEncoder is a json.Encoder without HTML escapes (marshalJSON).
func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// jsonHeaders sets an answer's content type, and nosniff beside it.
func jsonHeaders(h http.Header, contentType string) {
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	if p, ok := w.(*prediction); ok && p.setJSON(v) == nil {
		return // a GCP prediction's instance (gcp.go)
	}
	b, err := marshalJSON(v)
	if err != nil {
		status = http.StatusInternalServerError
		var body any
		status, body = llamaErrors.render(serverError("encode response: %v", err))
		b, _ = marshalJSON(body)
	}
	h := w.Header()
	jsonHeaders(h, "application/json; charset=utf-8")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// firstBodyBuffer is the size of the first buffer readAllSized reads a
// body into.
const firstBodyBuffer = 16 << 10

// readAllSized is io.ReadAll for a body announced as n bytes (n <= 0:
// unknown). The buffer grows as data arrives, never ahead of it (an
// announced size costs nothing until the bytes come), doubling up to the
// announced size plus one, so that an honest large body ends in a
// buffer of its own size, and past it (a body longer than announced)
// doubling again.
func readAllSized(body io.Reader, n int64) ([]byte, error) {
	size := int64(firstBodyBuffer)
	if n > 0 && n < size {
		size = n + 1 // +1: EOF is seen without growing
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			next := 2 * int64(cap(buf))
			if n > 0 && int64(cap(buf)) <= n && next > n+1 {
				next = n + 1
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		m, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// decodeJSON reads the request body (bounded by the server's body limit)
// as one JSON value into v. It fails with a 400 (413 when the body is too
// large).
func decodeJSON(r *http.Request, v any) error {
	if r.Body == nil {
		return badRequest("request body is empty")
	}
	body := r.Body
	if _, bounded := body.(*maxBytesMarker); !bounded {
		body = http.MaxBytesReader(nil, body, defaultMaxBodySize)
	}
	data, err := readAllSized(body, r.ContentLength)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &httpError{Status: http.StatusRequestEntityTooLarge, Type: errInvalidRequest,
				Msg: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit)}
		}
		var he *httpError
		if errors.As(err, &he) {
			return he // the body budget is full (maxBytesMarker)
		}
		return badRequest("read request body: %v", err)
	}
	if len(data) == 0 {
		return badRequest("request body is empty")
	}
	sh, err := checkJSONShape(data)
	if err != nil {
		return err
	}
	if m, ok := r.Body.(*maxBytesMarker); ok {
		if err := m.charge(decodedCost(sh), sh); err != nil {
			return err
		}
	}
	if string(bytes.TrimSpace(data)) == "null" {
		return badRequest("request body must not be null")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return badRequest("invalid JSON body: %v", err)
	}
	return nil
}
