package server

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// TestSlotContextCappedAtTraining: as llama-server, a slot never gets more
// context than the model was trained on (stories260K: 2,048 tokens),
// whatever -c and -np give it, with a warning when that caps it; a prompt
// longer than the capped slot is refused with llama-server's 400.
func TestSlotContextCappedAtTraining(t *testing.T) {
	const train = 2048
	for _, tc := range []struct {
		name             string
		eo               engine.Options
		wantSlot, before int // slot context, and what it was before the cap (0: not capped)
	}{
		{"-c 32768 -np 1", engine.Options{Context: llama.ContextOptions{ContextSize: 32768}, Parallel: 1}, train, 32768},
		{"-c 32768 -np 4", engine.Options{Context: llama.ContextOptions{ContextSize: 32768}, Parallel: 4}, train, 8192},
		{"-c 32768 -np 2 -kvu", engine.Options{Context: llama.ContextOptions{ContextSize: 32768, KVUnified: true}, Parallel: 2}, train, 32768},
		{"-c 4096 -np 4: under the training context", engine.Options{Context: llama.ContextOptions{ContextSize: 4096}, Parallel: 4}, 1024, 0},
		{"-c 2048 -np 1: exactly it", engine.Options{Context: llama.ContextOptions{ContextSize: 2048}, Parallel: 1}, train, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.Buffer
			tc.eo.Context.Threads, tc.eo.Context.ThreadsBatch = 1, 1
			_, ts := newTestServer(t, Options{Model: testenv.Model(t, "stories260K.gguf"), Slots: true, Engine: tc.eo,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			code, data := call(t, "GET", ts.URL+"/slots", nil, nil)
			require.Equal(t, http.StatusOK, code)
			assert.Equal(t, tc.eo.Parallel, strings.Count(string(data), `"n_ctx":`+strconv.Itoa(tc.wantSlot)), "%s", data)
			_, models := call(t, "GET", ts.URL+"/v1/models", nil, nil)
			assert.Contains(t, string(models), `"n_ctx":`+strconv.Itoa(tc.wantSlot))
			warning := "the slot context (" + strconv.Itoa(tc.before) + ") exceeds the training context of the model (2048) - capping"
			if tc.before > 0 {
				assert.Contains(t, logs.String(), warning)
			} else {
				assert.NotContains(t, logs.String(), "exceeds the training context")
			}

			// A prompt of exactly the slot's size is refused, one token
			// less runs (n_predict 1), as llama-server.
			prompt := func(n int) []int {
				p := make([]int, n)
				for i := range p {
					p[i] = 100 + i%300
				}
				return p
			}
			code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": prompt(tc.wantSlot), "n_predict": 1})
			require.Equal(t, http.StatusBadRequest, code, "%v", out)
			e := out["error"].(map[string]any)
			assert.Equal(t, "exceed_context_size_error", e["type"])
			assert.Equal(t, "request ("+strconv.Itoa(tc.wantSlot)+" tokens) exceeds the available context size ("+strconv.Itoa(tc.wantSlot)+" tokens), try increasing it", e["message"])
			code, out = postJSON(t, ts.URL+"/completion", map[string]any{"prompt": prompt(tc.wantSlot - 1), "n_predict": 1})
			require.Equal(t, http.StatusOK, code, "%v", out)
		})
	}
}
