package server

// Server-Sent Events. sseWriter is the one writer of every streaming
// response: the generation streams of each API, the events of /models/sse,
// the output of a streaming tool and the replay of a resumable stream.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// sseWriter writes a Server-Sent Events response. Its methods may be
// called from several goroutines.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	d  dialect // renders the errors sent in the stream

	mu     sync.Mutex
	sent   int          // events sent (or tried)
	buf    bytes.Buffer // the event being written, kept between events
	enc    *json.Encoder
	last   time.Time     // the last write (pings)
	closed bool          // the handler returned: no more writes
	done   chan struct{} // closed with closed, ends the pings
}

// sseScope holds the streams one request's handler starts, so that their
// pings stop when it returns (sseScoped).
type sseScope struct {
	every time.Duration // a stream silent this long gets a ping; 0: none

	mu      sync.Mutex
	writers []*sseWriter
}

type sseScopeKey struct{}

// ssePing is Options.SSEPing with its default: the silence after which a
// stream gets a ping (0: none).
func (s *Server) ssePing() time.Duration {
	switch p := s.opts.SSEPing; {
	case p < 0:
		return 0
	case p == 0:
		return 30 * time.Second
	default:
		return p
	}
}

// sseScoped gives h's requests a scope for their streams' pings (every:
// Options.SSEPing), and ends the pings when h returns.
func sseScoped(every time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := &sseScope{every: every}
		defer sc.close()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sseScopeKey{}, sc)))
	})
}

func (sc *sseScope) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, s := range sc.writers {
		s.mu.Lock()
		if !s.closed {
			s.closed = true
			close(s.done)
		}
		s.mu.Unlock()
	}
	sc.writers = nil
}

// ping sends an SSE comment whenever the stream has been silent for
// every, until the scope closes. A ping before the first event sends the
// headers with it (sseOpen's stream).
func (s *sseWriter) ping(every time.Duration) {
	t := time.NewTicker(max(every/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			s.mu.Lock()
			if !s.closed && now.Sub(s.last) >= every {
				_ = s.writeLocked([]byte(":\n\n"))
			}
			s.mu.Unlock()
		}
	}
}

// sseStart sends the event-stream headers and the status, 200. The
// errors sent in the stream are rendered in the dialect of the route that
// serves ctx's request (routes.go). The error is the one of flushing the
// headers, when the connection cannot flush: nothing useful can be sent
// then.
func sseStart(ctx context.Context, w http.ResponseWriter) (*sseWriter, error) {
	s := sseOpen(ctx, w)
	s.mu.Lock() // its pings write too
	defer s.mu.Unlock()
	return s, s.rc.Flush()
}

// sseOpen is sseStart without the flush: the headers go out with the
// first event, in one write. It is for a stream whose first event is at
// hand (a generation's, once peekEvents has it): the client then gets its
// first token without waiting for a write of the headers alone. A
// connection that cannot flush fails the first send.
func sseOpen(ctx context.Context, w http.ResponseWriter) *sseWriter {
	sc, _ := ctx.Value(sseScopeKey{}).(*sseScope)
	if sc != nil {
		sc.mu.Lock()
		for _, s := range sc.writers {
			if s.w == w {
				sc.mu.Unlock()
				return s // opened already (startTasks, past the ping interval)
			}
		}
		sc.mu.Unlock()
	}
	h := w.Header()
	jsonHeaders(h, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), d: dialectOf(ctx), last: time.Now(), done: make(chan struct{})}
	s.enc = newJSONEncoder(&s.buf)
	if _, gcp := w.(*prediction); !gcp && sc != nil { // a prediction collects its events (gcp.go)
		sc.mu.Lock()
		sc.writers = append(sc.writers, s)
		sc.mu.Unlock()
		if sc.every > 0 {
			go s.ping(sc.every)
		}
	}
	return s
}

// sseEvery is the ping interval of ctx's request's streams (0: none).
func sseEvery(ctx context.Context) time.Duration {
	if sc, ok := ctx.Value(sseScopeKey{}).(*sseScope); ok {
		return sc.every
	}
	return 0
}

// streamTo is w for a streaming response, nil for another (startTasks).
func streamTo(w http.ResponseWriter, stream bool) http.ResponseWriter {
	if !stream {
		return nil
	}
	return w
}

// errStreamed is a handler's error that was sent in the stream the
// handler had started: dialect.serve writes nothing more.
var errStreamed = errors.New("server: the error was sent in the stream")

// comment sends a comment line (a ping), flushing the headers with it
// when it is the stream's first write.
func (s *sseWriter) comment() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.writeLocked([]byte(":\n\n"))
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
	err := s.sendLocked(event, v)
	var je encodeError
	if errors.As(err, &je) {
		// A value JSON cannot hold (a NaN: a bug) is not a gone client:
		// the stream ends with its dialect's error event, not silently.
		ev, body := s.d.streamed(fmt.Errorf("encode event: %w", je.err), s.sent)
		_ = s.sendLocked(ev, body)
	}
	return err
}

// encodeError is an event's value that JSON cannot encode.
type encodeError struct{ err error }

func (e encodeError) Error() string { return e.err.Error() }

func (s *sseWriter) sendLocked(event string, v any) error {
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
		return encodeError{err}
	}
	b.WriteByte('\n')
	s.sent++
	err := s.writeLocked(b.Bytes())
	if b.Cap() > 64<<10 {
		*b = bytes.Buffer{} // a large event's buffer is not kept
		s.enc = newJSONEncoder(b)
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
	if s.closed {
		return net.ErrClosed // the handler returned: nothing may write
	}
	s.last = time.Now()
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
