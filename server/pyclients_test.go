//go:build pyclients

package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
	ts := clientsServer(t)
	script, err := filepath.Abs(filepath.Join("testdata", "pyclients", "clients.py"))
	require.NoError(t, err)
	runClientChecks(t, "", 33, filepath.Join(venv, "bin", "python"), script, ts.URL)
}
