package server

// Vertex AI's prediction protocol for custom containers, as llama-server
// serves it when AIP_MODE=PREDICTION: POST {"instances": [...]} to the
// predict route, each instance being the body of a request to the route its
// "@requestFormat" names (a path, or its camelCase alias such as
// "chatCompletions" for /v1/chat/completions); the answer is
// {"predictions": [...]}, one response body per instance, in order.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// GCPOptions enable Vertex AI's prediction protocol (see Options.GCP).
type GCPOptions struct {
	// PredictRoute is the route of predictions ("" disables the protocol).
	PredictRoute string
	// HealthRoute, when set, is another route answering as GET /health.
	HealthRoute string
}

// GCPFromEnv reads Vertex AI's container variables as llama-server does:
// with AIP_MODE=PREDICTION, the predict route (AIP_PREDICT_ROUTE, default
// /predict), the health route (AIP_HEALTH_ROUTE) and the port to listen on
// (AIP_HTTP_PORT, default 8080). ok is false when AIP_MODE is not
// PREDICTION.
func GCPFromEnv(getenv func(string) string) (o GCPOptions, port int, ok bool) {
	if getenv("AIP_MODE") != "PREDICTION" {
		return GCPOptions{}, 0, false
	}
	o.PredictRoute = getenv("AIP_PREDICT_ROUTE")
	if o.PredictRoute == "" {
		o.PredictRoute = "/predict"
	}
	o.HealthRoute = getenv("AIP_HEALTH_ROUTE")
	port = 8080
	if p, err := strconv.Atoi(getenv("AIP_HTTP_PORT")); err == nil && p > 0 && p < 65536 {
		port = p
	}
	return o, port, true
}

// checkGCPRoutes reports routes that are not paths or that a server
// route already uses.
func checkGCPRoutes(o GCPOptions) error {
	routesMu.Lock()
	rs := append([]route(nil), routes...)
	routesMu.Unlock()
	for _, p := range []string{o.PredictRoute, o.HealthRoute} {
		if p == "" {
			continue
		}
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "{} \t\n") {
			return fmt.Errorf("server: GCP route %q is not a plain path", p)
		}
		for _, rt := range rs {
			if _, path, _ := strings.Cut(rt.Pattern, " "); path == p {
				return fmt.Errorf("server: GCP route %s conflicts with a server route", p)
			}
		}
	}
	if o.HealthRoute != "" && o.PredictRoute == "" {
		return errors.New("server: GCP HealthRoute needs PredictRoute")
	}
	return nil
}

// maxGCPInstances bounds the instances of one prediction request.
const maxGCPInstances = 128

// gcpFormat is the camelCase alias of a route path: the leading /v1
// dropped, and each letter after / - or _ upper-cased.
func gcpFormat(path string) string {
	path = strings.TrimPrefix(path, "/v1")
	path = strings.TrimPrefix(path, "/")
	var sb strings.Builder
	up := false
	for _, r := range path {
		switch {
		case r == '{' || r == ':':
			return sb.String()
		case r == '/' || r == '-' || r == '_':
			up = true
		case up:
			sb.WriteRune(unicode.ToUpper(r))
			up = false
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// gcpHandler serves the predict route by dispatching each instance to mux.
func gcpHandler(rs []route, mux http.Handler) http.HandlerFunc {
	var paths []string
	for _, rt := range rs {
		method, path, ok := strings.Cut(rt.Pattern, " ")
		if ok && method == http.MethodPost && !strings.Contains(path, "{") {
			paths = append(paths, path)
		}
	}
	// The OpenAI-style /v1 routes win a shared alias (completions).
	sort.SliceStable(paths, func(i, j int) bool {
		return strings.HasPrefix(paths[i], "/v1/") && !strings.HasPrefix(paths[j], "/v1/")
	})
	alias := map[string]string{}
	known := map[string]bool{}
	for _, p := range paths {
		known[p] = true
		if a := gcpFormat(p); alias[a] == "" {
			alias[a] = p
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Instances []json.RawMessage `json:"instances"`
		}
		var raw json.RawMessage
		if !decodeJSON(w, r, &raw) {
			return
		}
		if jsonKind(raw) != 'o' {
			writeHTTPError(w, badRequest("request body must be a JSON object"))
			return
		}
		if err := json.Unmarshal(raw, &body); err != nil || body.Instances == nil {
			writeHTTPError(w, badRequest("request body must include an array field named instances"))
			return
		}
		if len(body.Instances) > maxGCPInstances {
			writeHTTPError(w, badRequest("instances array exceeds maximum size of %d", maxGCPInstances))
			return
		}
		preds := make([]any, len(body.Instances))
		var wg sync.WaitGroup
		for i, inst := range body.Instances {
			wg.Add(1)
			go func() {
				defer wg.Done()
				preds[i] = gcpPredict(r, mux, alias, known, inst)
			}()
		}
		wg.Wait()
		writeJSON(w, http.StatusOK, map[string]any{"predictions": preds})
	}
}

// gcpPredict runs one instance and returns its response body (an error
// object when it fails before reaching a route).
func gcpPredict(r *http.Request, mux http.Handler, alias map[string]string, known map[string]bool, raw json.RawMessage) any {
	fail := func(msg string) any {
		_, body := errorObject(badRequest("%s", msg))
		return body
	}
	var payload map[string]json.RawMessage
	if jsonKind(raw) != 'o' || json.Unmarshal(raw, &payload) != nil {
		return fail("each instance must be a JSON object")
	}
	var format string
	if json.Unmarshal(payload["@requestFormat"], &format) != nil || format == "" {
		return fail("each instance must include a string @requestFormat")
	}
	delete(payload, "@requestFormat")
	if _, ok := payload["stream"]; ok {
		payload["stream"] = json.RawMessage("false") // no streaming here
	}
	path := alias[format]
	if path == "" && known[format] {
		path = format
	}
	if path == "" {
		return fail("no handler registered for @requestFormat: " + format)
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return fail(err.Error())
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, path, bytes.NewReader(b))
	if err != nil {
		return fail(err.Error())
	}
	req.Header = r.Header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Del("Content-Length")
	req.RemoteAddr = r.RemoteAddr
	rec := &bufferedResponse{header: http.Header{}}
	mux.ServeHTTP(rec, req)
	var out any
	if rec.body.Len() == 0 {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), &out); err != nil {
		return rec.body.String()
	}
	return out
}

// bufferedResponse is an http.ResponseWriter that keeps the response.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// Flush does nothing: the response is kept whole.
func (b *bufferedResponse) Flush() {}
