//go:build agents

package server

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

var agentsUpdate = flag.Bool("agents.update", false, "write llama-server's outcomes of the recorded agent requests to testdata/agents/llama-server.json")

// TestAgentsReference replays the recorded agent requests on llama-server
// built from the pinned source, set up as TestAgentsReplay sets up this
// server, and requires the outcomes kept in testdata/agents/llama-server.json
// (with -agents.update, writes them instead).
func TestAgentsReference(t *testing.T) {
	recs := agentRecordings(t)
	bin := testenv.LlamaServer(t)
	model := testenv.Model(t, "stories260K.gguf")
	got := agentReference{}
	for _, tmpl := range agentTemplates(t) {
		args := append([]string{"-m", model, "-c", strconv.Itoa(agentsCtx), "-np", "1", "-t", "1", "-tb", "1", "--jinja"}, tmpl.refArgs...)
		url := testenv.RunHTTPServer(t, bin, "", args...)
		got[tmpl.name] = map[string]map[string]agentOutcome{}
		for _, rec := range recs {
			got[tmpl.name][rec.ID] = map[string]agentOutcome{}
			for _, variant := range []string{"recorded", "shrunk"} {
				got[tmpl.name][rec.ID][variant] = replayAgent(t, url, rec.Path, agentBody(t, rec, variant == "shrunk"))
			}
		}
	}
	if *agentsUpdate {
		out, err := json.MarshalIndent(got, "", " ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(agentsDir, agentsRefFile), append(out, '\n'), 0o644))
		return
	}
	assert.Equal(t, readAgentReference(t), got, "llama-server's outcomes changed: record them again with -agents.update")
}
