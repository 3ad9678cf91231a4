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
	"sync/atomic"
	"time"
)

// maxBytesMarker is a request body already bounded by limitBody, so that
// decodeJSON does not bound it again.
type maxBytesMarker struct{ io.ReadCloser }

// limitBody bounds every request body to n bytes.
func limitBody(n int64) func(http.Handler) http.Handler {
	if n <= 0 {
		n = defaultMaxBodySize
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				llamaErrors.write(w, &httpError{Status: http.StatusRequestEntityTooLarge, Type: errInvalidRequest,
					Msg: fmt.Sprintf("request body is larger than %d bytes", n)})
				return
			}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = &maxBytesMarker{http.MaxBytesReader(w, r.Body, n)}
			}
			next.ServeHTTP(w, r)
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
// "Authorization: Bearer KEY" or "x-api-key: KEY"; others get a 401.
// Keys are compared in constant time (over their SHA-256 digests, so that
// their lengths do not leak either). An accepted request's context
// carries the key's digest (keyScope).
func requireAPIKey(keys []string) func(http.Handler) http.Handler {
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
				llamaErrors.write(w, apiError(errAuthentication, "Invalid API Key"))
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
