//go:build pyclients || jsclients || goclients

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// clientsServer is the server the client suites run against:
// stories260K with the Hermes tool-call template.
func clientsServer(t *testing.T) *httptest.Server {
	_, ts := newTestServer(t, Options{ChatTemplate: genericToolsTemplate,
		Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 2048}}})
	return ts
}

// runClientChecks runs a client suite's script (name and args; the
// server's URL last) and reports each check it prints, one JSON line
// {name, ok, detail} each, as a subtest; want is how many it has.
func runClientChecks(t *testing.T, dir string, want int, name string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// A check's line: its name, whether it passed, and what it returned
	// or the trace of its failure.
	type result struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	var results []result
	for line := range strings.Lines(stdout.String()) {
		var r result
		require.NoError(t, json.Unmarshal([]byte(line), &r), "a line of the checks: %q\nstderr:\n%s", line, stderr.String())
		results = append(results, r)
	}
	require.NotEmpty(t, results, "the checks reported nothing (%v)\nstderr:\n%s", err, stderr.String())
	for _, r := range results {
		t.Run(r.Name, func(t *testing.T) {
			assert.True(t, r.OK, "%s", r.Detail)
		})
	}
	assert.NoError(t, err, "the checks ended with an error\nstderr:\n%s", stderr.String())
	assert.Empty(t, stderr.String(), "the checks wrote to stderr")
	assert.Len(t, results, want, "every check ran")
}
