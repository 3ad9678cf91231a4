package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
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
				writeError(w, http.StatusRequestEntityTooLarge, errInvalidRequest,
					fmt.Sprintf("request body is larger than %d bytes", n))
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
				writeError(rw, http.StatusInternalServerError, errServer, fmt.Sprintf("internal error: %v", v))
			}()
			next.ServeHTTP(rw, r)
		})
	}
}

// requireAPIKey accepts requests carrying one of keys, as
// "Authorization: Bearer KEY" or "x-api-key: KEY"; others get a 401.
// Keys are compared in constant time (over their SHA-256 digests, so that
// their lengths do not leak either).
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
				writeError(w, http.StatusUnauthorized, errAuthentication, "Invalid API Key")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// cors answers cross-origin requests as llama-server does. With origins
// "*" (and credentials) it reflects any Origin; with "localhost" it
// reflects loopback origins only (localhost, 127.0.0.1, [::1]); other
// entries are origins reflected when they match ("*" without credentials
// sends "*").
// Every OPTIONS request is a preflight answered 200 with the allowed
// methods and headers, before the API key check (browsers send none).
// With no origins it adds nothing and lets OPTIONS through.
func cors(o Options) func(http.Handler) http.Handler {
	origins := o.CORSOrigins
	methods, headers := o.CORSMethods, o.CORSHeaders
	if methods == "" {
		methods = "GET, POST, DELETE, OPTIONS"
	}
	if headers == "" {
		headers = "*"
	}
	creds := "true"
	if o.NoCORSCredentials {
		creds = "false"
	}
	return func(next http.Handler) http.Handler {
		if len(origins) == 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			origin := r.Header.Get("Origin")
			h := w.Header()
			switch {
			case slices.Contains(origins, "*") && o.NoCORSCredentials:
				h.Set("Access-Control-Allow-Origin", "*")
			case origin == "":
			case slices.Contains(origins, "*"),
				slices.Contains(origins, "localhost") && isLoopbackOrigin(origin),
				slices.Contains(origins, origin):
				h.Set("Access-Control-Allow-Origin", origin)
				h.Add("Vary", "Origin")
			}
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Credentials", creds)
				h.Set("Access-Control-Allow-Methods", methods)
				h.Set("Access-Control-Allow-Headers", headers)
				h.Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusOK)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// isLoopbackOrigin reports whether an Origin names localhost, 127.0.0.1 or
// ::1 (any scheme and port).
func isLoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host := u.Hostname()
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
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

// isClientGone reports whether err is the client going away.
func isClientGone(err error) bool {
	return errors.Is(err, context.Canceled)
}
