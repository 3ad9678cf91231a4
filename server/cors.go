package server

import (
	"net/http"
	"net/url"
	"slices"
)

// Preflight answers, as llama-server's defaults (--cors-methods,
// --cors-headers, --cors-credentials).
const (
	corsAllowMethods = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders = "*"
)

// cors answers cross-origin requests as llama-server does, for the
// origins of Options.CORSOrigins:
//   - "*" allows any origin (its Origin is echoed back, with credentials);
//   - "localhost" allows the origins whose host is localhost, 127.0.0.1
//     or ::1, on any port;
//   - any other entry is an origin allowed as is (llama-server sends its
//     --cors-origins text verbatim; a list is matched here instead).
//
// Every OPTIONS request, on any path, is a preflight: it is answered 200
// with an empty body before the API key check, with
// Access-Control-Allow-Origin only when the origin is allowed. With no
// origins CORS is off: no header is added and OPTIONS is not answered.
func cors(origins []string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if len(origins) == 0 {
			return next
		}
		anyOrigin := slices.Contains(origins, "*")
		localhost := slices.Contains(origins, "localhost")
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			origin := r.Header.Get("Origin")
			h := w.Header()
			if origin != "" {
				h.Add("Vary", "Origin")
				if anyOrigin || localhost && isLocalhostOrigin(origin) || slices.Contains(origins, origin) {
					h.Set("Access-Control-Allow-Origin", origin)
					h.Set("Access-Control-Allow-Credentials", "true")
				}
			}
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Credentials", "true")
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusOK)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// isLocalhostOrigin reports whether origin (scheme://host[:port]) names
// this machine: localhost, 127.0.0.1 or ::1.
func isLocalhostOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}
