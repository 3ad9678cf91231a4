package server

// GET /metrics: the engine's counters in Prometheus text format, under
// llama-server's llamacpp: names, and under the vllm: names that Kubernetes
// gateways read (metrics_gateway.go).

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/x/llama/engine"
)

func handleMetrics(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.opts.Metrics {
			return notSupported("This server does not support metrics endpoint. Start it with `--metrics` (Options.Metrics)")
		}
		e, err := s.peek(r)
		if err != nil {
			return err
		}
		// The throughput gauges are averaged over the window since the
		// previous scrape, as llama-server's.
		m, prev := s.models.Scrape(e)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(s.started.Unix(), 10))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(metricsText(m, prev)))
		return nil
	}
}

// metricsText renders m in Prometheus text format with llama.cpp's names;
// the throughput gauges cover the window since the counters prev.
func metricsText(m, prev engine.Metrics) string {
	perSecond := func(n int64, secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(n) / secs
	}
	type item struct {
		name, help string
		v          float64
	}
	counters := []item{
		{"prompt_tokens_total", "Number of prompt tokens decoded, without those reused from the cache.", float64(m.PromptTokensTotal)},
		{"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache.", float64(m.PromptTokensCachedTotal)},
		{"prompt_seconds_total", "Time spent on prompts.", m.PromptSecondsTotal},
		{"tokens_predicted_total", "Number of tokens generated.", float64(m.TokensPredictedTotal)},
		{"tokens_predicted_seconds_total", "Time spent generating.", m.TokensPredictedSeconds},
		{"n_decode_total", "Number of llama_decode() calls.", float64(m.DecodeTotal)},
		{"n_tokens_max", "Longest sequence seen (prompt and generation).", float64(m.NTokensMax)},
		{"spec_decode_num_draft_tokens_total", "Speculative decoding: draft tokens.", float64(m.DraftTokensTotal)},
		{"spec_decode_num_accepted_tokens_total", "Speculative decoding: draft tokens accepted.", float64(m.DraftAcceptedTotal)},
		{"spec_decode_num_drafts_total", "Speculative decoding: verification steps.", float64(m.DraftsTotal)},
	}
	gauges := []item{
		{"prompt_tokens_seconds", "Prompt throughput in tokens/s since the previous scrape.",
			perSecond(m.PromptTokensTotal-prev.PromptTokensTotal, m.PromptSecondsTotal-prev.PromptSecondsTotal)},
		{"predicted_tokens_seconds", "Generation throughput in tokens/s since the previous scrape.",
			perSecond(m.TokensPredictedSteps-prev.TokensPredictedSteps, m.TokensPredictedSeconds-prev.TokensPredictedSeconds)},
		{"requests_processing", "Number of requests processing.", float64(m.RequestsProcessing)},
		{"requests_deferred", "Number of requests deferred.", float64(m.RequestsDeferred)},
		{"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call.", m.BusySlotsPerDecode},
		{"kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", m.KVCacheUsageRatio},
		{"kv_cache_tokens", "KV-cache tokens.", float64(m.KVCacheTokens)},
	}
	var sb strings.Builder
	write := func(kind string, items []item) {
		for _, it := range items {
			v := it.v
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			fmt.Fprintf(&sb, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %s\n",
				it.name, it.help, it.name, kind, it.name, strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	write("counter", counters)
	write("gauge", gauges)
	writeStepSeconds(&sb, m.Steps)
	writeSpecPerPos(&sb, m)
	writeGatewayMetrics(&sb, m, m.AdaptersChanged)
	return sb.String()
}

// writeStepSeconds adds llamacpp:step_seconds_total, the engine loop's
// time by phase (engine.StepTimes), one series per phase; the phases add
// up to the loop's time, and their steps are n_decode_total.
func writeStepSeconds(sb *strings.Builder, st engine.StepTimes) {
	const name = "llamacpp:step_seconds_total"
	fmt.Fprintf(sb, "# HELP %s Time of the engine loop by phase (idle, gather, start, batch, decode_submit, decode_wait, sample, emit, other).\n# TYPE %s counter\n", name, name)
	// The idle wait in progress is counted once it ends: the counters stay
	// still while nothing happens, and a sleeping server's snapshot matches
	// the last scrape before it slept, as llama-server's does.
	st.Phase[engine.PhaseIdle] -= st.Waiting
	for p, d := range st.Phase {
		fmt.Fprintf(sb, "%s{phase=%q} %s\n", name, engine.StepPhase(p).String(), strconv.FormatFloat(d.Seconds(), 'g', -1, 64))
	}
}
