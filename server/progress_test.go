package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompletionReturnProgress checks llama-server's prompt progress
// chunks: with stream and return_progress, one before any prompt token is
// decoded, then one per batch, with timings that never go backwards.
func TestCompletionReturnProgress(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{BatchSize: 16, UBatchSize: 16}}})
	prompt := strings.Repeat("the quick brown fox jumps over the lazy dog ", 6)
	for _, tc := range []struct {
		name     string
		body     map[string]any
		progress bool
	}{
		{"asked", map[string]any{"return_progress": true, "timings_per_token": true}, true},
		{"not asked", map[string]any{"timings_per_token": true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"prompt": prompt, "n_predict": 4, "stream": true, "cache_prompt": false}
			for k, v := range tc.body {
				body[k] = v
			}
			var progress []map[string]any
			content := ""
			for _, data := range sseEvents(t, ts.URL+"/completion", body) {
				var c map[string]any
				require.NoError(t, json.Unmarshal([]byte(data), &c))
				if _, ok := c["prompt_progress"]; ok {
					progress = append(progress, c)
					assert.Equal(t, "", c["content"])
					continue
				}
				content += c["content"].(string)
			}
			assert.NotEmpty(t, content)
			if !tc.progress {
				assert.Empty(t, progress)
				return
			}
			require.Greater(t, len(progress), 2, "a start and one per batch of 16")
			first := progress[0]["timings"].(map[string]any)
			assert.Zero(t, first["prompt_n"])
			assert.Zero(t, first["prompt_ms"])
			assert.Zero(t, first["predicted_n"])
			last := progress[len(progress)-1]["prompt_progress"].(map[string]any)
			assert.Equal(t, last["total"], last["processed"], "the last one is at 100%")
			prev := -1.0
			for _, p := range progress {
				tm := p["timings"].(map[string]any)
				assert.GreaterOrEqual(t, tm["prompt_ms"].(float64), prev)
				prev = tm["prompt_ms"].(float64)
			}
		})
	}
}
