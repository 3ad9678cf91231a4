package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
