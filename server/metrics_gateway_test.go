package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/gguf/gguftest"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape reads /metrics with Prometheus' own text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// gaugeOf returns the value of a family's single gauge, requiring the type.
func gaugeOf(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "metric %s missing", name)
	require.Equal(t, dto.MetricType_GAUGE, f.GetType(), name)
	require.Len(t, f.GetMetric(), 1, name)
	return f.GetMetric()[0].GetGauge().GetValue()
}

func labelsOf(t *testing.T, fams map[string]*dto.MetricFamily, name string) map[string]string {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "metric %s missing", name)
	out := map[string]string{}
	for _, l := range f.GetMetric()[0].GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// gatewayLoad posts /completion requests to a test server and scrapes its
// /metrics until they are answered.
type gatewayLoad struct {
	t       *testing.T
	url     string
	results chan int
}

func newGatewayLoad(t *testing.T, url string) *gatewayLoad {
	return &gatewayLoad{t: t, url: url, results: make(chan int, 64)}
}

// post sends body to /completion on its own goroutine.
func (g *gatewayLoad) post(body map[string]any) {
	go func() {
		data, _ := json.Marshal(body)
		resp, err := http.Post(g.url+"/completion", "application/json", bytes.NewReader(data))
		if err != nil {
			g.results <- 0
			return
		}
		resp.Body.Close()
		g.results <- resp.StatusCode
	}()
}

// scrapeUntilAnswered hands each /metrics reading to seen until n
// requests posted are answered, each with a 200.
func (g *gatewayLoad) scrapeUntilAnswered(n int, seen func(map[string]*dto.MetricFamily)) {
	for answered := 0; answered < n; {
		select {
		case code := <-g.results:
			assert.Equal(g.t, http.StatusOK, code)
			answered++
			continue
		default:
		}
		seen(scrape(g.t, g.url))
	}
}

// TestGatewayInferenceExtensionMetrics holds /metrics against the model
// server protocol of the Kubernetes Gateway API Inference Extension, as its
// endpoint picker reads it: queued and running requests, KV-cache
// utilization (0-1) and LoRA adapters, with the types it expects, under
// load.
func TestGatewayInferenceExtensionMetrics(t *testing.T) {
	lora := gguftest.StoriesLoRA(t)
	// Two slots; the adapter is loaded with a server-wide scale of 0, so
	// plain requests do not use it and a request asking for it must wait
	// until the running ones are done.
	_, hs := newTestServer(t, Options{Engine: engine.Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 2048},
		Adapters: []engine.AdapterSpec{{Path: lora, Scale: 0}}}})
	url := hs.URL

	idle := scrape(t, url)
	assert.Equal(t, 0.0, gaugeOf(t, idle, "vllm:num_requests_waiting"))
	assert.Equal(t, 0.0, gaugeOf(t, idle, "vllm:num_requests_running"))
	assert.Equal(t, 0.0, gaugeOf(t, idle, "vllm:kv_cache_usage_perc"))
	assert.Equal(t, map[string]string{"block_size": "1", "num_gpu_blocks": "2048", "enable_prefix_caching": "true"},
		labelsOf(t, idle, "vllm:cache_config_info"))
	assert.Equal(t, map[string]string{"max_lora": "1", "running_lora_adapters": "", "waiting_lora_adapters": ""},
		labelsOf(t, idle, "vllm:lora_requests_info"))
	assert.Greater(t, gaugeOf(t, idle, "vllm:lora_requests_info"), 1.7e9, "a Unix time")

	// Four long requests for two slots, then one asking for the adapter:
	// it waits until both slots are free.
	const n = 5
	load := newGatewayLoad(t, url)
	long := map[string]any{"prompt": "Once upon a time", "n_predict": 300, "ignore_eos": true, "cache_prompt": false}
	for range n - 1 {
		load.post(long)
	}
	// The adapter's request goes once both slots are seen busy, so it
	// queues behind the long ones whatever the machine's speed.
	loraPosted := false

	// Scrape until every request is answered; each reading must be
	// consistent, and the queue and the adapter must be seen waiting.
	var maxWaiting, maxRunning, maxKV float64
	sawLoRAWaiting := false
	load.scrapeUntilAnswered(n, func(f map[string]*dto.MetricFamily) {
		waiting, running := gaugeOf(t, f, "vllm:num_requests_waiting"), gaugeOf(t, f, "vllm:num_requests_running")
		kv := gaugeOf(t, f, "vllm:kv_cache_usage_perc")
		require.LessOrEqual(t, running, 2.0)
		require.LessOrEqual(t, waiting, float64(n))
		require.GreaterOrEqual(t, kv, 0.0)
		require.LessOrEqual(t, kv, 1.0)
		require.Equal(t, kv, gaugeOf(t, f, "vllm:gpu_cache_usage_perc"))
		require.InDelta(t, gaugeOf(t, f, "llamacpp:kv_cache_tokens")/2048, kv, 1e-9, "KV tokens over the context size")
		if waiting > 0 {
			// Requests queue while the slots are full, or while the
			// adapter's request waits for the running ones to end.
			assert.GreaterOrEqual(t, running, 1.0, "requests never wait beside an idle engine")
		}
		l := labelsOf(t, f, "vllm:lora_requests_info")
		assert.Equal(t, "1", l["max_lora"])
		if l["running_lora_adapters"] != "" {
			// Only the adapter's request uses it, and it runs alone.
			assert.Equal(t, "lora", l["running_lora_adapters"])
			assert.Equal(t, 1.0, running)
			assert.Empty(t, l["waiting_lora_adapters"])
		}
		sawLoRAWaiting = sawLoRAWaiting || l["waiting_lora_adapters"] == "lora"
		maxWaiting, maxRunning, maxKV = max(maxWaiting, waiting), max(maxRunning, running), max(maxKV, kv)
		if !loraPosted && running == 2 {
			loraPosted = true
			load.post(map[string]any{"prompt": "Lily", "n_predict": 4, "lora": []map[string]any{{"id": 0, "scale": 1}}})
		}
	})
	assert.GreaterOrEqual(t, maxWaiting, 1.0, "requests were seen queued")
	assert.Equal(t, 2.0, maxRunning)
	assert.True(t, sawLoRAWaiting, "the adapter was seen waiting")
	// Each long request holds over 300 tokens of its slot's 1024.
	assert.Greater(t, maxKV, 300.0/2048, "utilization followed the generated tokens")

	done := scrape(t, url)
	assert.Equal(t, 0.0, gaugeOf(t, done, "vllm:num_requests_waiting"))
	assert.Equal(t, 0.0, gaugeOf(t, done, "vllm:num_requests_running"))
}

// TestGatewayMetricsPreemption: with a shared KV cache too small for the
// requests together, preempted requests count as waiting, not running,
// and vllm:num_preemptions_total counts them.
func TestGatewayMetricsPreemption(t *testing.T) {
	_, hs := newTestServer(t, Options{Engine: engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}}})
	url := hs.URL
	counter := func(f map[string]*dto.MetricFamily) float64 {
		fam, ok := f["vllm:num_preemptions_total"]
		require.True(t, ok)
		require.Equal(t, dto.MetricType_COUNTER, fam.GetType())
		return fam.GetMetric()[0].GetCounter().GetValue()
	}
	assert.Zero(t, counter(scrape(t, url)))
	const n = 4
	load := newGatewayLoad(t, url)
	for range n {
		load.post(map[string]any{"prompt": "Once upon a time", "n_predict": 200, "ignore_eos": true})
	}
	sawWaiting := false
	load.scrapeUntilAnswered(n, func(f map[string]*dto.MetricFamily) {
		waiting, running := gaugeOf(t, f, "vllm:num_requests_waiting"), gaugeOf(t, f, "vllm:num_requests_running")
		require.LessOrEqual(t, waiting+running, float64(n))
		sawWaiting = sawWaiting || (waiting > 0 && counter(f) > 0)
	})
	assert.Positive(t, counter(scrape(t, url)), "four requests of 200 tokens on 256 shared cells")
	assert.True(t, sawWaiting, "a preempted request seen waiting")
}
