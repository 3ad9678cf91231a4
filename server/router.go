package server

import (
	"encoding/json"
	"net/http"
	"sync"
)

// route is one endpoint: a Go 1.22 mux pattern ("POST /v1/chat/completions"),
// whether it is reachable without an API key, and its handler, built once
// per Server.
type route struct {
	Pattern string
	Public  bool
	Handler func(s *Server) http.HandlerFunc
}

var (
	routesMu sync.Mutex
	routes   []route
)

// addRoute registers an endpoint for every Server. Feature files call it
// from init.
func addRoute(pattern string, public bool, h func(s *Server) http.HandlerFunc) {
	routesMu.Lock()
	defer routesMu.Unlock()
	routes = append(routes, route{Pattern: pattern, Public: public, Handler: h})
}

// buildHandler makes the server's http.Handler: the registered routes behind
// panic recovery, CORS, the API key check (for non-public routes), the body
// limit and the request timeout.
func (s *Server) buildHandler() http.Handler {
	routesMu.Lock()
	rs := append([]route(nil), routes...)
	routesMu.Unlock()

	auth := requireAPIKey(s.opts.APIKeys)
	mux := http.NewServeMux()
	for _, rt := range rs {
		var h http.Handler = rt.Handler(s)
		if !rt.Public {
			h = auth(h)
		}
		mux.Handle(rt.Pattern, h)
	}
	if g := s.opts.GCP; g.PredictRoute != "" {
		mux.Handle("POST "+g.PredictRoute, auth(gcpHandler(rs, mux)))
		if g.HealthRoute != "" {
			mux.Handle("GET "+g.HealthRoute, handleHealth(s))
		}
	}
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The mux's own 404 and 405 are plain text; answer in JSON.
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		writeError(w, http.StatusNotFound, errNotFound, "File Not Found")
	})
	return chain(notFound,
		recoverPanics(s.log),
		cors(s.opts.CORSOrigins),
		limitBody(s.opts.MaxBodyBytes),
		withTimeout(s.opts.Timeout),
	)
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
