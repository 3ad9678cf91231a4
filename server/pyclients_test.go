//go:build pyclients

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// TestPythonClients runs testdata/pyclients/clients.py, the checks of
// OpenAI's, Anthropic's and Ollama's Python clients and OpenAI's Agents SDK,
// against this server on stories260K with a Hermes tool-call template, and
// reports each check as a subtest. The clients come from the virtual
// environment in $LLAMA_PYCLIENTS_VENV, which .ci/run makes from
// testdata/pyclients/requirements.txt (every package pinned).
func TestPythonClients(t *testing.T) {
	venv := os.Getenv("LLAMA_PYCLIENTS_VENV")
	require.NotEmpty(t, venv, "LLAMA_PYCLIENTS_VENV names the clients' virtual environment (.ci/run makes it: "+
		"python3 -m venv DIR && DIR/bin/pip install -r server/testdata/pyclients/requirements.txt)")
	python := filepath.Join(venv, "bin", "python")
	_, ts := newTestServer(t, Options{ChatTemplate: genericToolsTemplate,
		Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 2048}}})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "pyclients", "clients.py"), ts.URL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// A check's line: its name, whether it passed, and what it returned
	// or the traceback of its failure.
	type result struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	var results []result
	for line := range strings.Lines(stdout.String()) {
		var r result
		require.NoError(t, json.Unmarshal([]byte(line), &r), "a line of clients.py: %q\nstderr:\n%s", line, stderr.String())
		results = append(results, r)
	}
	require.NotEmpty(t, results, "clients.py reported nothing (%v)\nstderr:\n%s", err, stderr.String())
	for _, r := range results {
		t.Run(r.Name, func(t *testing.T) {
			assert.True(t, r.OK, "%s", r.Detail)
		})
	}
	assert.NoError(t, err, "clients.py ended with an error\nstderr:\n%s", stderr.String())
	assert.Empty(t, stderr.String(), "clients.py wrote to stderr")
	assert.Len(t, results, 29, "every check ran")
}
