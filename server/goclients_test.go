//go:build goclients

package server

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// TestGoClients runs testdata/goclients, the checks of the Go clients a Go
// programmer would point at a llama.cpp server (sashabaranov/go-openai,
// langchaingo's openai, ollama, anthropic and llamafile models, and
// Ollama's own Go client), against this server on stories260K with a
// Hermes tool-call template and mean-pooled embeddings, and reports each
// check as a subtest. The checks are a module of their own (every client
// pinned in its go.mod and go.sum), built here with the go command, which
// fetches the clients from the module proxy the first time.
func TestGoClients(t *testing.T) {
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the checks")
	bin := filepath.Join(t.TempDir(), "goclients")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".")
	build.Dir = filepath.Join("testdata", "goclients")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the checks:\n%s", out)

	_, ts := newTestServer(t, Options{ChatTemplate: genericToolsTemplate,
		Engine: engine.Options{Embedding: true, Context: llama.ContextOptions{ContextSize: 2048, Pooling: llama.PoolingMean}}})
	runClientChecks(t, "", 27, bin, ts.URL)
}
