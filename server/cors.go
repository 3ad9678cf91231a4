package server

import (
	"net/http"
	"net/url"
	"slices"
)

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
