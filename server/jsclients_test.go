//go:build jsclients

package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSClients runs testdata/jsclients/clients.mjs, the checks of the AI
// SDK (its OpenAI Responses and chat, OpenAI-compatible, Anthropic and
// community Ollama providers), OpenAI's Node SDK and Ollama's JavaScript client, against
// this server on stories260K with a Hermes tool-call template, and
// reports each check as a subtest. The packages come from
// $LLAMA_JSCLIENTS_NPM, a folder where .ci/run ran npm ci on
// testdata/jsclients/package.json and its lock (every package pinned).
func TestJSClients(t *testing.T) {
	npm := os.Getenv("LLAMA_JSCLIENTS_NPM")
	require.NotEmpty(t, npm, "LLAMA_JSCLIENTS_NPM names a folder holding the clients' node_modules (.ci/run makes it: "+
		"copy server/testdata/jsclients/package*.json to DIR && npm ci --prefix DIR)")
	modules := filepath.Join(npm, "node_modules")
	_, err := os.Stat(filepath.Join(modules, "ai", "package.json"))
	require.NoError(t, err, "the clients are not installed in %s", npm)
	// Node resolves imports from the script's folder up: the script runs
	// from a folder of its own beside a link to the installed packages.
	dir := t.TempDir()
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))
	script, err := os.ReadFile(filepath.Join("testdata", "jsclients", "clients.mjs"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clients.mjs"), script, 0o644))
	ts := clientsServer(t)
	runClientChecks(t, dir, 28, "node", "clients.mjs", ts.URL)
}
