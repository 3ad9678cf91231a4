package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/x/llama/internal/testenv"
)

// newTestServer starts a Server behind an httptest server. When neither
// o.Model nor o.ModelsDir/ModelsPreset is set it serves stories260K with
// the "chatml" template, one thread, two slots, a 1024-token context and
// /slots and /metrics on. Everything is closed by t.Cleanup.
func newTestServer(t testing.TB, o Options) (*Server, *httptest.Server) {
	t.Helper()
	if o.Model == "" && o.ModelsDir == "" && o.ModelsPreset == "" {
		o.Model = testenv.Model(t, "stories260K.gguf")
		if o.ChatTemplate == "" && o.ChatTemplateFile == "" {
			o.ChatTemplate = "chatml"
		}
		if o.Engine.Parallel == 0 {
			o.Engine.Parallel = 2
		}
		if o.Engine.CtxSize == 0 {
			o.Engine.CtxSize = 1024
		}
		o.Slots = true
		o.Metrics = true
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Engine.Threads == 0 {
		o.Engine.Threads = 1
	}
	if o.Engine.ThreadsBatch == 0 {
		o.Engine.ThreadsBatch = 1
	}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("newTestServer: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		_ = s.Close()
	})
	return s, ts
}

// defaultInstance returns the instance that serves s's default model,
// held until the end of the test.
func defaultInstance(t testing.TB, s *Server) *instance {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	rec := httptest.NewRecorder()
	inst, release, ok := s.instanceFor(rec, req, "")
	if !ok {
		t.Fatalf("defaultInstance: %d %s", rec.Code, rec.Body)
	}
	t.Cleanup(release)
	return inst
}
