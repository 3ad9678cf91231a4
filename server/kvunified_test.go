package server

import (
	"net/http"
	"sync"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKVUnifiedSlotCapacity checks llama-server's unified KV cache: each
// slot may use the whole context (capped by KVUnifiedPerSlot), and a cache
// filled by several slots fails requests cleanly, never the server.
func TestKVUnifiedSlotCapacity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		eo      engine.Options
		wantCtx int
	}{
		{"whole context", engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}}, 256},
		{"capped per slot", engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}, KVUnifiedPerSlot: 100}, 100},
		{"split without unified (llama.cpp pads to 256)", engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 1024}}, 256},
		{"unified, same context", engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 1024, KVUnified: true}}, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := newTestServer(t, Options{Engine: tc.eo})
			slots := defaultInstance(t, s).Engine.SlotsInfo()
			require.Len(t, slots, 4)
			assert.Equal(t, tc.wantCtx, slots[0].NCtx)
			code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "A", "n_predict": 80, "ignore_eos": true, "temperature": 0})
			require.Equal(t, http.StatusOK, code, "%v", out)
			want := 80
			if tc.wantCtx < 82 {
				want = tc.wantCtx - 2 // the prompt's 2 tokens, then the slot is full
			}
			assert.Equal(t, float64(want), out["timings"].(map[string]any)["predicted_n"])
		})
	}
	t.Run("full cache", func(t *testing.T) {
		_, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true, BatchSize: 64, UBatchSize: 64}}})
		var wg sync.WaitGroup
		codes := make([]int, 4)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "A", "n_predict": 120, "ignore_eos": true})
			}()
		}
		wg.Wait()
		for _, c := range codes {
			assert.Contains(t, []int{200, 500}, c)
		}
		code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "A", "n_predict": 8})
		assert.Equal(t, http.StatusOK, code, "the server goes on: %v", out)
	})
}
