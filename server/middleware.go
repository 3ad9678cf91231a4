package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/x/llama/server/internal/wire"
)

// Request bodies. Every body a handler reads is a *maxBytesMarker
// (limitBody): it is bounded to the body limit, its bytes count against
// a server-wide budget of body bytes held by the requests in flight
// (bodyBudget), and it must keep arriving: each read waits at most the
// body read timeout for data. An error answer (status 400 and up) sent
// before the body was read to its end waits at most unreadBodyGrace for
// the rest, then closes the connection (closeUnread): a client that
// announces a body and sends it slowly, or not at all, would otherwise
// hold its connection until the server's read timeout, whatever the
// answer (a 401 included).

// Defaults of the body limits (see Options).
const (
	// defaultBodyReadTimeout is the longest wait for a request body's next
	// bytes.
	defaultBodyReadTimeout = 60 * time.Second
	// defaultWriteTimeout is the longest wait for a client to take a
	// response's next bytes.
	defaultWriteTimeout = 60 * time.Second
	// minBodyBudget is the smallest default budget of body bytes in
	// flight, and bodyBudgetBodies the number of largest bodies the
	// default budget holds.
	minBodyBudget    = 256 << 20
	bodyBudgetBodies = 4
	// unreadBodyGrace is how long the rest of a body left unread by an
	// error answer may take to arrive before the connection is closed.
	unreadBodyGrace = time.Second
	// bodyBudgetWait is how long a body waits for room in a full budget
	// before its request is a 503.
	bodyBudgetWait = time.Second
)

// bodyBudget bounds the request body bytes held by the requests in
// flight across the server. Bytes are counted as they arrive and given
// back when their request ends. The zero value has no bound.
type bodyBudget struct {
	limit int64 // <= 0: no bound

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed and replaced when bytes are given back
}

// acquire counts n more bytes, waiting up to wait (and while ctx lasts)
// for room; it reports whether it could.
func (b *bodyBudget) acquire(ctx context.Context, n int64, wait time.Duration) bool {
	if b == nil || b.limit <= 0 {
		return true
	}
	var timer <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return true
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if timer == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-freed:
		case <-timer:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// release gives n bytes back.
func (b *bodyBudget) release(n int64) {
	if b == nil || b.limit <= 0 || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// inUse returns the bytes counted now.
func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// bodyBudgetBytes is the budget Options ask for: BodyBytesInFlight, or by
// default room for bodyBudgetBodies of the largest bodies (at least
// minBodyBudget); never less than one largest body.
func bodyBudgetBytes(o Options) int64 {
	maxBody := o.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = defaultMaxBodySize
	}
	switch n := o.BodyBytesInFlight; {
	case n < 0:
		return 0
	case n == 0:
		return max(bodyBudgetBodies*maxBody, minBodyBudget)
	default:
		return max(n, maxBody+1)
	}
}

// maxBytesMarker is a request body bounded by limitBody (so that
// decodeJSON does not bound it again), counted against the server's
// body budget, and read under the body read timeout.
type maxBytesMarker struct {
	io.ReadCloser // http.MaxBytesReader of the body
	ctx           context.Context
	budget        *bodyBudget
	rc            *http.ResponseController
	idle          time.Duration // <= 0: no read timeout
	length        int64         // the announced length (-1: unknown)

	held atomic.Int64 // bytes counted against budget
	read atomic.Int64 // bytes read
	eof  atomic.Bool
}

// errBodyBudget is the answer to a body that found the budget full.
func errBodyBudget(limit int64) *httpError {
	return unavailable("the server is receiving too many request bodies at once (at most %d bytes in flight); retry later", limit)
}

func (m *maxBytesMarker) Read(p []byte) (int, error) {
	if m.idle > 0 && m.rc != nil {
		_ = m.rc.SetReadDeadline(time.Now().Add(m.idle))
	}
	n, err := m.ReadCloser.Read(p)
	if n > 0 && m.budget != nil {
		if !m.budget.acquire(m.ctx, int64(n), bodyBudgetWait) {
			return 0, errBodyBudget(m.budget.limit)
		}
		m.held.Add(int64(n))
	}
	read := m.read.Add(int64(n))
	if err == io.EOF {
		m.eof.Store(true)
	}
	if err == io.EOF || (m.length >= 0 && read >= m.length) {
		if m.idle > 0 && m.rc != nil {
			// The body is in: the connection's reads (net/http's
			// watch for a client going away) have no deadline left.
			_ = m.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

// charge counts n more bytes against the budget for the body, what
// decoding it (of shape sh) will build: a 413 when the body and n could
// never fit the budget, a 503 when they do not fit now.
func (m *maxBytesMarker) charge(n int64, sh wire.Shape) error {
	if m.budget == nil || m.budget.limit <= 0 || n <= 0 {
		return nil
	}
	if m.held.Load()+n > m.budget.limit {
		return tooLarge("the request body holds %d arrays and objects and %d other values: decoded, more than the %d bytes this server holds for requests in flight", sh.Containers, sh.Scalars, m.budget.limit)
	}
	if !m.budget.acquire(m.ctx, n, bodyBudgetWait) {
		return errBodyBudget(m.budget.limit)
	}
	m.held.Add(n)
	return nil
}

// unread reports whether the body was not read to its end.
func (m *maxBytesMarker) unread() bool {
	if m.length >= 0 {
		return m.read.Load() < m.length
	}
	return !m.eof.Load()
}

// closeUnread is a response writer that bounds, for error answers
// (status 400 and up), net/http's wait for the rest of an unread body
// (see maxBytesMarker): before it writes the answer, net/http reads what
// is left of the body (up to 256 KiB) so as to keep the connection, and
// that read now ends after unreadBodyGrace, upon which net/http closes
// the connection. An honest client still sending gets its answer; one
// that stalls is disconnected.
type closeUnread struct {
	http.ResponseWriter
	body *maxBytesMarker
}

func (c *closeUnread) WriteHeader(code int) {
	if code >= 400 && c.body.unread() {
		_ = c.body.rc.SetReadDeadline(time.Now().Add(unreadBodyGrace))
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.NewResponseController reach the underlying writer.
func (c *closeUnread) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// timeoutOption is a timeout of Options with its default: 0 is def, a
// negative one none (0).
func timeoutOption(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	}
	return d
}

// writeChunk is the most a deadlineWriter hands the connection under one
// deadline: a large body (embeddings, a slot's tokens) must keep moving,
// not arrive whole within the timeout.
const writeChunk = 64 << 10

// deadlineWriter moves the connection's write deadline to d from now
// before each write, header or flush of a response, and before each
// writeChunk of a large write: the deadline measures how long the client
// has taken nothing, as llama-server's (cpp-httplib's) write timeout,
// where http.Server.WriteTimeout measures the whole response.
//
// A stream writes and flushes for every token, and moving a deadline
// costs a timer update in the runtime's poller: a deadline set less than
// d/64 ago stands, so the bound is between 63/64 of d and d.
type deadlineWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	until time.Time // the deadline set last
}

func (w *deadlineWriter) extend() {
	until := time.Now().Add(w.d)
	if until.Sub(w.until) < w.d/64 {
		return
	}
	if w.rc.SetWriteDeadline(until) == nil {
		w.until = until
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	n := 0
	for {
		w.extend()
		m, err := w.ResponseWriter.Write(b[n : n+min(len(b)-n, writeChunk)])
		n += m
		if err != nil || n == len(b) {
			return n, err
		}
	}
}

// FlushError is how http.ResponseController flushes through the writer.
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

// Unwrap lets http.NewResponseController reach the underlying writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeDeadlines bounds each write of every response by d (see
// deadlineWriter; d <= 0: no bound). The deadline is also moved when a
// request starts (a connection's earlier request may have left one, and
// net/http writes a 100 Continue on its own) and when the handler
// returns, before net/http writes what it buffered.
func writeDeadlines(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
			dw.extend()
			defer dw.extend()
			next.ServeHTTP(dw, r)
		})
	}
}

// bodyLimits are limitBody's settings.
type bodyLimits struct {
	max    int64         // per body (<= 0: defaultMaxBodySize)
	budget *bodyBudget   // bytes in flight across requests (nil: no bound)
	idle   time.Duration // wait for a body's next bytes (<= 0: none)
}

// limitBody bounds every request body (see maxBytesMarker).
func limitBody(l bodyLimits) func(http.Handler) http.Handler {
	n := l.max
	if n <= 0 {
		n = defaultMaxBodySize
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(unreadBodyGrace)) // see closeUnread
				llamaErrors.write(w, &httpError{Status: http.StatusRequestEntityTooLarge, Type: errInvalidRequest,
					Msg: fmt.Sprintf("request body is larger than %d bytes", n)})
				return
			}
			if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
				next.ServeHTTP(w, r)
				return
			}
			m := &maxBytesMarker{ReadCloser: http.MaxBytesReader(w, r.Body, n), ctx: r.Context(), budget: l.budget,
				rc: http.NewResponseController(w), idle: l.idle, length: r.ContentLength}
			defer func() { l.budget.release(m.held.Load()) }()
			r.Body = m
			next.ServeHTTP(&closeUnread{ResponseWriter: w, body: m}, r)
		})
	}
}

// recorder remembers whether the response has started, so that a recovered
// panic writes an error only when nothing was sent yet.
type recorder struct {
	http.ResponseWriter
	wrote bool
}

func (rw *recorder) WriteHeader(code int) {
	rw.wrote = true
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recorder) Write(b []byte) (int, error) {
	rw.wrote = true
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets http.NewResponseController reach the underlying writer.
func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// recoverPanics turns a panic in a handler into a 500 JSON error (or an
// aborted response when it had started) instead of a crashed process.
func recoverPanics(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rw := &recorder{ResponseWriter: w}
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
					panic(v)
				}
				log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				if rw.wrote {
					// Too late for an error response: drop the connection.
					panic(http.ErrAbortHandler)
				}
				llamaErrors.write(rw, serverError("internal error: %v", v))
			}()
			next.ServeHTTP(rw, r)
		})
	}
}

// keyScopeCtx is the context key of the API key a request was let in with
// (see keyScope).
type keyScopeCtx struct{}

// keyScope is the identity of the API key that let r in: the SHA-256
// digest of the key, or "" when the server has no keys. Per-client state
// (resumable streams) is kept apart by it, so that one key's holder can
// neither see nor stop another's.
func keyScope(r *http.Request) string {
	s, _ := r.Context().Value(keyScopeCtx{}).(string)
	return s
}

// requireAPIKey accepts requests carrying one of keys, as
// "Authorization: Bearer KEY" or "x-api-key: KEY"; others get a 401 in
// d's shape (llama-server answers every route's in its own; Ollama's
// clients read only theirs). Keys are compared in constant time (over
// their SHA-256 digests, so that their lengths do not leak either). An
// accepted request's context carries the key's digest (keyScope).
func requireAPIKey(keys []string, d dialect) func(http.Handler) http.Handler {
	digests := make([][32]byte, 0, len(keys))
	for _, k := range keys {
		if k != "" {
			digests = append(digests, sha256.Sum256([]byte(k)))
		}
	}
	return func(next http.Handler) http.Handler {
		if len(digests) == 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Authorization")
			if key == "" {
				key = r.Header.Get("X-Api-Key")
			}
			if len(key) > 7 && strings.EqualFold(key[:7], "Bearer ") {
				key = strings.TrimSpace(key[7:])
			}
			got := sha256.Sum256([]byte(key))
			match := 0
			for i := range digests {
				match |= subtle.ConstantTimeCompare(got[:], digests[i][:])
			}
			if key == "" || match != 1 {
				d.write(w, apiError(errAuthentication, "Invalid API Key"))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyScopeCtx{}, string(got[:]))))
		})
	}
}

// withTimeout bounds each request's context by d (0: no bound).
func withTimeout(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// chain applies middleware so that the first one is the outermost.
func chain(h http.Handler, mw ...func(http.Handler) http.Handler) http.Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// giveBackMemory returns the memory of requests with large bodies to the
// OS once they are answered, so that one big request does not leave the
// process's resident size high. One give-back runs at a time: freeing is
// set while one runs.
func giveBackMemory(freeing *atomic.Bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var cb *countingBody
			if r.Body != nil && r.Body != http.NoBody {
				cb = &countingBody{ReadCloser: r.Body}
				r.Body = cb
			}
			next.ServeHTTP(w, r)
			if cb != nil && cb.n.Load() >= bigRequestBytes && freeing.CompareAndSwap(false, true) {
				go func() {
					defer freeing.Store(false)
					debug.FreeOSMemory()
				}()
			}
		})
	}
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}
