package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"unicode"
)

// GCPOptions enable the Vertex AI custom-container protocol of Google
// Cloud Platform, which llama-server turns on when AIP_MODE=PREDICTION
// (with AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE). The zero value disables
// it.
type GCPOptions struct {
	// Enabled serves PredictRoute.
	Enabled bool
	// PredictRoute is the prediction path (AIP_PREDICT_ROUTE; default
	// "/predict"). Its body is {"instances": [...]}, each instance a
	// request to the endpoint its "@requestFormat" names, as a camelCase
	// alias ("chatCompletions" for /v1/chat/completions) or a path; the
	// answer is {"predictions": [...]}, one response body each.
	PredictRoute string
	// HealthRoute, when set, is another path of GET /health
	// (AIP_HEALTH_ROUTE).
	HealthRoute string
}

// gcpMaxInstances bounds the instances of one prediction request.
const gcpMaxInstances = 128

// gcpAlias is llama-server's camelCase name of a path:
// "/v1/chat/completions" is "chatCompletions", "/apply-template"
// "applyTemplate"; it stops at a path parameter.
func gcpAlias(path string) string {
	path = strings.TrimPrefix(path, "/v1")
	path = strings.TrimPrefix(path, "/")
	var b strings.Builder
	upper := false
	for _, c := range path {
		if c == '{' || c == ':' {
			break
		}
		if c == '/' || c == '-' || c == '_' {
			upper = true
			continue
		}
		if upper {
			c = unicode.ToUpper(c)
		}
		b.WriteRune(c)
		upper = false
	}
	return b.String()
}

// addGCPRoutes registers the prediction route (and the health alias) on
// mux when s.opts.GCP enables them; rs are the server's routes, whose
// handlers predictions call.
func (s *Server) addGCPRoutes(mux *http.ServeMux, rs []route, guard func(dialect, access, http.Handler) http.Handler) error {
	g := s.opts.GCP
	if !g.Enabled {
		return nil
	}
	predict := g.PredictRoute
	if predict == "" {
		predict = "/predict"
	}
	if !strings.HasPrefix(predict, "/") {
		predict = "/" + predict
	}
	// An instance names a route by alias or by path; the first route of
	// each wins (routes.go orders them).
	byAlias := map[string]*route{}
	byPath := map[string]*route{}
	for i := range rs {
		rt := &rs[i]
		_, path, ok := strings.Cut(rt.Pattern, " ")
		if !ok {
			continue
		}
		if path == predict {
			return fmt.Errorf("server: GCP predict route %s conflicts with a route of the server", predict)
		}
		if _, dup := byAlias[gcpAlias(path)]; !dup {
			byAlias[gcpAlias(path)] = rt
		}
		if _, dup := byPath[path]; !dup {
			byPath[path] = rt
		}
	}
	if h := g.HealthRoute; h != "" {
		if !strings.HasPrefix(h, "/") {
			h = "/" + h
		}
		mux.Handle("GET "+h, guard(llamaErrors, public, llamaErrors.serve(handleHealth(s))))
	}
	predictOne := func(orig *http.Request, inst json.RawMessage) (pred any) {
		defer func() {
			// As recoverPanics, here, where the instance's goroutine is.
			if v := recover(); v != nil {
				s.log.Error("panic in handler", "path", predict, "panic", v, "stack", string(debug.Stack()))
				_, pred = llamaErrors.render(serverError("internal error: %v", v))
			}
		}()
		fail := func(msg string) any {
			_, body := llamaErrors.render(badRequest("%s", msg))
			return body
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(inst, &fields) != nil || fields == nil {
			return fail("each instance must be a JSON object")
		}
		var format string
		if json.Unmarshal(fields["@requestFormat"], &format) != nil {
			return fail("each instance must include a string @requestFormat")
		}
		delete(fields, "@requestFormat")
		if _, ok := fields["stream"]; ok {
			fields["stream"] = json.RawMessage("false")
		}
		rt, ok := byAlias[format]
		if !ok {
			rt, ok = byPath[format]
		}
		if !ok {
			return fail("no handler registered for @requestFormat: " + format)
		}
		body, _ := json.Marshal(fields)
		req, err := rt.request(orig, body)
		if err != nil {
			return fail(err.Error())
		}
		var p prediction
		rt.Errors.serve(rt.Handler).ServeHTTP(&p, req)
		if p.streamed() {
			return fail("predict route does not support streaming responses")
		}
		return p.answer()
	}
	mux.Handle("POST "+predict, guard(llamaErrors, keyed, llamaErrors.serve(func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			Instances *[]json.RawMessage `json:"instances"`
		}
		data, err := readJSONBody(r)
		if he := (*httpError)(nil); errors.As(err, &he) {
			return he
		}
		if err != nil {
			return badRequest("%v", err)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			return badRequest("request body must be a JSON object")
		}
		if json.Unmarshal(data, &body) != nil || body.Instances == nil {
			return badRequest("request body must include an array field named instances")
		}
		insts := *body.Instances
		if len(insts) > gcpMaxInstances {
			return badRequest("instances array exceeds maximum size of %d", gcpMaxInstances)
		}
		out := gcpPredictions{Predictions: make([]any, len(insts))}
		var wg sync.WaitGroup
		for i, inst := range insts {
			wg.Go(func() { out.Predictions[i] = predictOne(r, inst) })
		}
		wg.Wait()
		writeJSON(w, http.StatusOK, out)
		return nil
	})))
	return nil
}

// gcpPredictions is the answer of the prediction route: one response
// body per instance.
type gcpPredictions struct {
	Predictions []any `json:"predictions"`
}

// request is the request to rt of a prediction: the prediction's own
// (its context, headers, host and address, which the prediction route's
// checks have passed) with body as its body and rt's method and path,
// whose wildcards are their own names.
func (rt *route) request(orig *http.Request, body []byte) (*http.Request, error) {
	method, path, _ := strings.Cut(rt.Pattern, " ")
	req, err := http.NewRequestWithContext(orig.Context(), method, path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = orig.Header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Del("Content-Length")
	req.Host, req.RemoteAddr = orig.Host, orig.RemoteAddr
	for seg := range strings.SplitSeq(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
			req.SetPathValue(name, seg)
		}
	}
	return req, nil
}

// prediction is the http.ResponseWriter a route's handler answers a
// prediction's instance into. writeJSON hands it the route's answer,
// which it encodes once, as the route would send it; other bodies (the
// text of /metrics) are kept as they are written.
type prediction struct {
	header http.Header
	json   json.RawMessage // the answer writeJSON gave
	body   bytes.Buffer    // what was written otherwise
}

func (p *prediction) Header() http.Header {
	if p.header == nil {
		p.header = http.Header{}
	}
	return p.header
}

func (p *prediction) WriteHeader(int) {}

func (p *prediction) Write(b []byte) (int, error) { return p.body.Write(b) }

// setJSON takes the route's answer v.
func (p *prediction) setJSON(v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	p.json = b
	return nil
}

// streamed reports whether the route started a stream.
func (p *prediction) streamed() bool {
	return strings.HasPrefix(p.Header().Get("Content-Type"), "text/event-stream")
}

// answer is the route's answer as the prediction of its instance: the
// JSON it gave, or the other bodies as JSON when they are, else as a
// string; nil when there was none.
func (p *prediction) answer() any {
	switch out := bytes.TrimSpace(p.body.Bytes()); {
	case p.json != nil:
		return p.json
	case len(out) == 0:
		return nil
	case json.Valid(out):
		return json.RawMessage(out)
	default:
		return string(out)
	}
}
