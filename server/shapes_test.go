package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// jsonShape flattens a JSON value into path -> kinds ("object", "array",
// "string", "number", "bool", "null"): array elements share the path
// "[]". Objects at an array path also record their key sets, so that an
// idle slot with keys a used one has is told apart ("keys" entries).
// slotParamKeys are, as recorded from llama-server, the keys of a slot's params in GET /slots and of
// default_generation_settings.params in GET /props: those llama-server
// v0.4.0 reports of a task's parameters "for metrics".
var slotParamKeys = []string{"seed", "temperature", "dynatemp_range", "dynatemp_exponent", "top_k", "top_p", "min_p",
	"top_n_sigma", "xtc_probability", "xtc_threshold", "typical_p", "repeat_last_n", "repeat_penalty", "presence_penalty",
	"frequency_penalty", "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "mirostat", "mirostat_tau",
	"mirostat_eta", "adaptive_target", "adaptive_decay", "max_tokens", "n_predict", "n_keep", "n_discard", "ignore_eos",
	"stream", "n_probs", "min_keep", "chat_format", "reasoning_format", "reasoning_in_content", "generation_prompt",
	"samplers", "speculative.types", "timings_per_token", "post_sampling_probs", "backend_sampling", "lora"}

// slotParamFullKeys are the keys a slot's params add with SlotsDebug
// (llama-server's full task parameters).
var slotParamFullKeys = []string{"dry_sequence_breakers", "stop", "logit_bias", "grammar", "grammar_lazy",
	"grammar_triggers", "preserved_tokens"}

func jsonShape(v any) map[string][]string {
	out := map[string][]string{}
	var walk func(path string, v any)
	add := func(path, kind string) {
		if !slices.Contains(out[path], kind) {
			out[path] = append(out[path], kind)
			sort.Strings(out[path])
		}
	}
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			add(path, "object")
			if strings.HasSuffix(path, "[]") {
				keys := make([]string, 0, len(x))
				for k := range x {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				add(path+" keys", strings.Join(keys, ","))
			}
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			add(path, "array")
			for _, e := range x {
				walk(path+"[]", e)
			}
		case string:
			add(path, "string")
		case float64:
			add(path, "number")
		case bool:
			add(path, "bool")
		case nil:
			add(path, "null")
		default:
			panic(fmt.Sprintf("unexpected JSON value %T", v))
		}
	}
	walk("", v)
	return out
}

// metricTypes reads Prometheus text: metric name -> its TYPE, for the
// metrics that have a HELP line, a TYPE line and a numeric sample.
func metricTypes(t *testing.T, text string) map[string]string {
	t.Helper()
	types, help, sampled := map[string]string{}, map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "#" && f[1] == "HELP":
			help[f[2]] = true
		case len(f) == 4 && f[0] == "#" && f[1] == "TYPE":
			types[f[2]] = f[3]
		case len(f) >= 2 && f[0] != "#":
			name, _, _ := strings.Cut(f[0], "{")
			var v float64
			_, err := fmt.Sscan(f[len(f)-1], &v)
			require.NoError(t, err, "sample of %s", name)
			sampled[name] = true
		}
	}
	for name := range types {
		assert.True(t, help[name], "%s has no HELP", name)
		assert.True(t, sampled[name], "%s has no sample", name)
	}
	return types
}

// ourMetricsBeyond are the metrics this server adds to llama-server's: the
// KV-cache figures llama-server had before the pinned version, and what
// the Gateway API Inference Extension reads (metrics_gateway.go).
// Prometheus clients take metrics they do not know without complaint.
var ourMetricsBeyond = map[string]bool{
	"llamacpp:kv_cache_usage_ratio": true, "llamacpp:kv_cache_tokens": true,
	"vllm:num_requests_waiting": true, "vllm:num_requests_running": true, "vllm:kv_cache_usage_perc": true,
	"vllm:gpu_cache_usage_perc": true, "vllm:lora_requests_info": true, "vllm:cache_config_info": true,
	"vllm:num_preemptions_total": true,
}

// TestShapesAsLlamaServer requires /v1/models, /models, /slots and
// /metrics to answer with the keys and value types llama-server's answers
// recorded in testdata/llamaserver/shapes.json have (see
// internal/cmd/record-shapes), before any request and after one, run with
// the same settings.
func TestShapesAsLlamaServer(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "llamaserver", "shapes.json"))
	require.NoError(t, err)
	type reading map[string]json.RawMessage
	var rec struct {
		Args    []string        `json:"args"`
		Request json.RawMessage `json:"request"`
		Idle    reading         `json:"idle"`
		After   reading         `json:"after"`
	}
	require.NoError(t, json.Unmarshal(raw, &rec))
	require.Equal(t, []string{"-t", "1", "-np", "2", "-c", "1024", "--metrics", "--slots"}, rec.Args,
		"the settings below are llama-server's args")
	_, ts := newTestServer(t, Options{Model: testenv.Model(t, "stories260K.gguf"), Slots: true, Metrics: true,
		Engine: engine.Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 1024, Threads: 1, ThreadsBatch: 1}}})
	get := func(path string) []byte {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
		return b
	}
	compare := func(when string, want reading) {
		for _, path := range []string{"/v1/models", "/models", "/slots"} {
			require.Contains(t, want, path)
			var w, g any
			require.NoError(t, json.Unmarshal(want[path], &w))
			require.NoError(t, json.Unmarshal(get(path), &g), path)
			assert.Equal(t, jsonShape(w), jsonShape(g), "%s %s", when, path)
		}
		var text string
		require.NoError(t, json.Unmarshal(want["/metrics"], &text))
		wantTypes, gotTypes := metricTypes(t, text), metricTypes(t, string(get("/metrics")))
		for name, typ := range wantTypes {
			assert.Equal(t, typ, gotTypes[name], "%s /metrics: %s", when, name)
		}
		for name := range gotTypes {
			assert.True(t, wantTypes[name] != "" || ourMetricsBeyond[name], "%s /metrics: %s is not llama-server's", when, name)
		}
	}
	compare("idle", rec.Idle)
	resp, err := http.Post(ts.URL+"/completion", "application/json", strings.NewReader(string(rec.Request)))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	compare("after", rec.After)
}

// TestSlotsShowTheirRequest: a slot's params in /slots are its last
// request's (llama-server's metrics key set), and with SlotsDebug
// (LLAMA_SERVER_SLOTS_DEBUG) also its prompt and the full parameters.
func TestSlotsShowTheirRequest(t *testing.T) {
	for _, debug := range []bool{false, true} {
		t.Run(fmt.Sprint("debug=", debug), func(t *testing.T) {
			_, ts := newTestServer(t, Options{SlotsDebug: debug, Engine: engine.Options{Parallel: 1}})
			code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 3,
				"temperature": 0.25, "top_k": 7, "stop": []string{"zzz"}, "seed": 9})
			require.Equal(t, http.StatusOK, code, "%v", out)
			code, data := call(t, "GET", ts.URL+"/slots", nil, nil)
			require.Equal(t, http.StatusOK, code)
			var slots []map[string]any
			require.NoError(t, json.Unmarshal(data, &slots))
			require.Len(t, slots, 1)
			sl := slots[0]
			p := sl["params"].(map[string]any)
			assert.Equal(t, float64(3), p["n_predict"])
			assert.Equal(t, float64(3), p["max_tokens"])
			assert.InDelta(t, 0.25, p["temperature"], 1e-6)
			assert.Equal(t, float64(7), p["top_k"])
			assert.Equal(t, float64(9), p["seed"])
			assert.Equal(t, sl["n_prompt_tokens"], out["tokens_evaluated"].(float64)+float64(3)-1, "the cache holds prompt and generation but the last token")
			if debug {
				assert.Equal(t, "Once upon a time", strings.TrimSpace(sl["prompt"].(string)))
				assert.Equal(t, []any{"zzz"}, p["stop"])
				assert.Len(t, p, len(slotParamKeys)+len(slotParamFullKeys))
				for _, k := range append(slices.Clone(slotParamKeys), slotParamFullKeys...) {
					assert.Contains(t, p, k)
				}
			} else {
				assert.NotContains(t, sl, "prompt")
				assert.NotContains(t, p, "stop")
				assert.Len(t, p, len(slotParamKeys))
			}
		})
	}
}
