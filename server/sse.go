package server

// Server-Sent Events. sseWriter sends the generation streams ("data:"
// lines); Server.sse sends the events of /models/sse, with an "event:"
// line when named.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// sseWriter writes Server-Sent Events.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// sseStart sends the event-stream headers.
func sseStart(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// data sends one "data:" event with v as JSON (a string is sent as is).
func (s *sseWriter) data(v any) error { return s.event("data", v) }

// event sends "field: payload".
func (s *sseWriter) event(field string, v any) error {
	var payload []byte
	if str, ok := v.(string); ok {
		payload = []byte(str)
	} else {
		var err error
		payload, err = json.Marshal(v)
		if err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "%s: %s\n\n", field, payload); err != nil {
		return err
	}
	return s.rc.Flush()
}

// sendError sends an error in a stream the way llama.cpp does: a data
// event holding {"error": {...}}.
func (s *sseWriter) sendError(err error) {
	_, body := llamaErrors.render(err)
	_ = s.data(body)
}

// sse starts a server-sent events response. send writes one event: an
// "event: name" line when event is not empty, then "data: JSON" and a
// blank line, and flushes it. ok is false (and nothing useful can be sent)
// when the connection cannot flush.
func (s *Server) sse(w http.ResponseWriter) (send func(event string, data any) error, ok bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, false
	}
	var mu sync.Mutex
	send = func(event string, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		buf := make([]byte, 0, len(b)+len(event)+16)
		if event != "" {
			buf = append(buf, "event: "...)
			buf = append(buf, event...)
			buf = append(buf, '\n')
		}
		buf = append(buf, "data: "...)
		buf = append(buf, b...)
		buf = append(buf, "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return rc.Flush()
	}
	return send, true
}
