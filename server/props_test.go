package server

import (
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/sampling"
)

// TestPropsDefaultParams: default_generation_settings.params of GET /props
// has llama-server v0.4.0's keys (those of a slot's params), the server's
// sampling settings from the parameter table, and a fresh task's values
// for the rest whatever the server's flags (n_predict -1, n_keep 0, no
// streaming, the content-only chat format, reasoning format "none").
func TestPropsDefaultParams(t *testing.T) {
	custom := sampling.Defaults()
	custom.Temperature, custom.TopK, custom.DRYPenaltyLastN, custom.Samplers = 0.5, 7, 32, []string{"top_k", "temperature"}
	for _, tc := range []struct {
		name string
		opts Options
		want sampling.Params
	}{
		{"defaults", Options{}, sampling.Defaults()},
		{"flags", Options{Sampling: &custom, NPredict: 100, NKeep: 5, ReasoningFormat: "deepseek"}, custom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := newTestServer(t, tc.opts)
			code, props := callJSON(t, "GET", ts.URL+"/props", nil)
			require.Equal(t, 200, code)
			params := props["default_generation_settings"].(map[string]any)["params"].(map[string]any)
			keys := make([]string, 0, len(params))
			for k := range params {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			want := slices.Clone(slotParamKeys)
			sort.Strings(want)
			assert.Equal(t, want, keys)
			for i := range sampling.Table {
				sp := &sampling.Table[i]
				if sp.Name == "n_probs" {
					continue
				}
				assert.InDelta(t, sp.Value(&tc.want), params[sp.Name], 1e-6, sp.Name)
			}
			var samplers []string
			for _, s := range params["samplers"].([]any) {
				samplers = append(samplers, s.(string))
			}
			assert.Equal(t, tc.want.Samplers, samplers)
			for k, v := range map[string]any{"n_predict": -1.0, "max_tokens": -1.0, "n_keep": 0.0, "n_discard": 0.0,
				"n_probs": 0.0, "min_keep": 0.0, "stream": false, "chat_format": "Content-only", "reasoning_format": "none",
				"reasoning_in_content": false, "generation_prompt": "", "post_sampling_probs": false,
				"timings_per_token": false, "speculative.types": "none", "lora": []any{}, "seed": float64(tc.want.Seed)} {
				assert.Equal(t, v, params[k], k)
			}
		})
	}
}
