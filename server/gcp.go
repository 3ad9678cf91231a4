package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
// mux when s.opts.GCP enables them; rs are the server's routes, which
// predictions dispatch to.
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
	type target struct{ method, path string }
	byAlias := map[string]target{}
	byPath := map[string]target{}
	for _, rt := range rs {
		method, path, ok := strings.Cut(rt.Pattern, " ")
		if !ok {
			continue
		}
		if path == predict {
			return fmt.Errorf("server: GCP predict route %s conflicts with a route of the server", predict)
		}
		t := target{method, path}
		if _, dup := byAlias[gcpAlias(path)]; !dup {
			byAlias[gcpAlias(path)] = t
		}
		if _, dup := byPath[path]; !dup {
			byPath[path] = t
		}
	}
	if h := g.HealthRoute; h != "" {
		if !strings.HasPrefix(h, "/") {
			h = "/" + h
		}
		mux.Handle("GET "+h, guard(llamaErrors, public, llamaErrors.serve(handleHealth(s))))
	}
	predictOne := func(ctx context.Context, orig *http.Request, inst json.RawMessage) any {
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
		t, ok := byAlias[format]
		if !ok {
			t, ok = byPath[format]
		}
		if !ok {
			return fail("no handler registered for @requestFormat: " + format)
		}
		body, _ := json.Marshal(fields)
		req, err := http.NewRequestWithContext(ctx, t.method, t.path, bytes.NewReader(body))
		if err != nil {
			return fail(err.Error())
		}
		req.Header = orig.Header.Clone()
		req.Host = orig.Host // the routes' Host and Origin checks see the prediction's
		req.Header.Set("Content-Type", "application/json")
		req.Header.Del("Content-Length")
		req.RemoteAddr = orig.RemoteAddr
		rec := &bufferedResponse{header: http.Header{}}
		mux.ServeHTTP(rec, req)
		if strings.HasPrefix(rec.header.Get("Content-Type"), "text/event-stream") {
			return fail("predict route does not support streaming responses")
		}
		out := bytes.TrimSpace(rec.body.Bytes())
		if len(out) == 0 {
			return nil
		}
		var v any
		if json.Unmarshal(out, &v) != nil {
			return string(out)
		}
		return v
	}
	mux.Handle("POST "+predict, guard(llamaErrors, keyed, llamaErrors.serve(func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			Instances *[]json.RawMessage `json:"instances"`
		}
		data, err := readBody(r)
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
		preds := make([]any, len(insts))
		var wg sync.WaitGroup
		for i, inst := range insts {
			wg.Go(func() { preds[i] = predictOne(r.Context(), r, inst) })
		}
		wg.Wait()
		writeJSON(w, http.StatusOK, map[string]any{"predictions": preds})
		return nil
	})))
	return nil
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
