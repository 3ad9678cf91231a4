package server

// Server-Sent Events. sseWriter is the one writer of every streaming
// response: the generation streams of each API, the events of /models/sse,
// the output of a streaming tool and the replay of a resumable stream.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
)

// sseWriter writes a Server-Sent Events response. Its methods may be
// called from several goroutines.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	d  dialect // renders the errors sent in the stream

	mu   sync.Mutex
	sent int          // events sent (or tried)
	buf  bytes.Buffer // the event being written, kept between events
	enc  *json.Encoder
}

// sseStart sends the event-stream headers and the status, 200. The
// errors sent in the stream are rendered in the dialect of the route that
// serves ctx's request (routes.go). The error is the one of flushing the
// headers, when the connection cannot flush: nothing useful can be sent
// then.
func sseStart(ctx context.Context, w http.ResponseWriter) (*sseWriter, error) {
	s := sseOpen(ctx, w)
	return s, s.rc.Flush()
}

// sseOpen is sseStart without the flush: the headers go out with the
// first event, in one write. It is for a stream whose first event is at
// hand (a generation's, once peekEvents has it): the client then gets its
// first token without waiting for a write of the headers alone. A
// connection that cannot flush fails the first send.
func sseOpen(ctx context.Context, w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), d: dialectOf(ctx)}
	s.enc = json.NewEncoder(&s.buf)
	return s
}

// data sends one event of data only: v as JSON, a string as it is.
func (s *sseWriter) data(v any) error { return s.send("", v) }

// send sends one event: an "event: name" line when event is not empty,
// then "data: " and v as JSON (a string as it is), and flushes it.
//
// The event is built in a buffer the writer keeps (JSON encoded straight
// into it), so that a stream of many small events allocates nothing per
// event but what encoding v itself needs.
func (s *sseWriter) send(event string, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.buf
	b.Reset()
	if event != "" {
		b.WriteString("event: ")
		b.WriteString(event)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	if str, ok := v.(string); ok {
		b.WriteString(str)
		b.WriteByte('\n')
	} else if err := s.enc.Encode(v); err != nil { // json.Marshal's text and a newline
		return err
	}
	b.WriteByte('\n')
	s.sent++
	err := s.writeLocked(b.Bytes())
	if b.Cap() > 64<<10 {
		*b = bytes.Buffer{} // a large event's buffer is not kept
		s.enc = json.NewEncoder(b)
	}
	return err
}

// raw sends bytes that are already events (a recorded stream's).
func (s *sseWriter) raw(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(p)
}

func (s *sseWriter) writeLocked(p []byte) error {
	if _, err := s.w.Write(p); err != nil {
		return err
	}
	return s.rc.Flush()
}

// seq returns the number of events sent so far: the next event's
// sequence number, where the API numbers its events.
func (s *sseWriter) seq() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// fail sends err in the stream, in the shape of the stream's dialect
// (dialect.streamed).
func (s *sseWriter) fail(err error) {
	event, body := s.d.streamed(err, s.seq())
	_ = s.send(event, body)
}
