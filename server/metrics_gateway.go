package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/engine"
)

// writeGatewayMetrics adds to /metrics what the Kubernetes Gateway API
// Inference Extension's endpoint picker reads from a model server (its
// "model server protocol"), under the names the picker looks for by
// default, which are vLLM's:
//
//   - vllm:num_requests_waiting: requests queued for a slot (gauge);
//   - vllm:num_requests_running: requests holding a slot (gauge);
//   - vllm:kv_cache_usage_perc, and its older name vllm:gpu_cache_usage_perc:
//     the share of the KV cache in use, 0 to 1 (gauge);
//   - vllm:lora_requests_info: LoRA adapters in labels (max_lora,
//     running_lora_adapters, waiting_lora_adapters), the value being the
//     time they last changed in Unix seconds (gauge), so that readings
//     repeat while nothing happens;
//   - vllm:cache_config_info: the prefix cache's geometry in labels. The
//     cache is kept per token, so block_size is 1 and num_gpu_blocks is the
//     context size in tokens (gauge of value 1).
//
// The same figures stay under their llamacpp: names.
func writeGatewayMetrics(sb *strings.Builder, m engine.Metrics, changed time.Time) {
	gauge := func(name, help, labels string, v float64) {
		fmt.Fprintf(sb, "# HELP %s %s\n# TYPE %s gauge\n%s%s %s\n",
			name, help, name, name, labels, strconv.FormatFloat(v, 'g', -1, 64))
	}
	kv := m.KVCacheUsageRatio
	if kv != kv || kv < 0 { // NaN
		kv = 0
	}
	kv = min(kv, 1)
	gauge("vllm:num_requests_waiting", "Requests waiting for a slot (Gateway API Inference Extension).", "", float64(m.RequestsDeferred))
	gauge("vllm:num_requests_running", "Requests being processed in a slot (Gateway API Inference Extension).", "", float64(m.RequestsProcessing))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 0 to 1 (Gateway API Inference Extension).", "", kv)
	gauge("vllm:gpu_cache_usage_perc", "KV-cache usage, 0 to 1 (older name of vllm:kv_cache_usage_perc).", "", kv)
	gauge("vllm:lora_requests_info", "LoRA adapters running and waiting; the value is when they last changed.",
		`{max_lora="`+strconv.Itoa(m.MaxAdapters)+
			`",running_lora_adapters="`+promLabel(strings.Join(m.RunningAdapters, ","))+
			`",waiting_lora_adapters="`+promLabel(strings.Join(m.WaitingAdapters, ","))+`"}`,
		float64(changed.UnixMilli())/1000)
	gauge("vllm:cache_config_info", "Prefix cache geometry: tokens per block and blocks.",
		`{block_size="1",num_gpu_blocks="`+strconv.FormatInt(m.KVCacheCapacity, 10)+`",enable_prefix_caching="true"}`, 1)
}

// promLabel escapes a label value for the Prometheus text format.
var promLabel = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace
