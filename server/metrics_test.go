package server

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsAsLlamaServer checks llama-server's metric semantics: cached
// prompt tokens counted apart, generation rates over decode steps (the
// first token is free), throughput gauges over the window since the
// previous scrape.
func TestMetricsAsLlamaServer(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, NoPromptCache: true}})
	num := func(name string) float64 {
		v, err := strconv.ParseFloat(metric(t, ts.URL, name), 64)
		require.NoError(t, err, name)
		return v
	}
	const prompt = "the quick brown fox jumps over the lazy dog"
	var processed, cached, predicted float64
	for i, n := range []int{1, 8} {
		code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": prompt, "n_predict": n, "ignore_eos": true})
		require.Equal(t, http.StatusOK, code, "%v", out)
		tm := out["timings"].(map[string]any)
		processed += tm["prompt_n"].(float64)
		cached += tm["cache_n"].(float64)
		predicted += tm["predicted_n"].(float64)
		if n == 1 {
			assert.Zero(t, tm["predicted_per_second"], "one token takes no decode step")
			assert.Zero(t, tm["predicted_per_token_ms"])
		} else {
			assert.InDelta(t, 1e3/tm["predicted_ms"].(float64)*float64(n-1), tm["predicted_per_second"], 1e-6)
		}
		if i == 1 {
			assert.Positive(t, tm["cache_n"], "the second request reuses the first's prompt")
		}
	}
	assert.Equal(t, processed, num("prompt_tokens_total"))
	assert.Equal(t, cached, num("prompt_tokens_cached_total"))
	assert.Equal(t, predicted, num("tokens_predicted_total"))
	assert.Zero(t, num("predicted_tokens_seconds"), "the window since the previous scrape is empty")
	assert.Equal(t, predicted, num("tokens_predicted_total"), "counters do not reset")
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 8, "ignore_eos": true})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Positive(t, num("predicted_tokens_seconds"), "the first scrape after a generation reports it")
	assert.Zero(t, num("predicted_tokens_seconds"), "and the next one an empty window")
	for _, name := range []string{"spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total"} {
		assert.Zero(t, num(name))
	}
}
