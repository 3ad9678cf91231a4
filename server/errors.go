package server

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

// errorBody is the wire form of an error, OpenAI's shape as llama.cpp sends it.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
	// NPromptTokens and NCtx accompany exceed_context_size_error.
	NPromptTokens int `json:"n_prompt_tokens,omitempty"`
	NCtx          int `json:"n_ctx,omitempty"`
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{errorDetail{Code: status, Message: "encode response: " + err.Error(), Type: errServer}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes an error in llama.cpp's shape:
// {"error":{"code":status,"message":msg,"type":errType}}. A status of 0
// takes the one llama.cpp uses for errType.
func writeError(w http.ResponseWriter, status int, errType string, msg string) {
	if errType == "" {
		errType = errServer
	}
	if status == 0 {
		status = errorStatus(errType)
	}
	writeJSON(w, status, errorBody{errorDetail{Code: status, Message: msg, Type: errType}})
}

// decodeJSON reads the request body (bounded by the server's body limit)
// as one JSON value into v. On failure it writes a 400 (413 when the body
// is too large) and returns false.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Body == nil {
		writeError(w, http.StatusBadRequest, errInvalidRequest, "request body is empty")
		return false
	}
	body := r.Body
	if _, bounded := body.(*maxBytesMarker); !bounded {
		body = http.MaxBytesReader(w, body, defaultMaxBodySize)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, errInvalidRequest,
				fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, errInvalidRequest, "read request body: "+err.Error())
		return false
	}
	if len(data) == 0 {
		writeError(w, http.StatusBadRequest, errInvalidRequest, "request body is empty")
		return false
	}
	if err := checkJSONDepth(data); err != nil {
		writeHTTPError(w, err)
		return false
	}
	if string(bytes.TrimSpace(data)) == "null" {
		writeError(w, http.StatusBadRequest, errInvalidRequest, "request body must not be null")
		return false
	}
	if err := json.Unmarshal(data, v); err != nil {
		writeError(w, http.StatusBadRequest, errInvalidRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// writeEngineError maps an engine error to a response by its type (see
// errorObject): a busy queue is a 503, invalid input, a grammar error or a
// prompt too long for the context a 400, the rest a 500.
func writeEngineError(w http.ResponseWriter, err error) {
	writeHTTPError(w, err)
}

// httpError is an error answered with a status and an error type.
type httpError struct {
	Status int
	Type   string
	Msg    string
	// Extra fields of the error object (n_prompt_tokens and n_ctx for
	// exceed_context_size_error).
	Extra map[string]any
	// Err is the cause, if any.
	Err error
}

func (e *httpError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *httpError) Unwrap() error { return e.Err }

// badRequest is a 400 invalid_request_error.
func badRequest(format string, args ...any) *httpError {
	return &httpError{Status: http.StatusBadRequest, Type: "invalid_request_error", Msg: fmt.Sprintf(format, args...)}
}

// errorObject is the JSON body of an error answer.
func errorObject(err error) (int, map[string]any) {
	var he *httpError
	var ce *engine.ContextSizeError
	switch {
	case errors.As(err, &he):
	case errors.As(err, &ce):
		he = exceedContext(ce.PromptTokens, ce.CtxSize)
	case errors.Is(err, engine.ErrBusy):
		he = &httpError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Msg: err.Error()}
	case errors.Is(err, llama.ErrInvalid), errors.Is(err, llama.ErrGrammar):
		he = badRequest("%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		he = &httpError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Msg: "request canceled: " + err.Error()}
	default:
		he = &httpError{Status: http.StatusInternalServerError, Type: "server_error", Msg: err.Error()}
	}
	obj := map[string]any{"code": he.Status, "message": he.Msg, "type": he.Type}
	for k, v := range he.Extra {
		obj[k] = v
	}
	return he.Status, map[string]any{"error": obj}
}

// writeHTTPError answers with err's status and error object.
func writeHTTPError(w http.ResponseWriter, err error) {
	status, body := errorObject(err)
	writeJSON(w, status, body)
}

// exceedContext is llama.cpp's error for a prompt that does not fit.
func exceedContext(nPrompt, nCtx int) *httpError {
	return &httpError{
		Status: http.StatusBadRequest, Type: "exceed_context_size_error",
		Msg:   fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", nPrompt, nCtx),
		Extra: map[string]any{"n_prompt_tokens": nPrompt, "n_ctx": nCtx},
	}
}
