package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

// complete starts a server from args (after -m model) and returns its
// completion of body.
func complete(t *testing.T, model, body string, args ...string) string {
	t.Helper()
	c, err := parseFlags(append([]string{"-m", model, "-c", "256", "-np", "1", "-t", "1", "-tb", "1"}, args...), noEnv, io.Discard)
	require.NoError(t, err)
	srv, err := server.New(context.Background(), c.opts)
	require.NoError(t, err)
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/completion", strings.NewReader(body)))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var r struct {
		Content string `json:"content"`
	}
	require.NoError(t, jsonDecode(rec.Body, &r))
	return r.Content
}

// TestFlagAdaptive checks --adaptive-target and --adaptive-decay: they are
// the defaults of the requests' adaptive_target and adaptive_decay, so a
// request with adaptive_p among its samplers samples as if it had set
// them, and differently from the sampler turned off; --samplers and
// --sampling-seq take adaptive_p as llama-server does.
func TestFlagAdaptive(t *testing.T) {
	c, err := parseFlags([]string{"--adaptive-target", "0.3", "--adaptive-decay", "0.5", "--samplers", "Top_K;adaptive-p"}, noEnv, io.Discard)
	require.NoError(t, err)
	assert.InDelta(t, 0.3, c.opts.Sampling.AdaptiveTarget, 1e-6)
	assert.InDelta(t, 0.5, c.opts.Sampling.AdaptiveDecay, 1e-6)
	assert.Equal(t, []string{"top_k", "adaptive_p"}, c.opts.Sampling.Samplers)
	c, err = parseFlags([]string{"--sampling-seq", "kta"}, noEnv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"top_k", "temperature", "adaptive_p"}, c.opts.Sampling.Samplers)
	c, err = parseFlags(nil, noEnv, io.Discard)
	require.NoError(t, err)
	assert.InDelta(t, -1, c.opts.Sampling.AdaptiveTarget, 1e-6, "off by default")
	assert.InDelta(t, 0.9, c.opts.Sampling.AdaptiveDecay, 1e-6)

	model := testenv.Model(t, "stories260K.gguf")
	req := func(extra string) string {
		return `{"prompt":"Once upon a time","n_predict":32,"temperature":1,"seed":42,"samplers":["top_k","adaptive_p"]` + extra + `}`
	}
	fromFlags := complete(t, model, req(""), "--adaptive-target", "0.3", "--adaptive-decay", "0.5")
	fromRequest := complete(t, model, req(`,"adaptive_target":0.3,"adaptive_decay":0.5`))
	off := complete(t, model, req(""))
	assert.Equal(t, fromRequest, fromFlags, "the flags are the request's defaults")
	assert.NotEqual(t, off, fromFlags, "adaptive-p at 0.3 samples otherwise than off")
	assert.Equal(t, off, complete(t, model, req(`,"adaptive_target":-1`), "--adaptive-target", "0.3"), "a request overrides the flag")
}
