package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPromptCache checks llama-server's RAM prompt cache: a prompt pushed
// out of its slot is restored from RAM when it comes back; with idle-slot
// caching and a unified KV cache, starting a task frees the idle slots'
// memory, their prompts going to RAM.
func TestPromptCache(t *testing.T) {
	const long = "Once upon a time, there was a little girl named Lily. She had a big red ball that she liked to throw very high."
	const other = "The sun was warm and the birds sang in the park."
	type result struct{ cached, promptN int }
	run := func(t *testing.T, url string, prompt string, slot int) result {
		code, out := postJSON(t, url+"/completion", map[string]any{"prompt": prompt, "n_predict": 2, "temperature": 0, "id_slot": slot, "cache_prompt": true})
		require.Equal(t, http.StatusOK, code, "%v", out)
		tm := out["timings"].(map[string]any)
		return result{int(tm["cache_n"].(float64)), int(tm["prompt_n"].(float64))}
	}
	nPast := func(t *testing.T, url string, slot int) int {
		code, data := call(t, "GET", url+"/slots", nil, nil)
		require.Equal(t, http.StatusOK, code)
		var slots []map[string]any
		require.NoError(t, json.Unmarshal(data, &slots))
		return int(slots[slot]["n_prompt_tokens"].(float64))
	}
	for _, tc := range []struct {
		name                 string
		eo                   engine.Options
		wantCachedBack       bool // the long prompt comes back from RAM
		wantIdleSlot0Cleared bool
	}{
		{"default: on, idle slots cached and cleared", engine.Options{Parallel: 2, Context: llama.ContextOptions{KVUnified: true}}, true, true},
		{"idle slots kept in KV without a unified cache", engine.Options{Parallel: 2}, true, false},
		{"no idle-slot caching", engine.Options{Parallel: 2, Context: llama.ContextOptions{KVUnified: true}, NoCacheIdleSlots: true}, true, false},
		{"off", engine.Options{Parallel: 2, Context: llama.ContextOptions{KVUnified: true}, NoPromptCache: true}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := newTestServer(t, Options{Engine: tc.eo})
			first := run(t, ts.URL, long, 0)
			require.Zero(t, first.cached)
			run(t, ts.URL, other, 1)
			assert.Equal(t, tc.wantIdleSlot0Cleared, nPast(t, ts.URL, 0) == 0, "slot 0's memory after a task started on slot 1")
			// The other prompt pushes the long one out of slot 0...
			run(t, ts.URL, other+" And then", 0)
			// ... and it comes back from RAM on slot 0.
			back := run(t, ts.URL, long, 0)
			if tc.wantCachedBack {
				assert.Greater(t, back.cached, first.promptN/2, "restored from the prompt cache")
				assert.Equal(t, first.promptN, back.cached+back.promptN)
			} else {
				assert.Less(t, back.cached, first.promptN/2)
			}
		})
	}
}
