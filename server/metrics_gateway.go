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
//     context size in tokens (gauge of value 1);
//   - vllm:num_preemptions_total: requests preempted for want of the KV
//     memory the slots share (counter); a preempted request counts as
//     waiting, not running.
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
	gauge("vllm:num_requests_waiting", "Requests waiting for a slot or, preempted, for KV memory (Gateway API Inference Extension).", "", float64(m.RequestsDeferred+m.RequestsPreempted))
	gauge("vllm:num_requests_running", "Requests being processed in a slot (Gateway API Inference Extension).", "", float64(max(m.RequestsProcessing-m.RequestsPreempted, 0)))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 0 to 1 (Gateway API Inference Extension).", "", kv)
	gauge("vllm:gpu_cache_usage_perc", "KV-cache usage, 0 to 1 (older name of vllm:kv_cache_usage_perc).", "", kv)
	gauge("vllm:lora_requests_info", "LoRA adapters running and waiting; the value is when they last changed.",
		`{max_lora="`+strconv.Itoa(m.MaxAdapters)+
			`",running_lora_adapters="`+promLabel(strings.Join(m.RunningAdapters, ","))+
			`",waiting_lora_adapters="`+promLabel(strings.Join(m.WaitingAdapters, ","))+`"}`,
		float64(changed.UnixMilli())/1000)
	gauge("vllm:cache_config_info", "Prefix cache geometry: tokens per block and blocks.",
		`{block_size="1",num_gpu_blocks="`+strconv.FormatInt(m.KVCacheCapacity, 10)+`",enable_prefix_caching="true"}`, 1)
	fmt.Fprintf(sb, "# HELP %[1]s %[2]s\n# TYPE %[1]s counter\n%[1]s %[3]d\n", "vllm:num_preemptions_total",
		"Requests preempted because the KV memory the slots share (-kvu) was full.", m.PreemptionsTotal)
}

// promLabel escapes a label value for the Prometheus text format.
var promLabel = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace
