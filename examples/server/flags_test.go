package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestFlagSpellings checks that every spelling of an option sets the same
// thing, with llama-server's meaning.
func TestFlagSpellings(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(t *testing.T, c *config)
	}{
		{[]string{"--temp", "0.3"}, func(t *testing.T, c *config) { assert.InDelta(t, 0.3, c.sampling.Temperature, 1e-6) }},
		{[]string{"--temperature", "0.3"}, func(t *testing.T, c *config) { assert.InDelta(t, 0.3, c.sampling.Temperature, 1e-6) }},
		{[]string{"--temp", "-2"}, func(t *testing.T, c *config) { assert.Zero(t, c.sampling.Temperature, "negative means greedy (0)") }},
		{[]string{"-s", "42"}, func(t *testing.T, c *config) { assert.EqualValues(t, 42, c.sampling.Seed) }},
		{[]string{"--seed", "-1"}, func(t *testing.T, c *config) { assert.EqualValues(t, llama.DefaultSeed, c.sampling.Seed) }},
		{[]string{"--top-k", "5"}, func(t *testing.T, c *config) { assert.Equal(t, 5, c.sampling.TopK) }},
		{[]string{"--top-p", "0.5", "--min-p", "0.1", "--typical-p", "0.9", "--top-n-sigma", "1.5"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 0.5, c.sampling.TopP, 1e-6)
			assert.InDelta(t, 0.1, c.sampling.MinP, 1e-6)
			assert.InDelta(t, 0.9, c.sampling.TypicalP, 1e-6)
			assert.InDelta(t, 1.5, c.sampling.TopNSigma, 1e-6)
		}},
		{[]string{"--typical", "0.8", "--top-nsigma", "2"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 0.8, c.sampling.TypicalP, 1e-6)
			assert.InDelta(t, 2, c.sampling.TopNSigma, 1e-6)
		}},
		{[]string{"--repeat-penalty", "1.1", "--repeat-last-n", "-1", "--presence-penalty", "0.2", "--frequency-penalty", "0.3"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 1.1, c.sampling.RepeatPenalty, 1e-6)
			assert.Equal(t, -1, c.sampling.RepeatLastN)
			assert.InDelta(t, 0.2, c.sampling.PresencePenalty, 1e-6)
			assert.InDelta(t, 0.3, c.sampling.FrequencyPenalty, 1e-6)
		}},
		{[]string{"--dry-multiplier", "0.8", "--dry-base", "2", "--dry-allowed-length", "3", "--dry-penalty-last-n", "100",
			"--dry-sequence-breaker", "x", "--dry-sequence-breaker", "y"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 0.8, c.sampling.DRYMultiplier, 1e-6)
			assert.InDelta(t, 2, c.sampling.DRYBase, 1e-6)
			assert.Equal(t, 3, c.sampling.DRYAllowedLength)
			assert.Equal(t, 100, c.sampling.DRYPenaltyLastN)
			assert.Equal(t, []string{"x", "y"}, c.sampling.DRYSequenceBreakers, "the first breaker replaces the defaults")
		}},
		{[]string{"--dry-base", "0.5"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 1.75, c.sampling.DRYBase, 1e-6, "below 1 keeps the default")
		}},
		{[]string{"--dry-sequence-breaker", "none"}, func(t *testing.T, c *config) {
			// No breakers at all, as llama.cpp: an empty list, since nil
			// would give DRY its default breakers.
			assert.NotNil(t, c.sampling.DRYSequenceBreakers)
			assert.Empty(t, c.sampling.DRYSequenceBreakers)
		}},
		{[]string{"--xtc-probability", "0.5", "--xtc-threshold", "0.2"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 0.5, c.sampling.XTCProbability, 1e-6)
			assert.InDelta(t, 0.2, c.sampling.XTCThreshold, 1e-6)
		}},
		{[]string{"--mirostat", "2", "--mirostat-lr", "0.2", "--mirostat-ent", "4"}, func(t *testing.T, c *config) {
			assert.Equal(t, 2, c.sampling.Mirostat)
			assert.InDelta(t, 0.2, c.sampling.MirostatEta, 1e-6)
			assert.InDelta(t, 4, c.sampling.MirostatTau, 1e-6)
		}},
		{[]string{"--dynatemp-range", "0.5", "--dynatemp-exp", "2"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 0.5, c.sampling.DynatempRange, 1e-6)
			assert.InDelta(t, 2, c.sampling.DynatempExponent, 1e-6)
		}},
		{[]string{"--samplers", "top_k;temperature"}, func(t *testing.T, c *config) { assert.Equal(t, []string{"top_k", "temperature"}, c.sampling.Samplers) }},
		{[]string{"--sampling-seq", "kt"}, func(t *testing.T, c *config) { assert.Equal(t, []string{"top_k", "temperature"}, c.sampling.Samplers) }},
		// As llama-server: what names no sampler is skipped, with a warning
		// at start (older llama.cpp's default list names tfs_z).
		{[]string{"--samplers", "top_k;tfs_z;typical_p;temperature"}, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"top_k", "temperature"}, c.sampling.Samplers)
			assert.Equal(t, []string{`no sampler is named "tfs_z": skipped`, `no sampler is named "typical_p": skipped`}, c.startupWarnings("unix"))
		}},
		{[]string{"--sampling-seq", "kqt"}, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"top_k", "temperature"}, c.sampling.Samplers)
			assert.Equal(t, []string{`no sampler is named "q": skipped`}, c.startupWarnings("unix"))
		}},
		{[]string{"--sampler-seq", "edm"}, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"penalties", "dry", "min_p"}, c.sampling.Samplers)
		}},
		{[]string{"-l", "15043+1.5", "--logit-bias", "2-inf"}, func(t *testing.T, c *config) {
			assert.InDelta(t, 1.5, c.sampling.LogitBias[15043], 1e-6)
			assert.True(t, math.IsInf(float64(c.sampling.LogitBias[2]), -1))
		}},
		{[]string{"--ignore-eos"}, func(t *testing.T, c *config) { assert.True(t, c.sampling.IgnoreEOS) }},
		{[]string{"--grammar", `root ::= "a"`}, func(t *testing.T, c *config) { assert.Equal(t, `root ::= "a"`, c.sampling.Grammar) }},
		{[]string{"-j", `{"type":"integer"}`}, func(t *testing.T, c *config) { assert.Contains(t, c.sampling.Grammar, "root") }},
		{[]string{"--json-schema", `{"type":"boolean"}`}, func(t *testing.T, c *config) { assert.Contains(t, c.sampling.Grammar, "root") }},
		{[]string{"-n", "7"}, func(t *testing.T, c *config) { assert.Equal(t, 7, c.opts.NPredict) }},
		{[]string{"--predict", "7"}, func(t *testing.T, c *config) { assert.Equal(t, 7, c.opts.NPredict) }},
		{[]string{"--n-predict", "7"}, func(t *testing.T, c *config) { assert.Equal(t, 7, c.opts.NPredict) }},
		{[]string{"--keep", "-1", "-r", "STOP"}, func(t *testing.T, c *config) {
			assert.Equal(t, -1, c.opts.NKeep)
			assert.Equal(t, []string{"STOP"}, c.opts.Stop)
		}},
		{[]string{"--no-cache-prompt"}, func(t *testing.T, c *config) { assert.True(t, c.opts.NoCachePrompt) }},
		{[]string{"-a", "b,a", "--alias", "c", "--tags", "x, y"}, func(t *testing.T, c *config) {
			assert.Equal(t, "a,b,c", c.opts.Alias, "sorted, as llama-server's set; the id is the first")
			assert.Equal(t, []string{"x", "y"}, c.opts.Tags)
		}},
		{[]string{"-cb"}, func(t *testing.T, c *config) {}},
		{[]string{"--cont-batching", "-nocb", "--no-cont-batching"}, func(t *testing.T, c *config) {}},
		{[]string{"--backend_sampling"}, func(t *testing.T, c *config) { assert.True(t, c.sampling.BackendSampling) }},
		{[]string{"-bs"}, func(t *testing.T, c *config) { assert.True(t, c.sampling.BackendSampling) }},
		{[]string{}, func(t *testing.T, c *config) {
			assert.False(t, c.sampling.BackendSampling, "requests do not ask by default, as llama-server")
			assert.Equal(t, engine.BackendSamplingAuto, c.opts.Engine.BackendSampling, "every request it can run where the model is on a GPU")
		}},
		{[]string{"--no-backend-sampling"}, func(t *testing.T, c *config) {
			assert.False(t, c.sampling.BackendSampling)
			assert.Equal(t, engine.BackendSamplingAsked, c.opts.Engine.BackendSampling, "only the requests that ask, on a GPU too")
		}},
		{[]string{"-kvu"}, func(t *testing.T, c *config) { assert.True(t, c.opts.Engine.Context.KVUnified) }},
		{[]string{"-np", "2", "--kv-unified"}, func(t *testing.T, c *config) { assert.True(t, c.opts.Engine.Context.KVUnified) }},
		{[]string{"-np", "2"}, func(t *testing.T, c *config) {
			assert.False(t, c.opts.Engine.Context.KVUnified, "unified only with auto slots")
		}},
		{[]string{"--no-kv-unified"}, func(t *testing.T, c *config) {
			assert.False(t, c.opts.Engine.Context.KVUnified)
			assert.Equal(t, 4, c.opts.Engine.Parallel)
		}},
		{[]string{"-np", "3", "--kv-unified-per-slot", "256"}, func(t *testing.T, c *config) { assert.Equal(t, 768, c.opts.Engine.Context.ContextSize) }},
		{[]string{"--context-shift"}, func(t *testing.T, c *config) { assert.True(t, c.opts.Engine.ContextShift) }},
		{[]string{"--context-shift", "--no-context-shift"}, func(t *testing.T, c *config) { assert.False(t, c.opts.Engine.ContextShift) }},
		{[]string{"--slots", "--no-slots"}, func(t *testing.T, c *config) { assert.False(t, c.opts.Slots) }},
		{[]string{"--no-jinja"}, func(t *testing.T, c *config) { assert.False(t, c.opts.Jinja) }},
		{[]string{"--no-models-autoload"}, func(t *testing.T, c *config) { assert.True(t, c.opts.NoModelsAutoload) }},
		{[]string{"--mlock"}, func(t *testing.T, c *config) { assert.Equal(t, llama.LoadMlock, c.opts.ModelOptions.Load) }},
		{[]string{"--no-mmap"}, func(t *testing.T, c *config) { assert.Equal(t, llama.LoadRead, c.opts.ModelOptions.Load) }},
		{[]string{"--mmap"}, func(t *testing.T, c *config) { assert.Equal(t, llama.LoadMmap, c.opts.ModelOptions.Load) }},
		{[]string{"-dio"}, func(t *testing.T, c *config) { assert.Equal(t, llama.LoadDirectIO, c.opts.ModelOptions.Load) }},
		{[]string{"-lm", "mmap+mlock"}, func(t *testing.T, c *config) { assert.Equal(t, llama.LoadMmapMlock, c.opts.ModelOptions.Load) }},
		{[]string{"-sm", "none", "-mg", "1", "-ts", "3,1"}, func(t *testing.T, c *config) {
			assert.Equal(t, llama.SplitNone, c.opts.ModelOptions.Split)
			assert.Equal(t, 1, c.opts.ModelOptions.MainGPU)
			assert.Equal(t, []float32{3, 1}, c.opts.ModelOptions.TensorSplit)
		}},
		{[]string{"-dev", "none"}, func(t *testing.T, c *config) { assert.True(t, c.opts.ModelOptions.CPUOnly) }},
		{[]string{"-ngl", "auto"}, func(t *testing.T, c *config) { assert.Zero(t, c.opts.ModelOptions.GPULayers, "every layer that fits") }},
		{[]string{"-ngl", "-1"}, func(t *testing.T, c *config) { assert.Zero(t, c.opts.ModelOptions.GPULayers) }},
		{[]string{"-ngl", "all"}, func(t *testing.T, c *config) {
			assert.Equal(t, math.MaxInt32, c.opts.ModelOptions.GPULayers, "every layer, whatever the memory")
		}},
		{[]string{"-ngl", "-2"}, func(t *testing.T, c *config) { assert.Equal(t, math.MaxInt32, c.opts.ModelOptions.GPULayers) }},
		{[]string{"-ngl", "0"}, func(t *testing.T, c *config) { assert.True(t, c.opts.ModelOptions.CPUOnly) }},
		{[]string{"--no-warmup"}, func(t *testing.T, c *config) { assert.True(t, c.opts.Engine.NoWarmup) }},
		{[]string{"--no-prefill-assistant"}, func(t *testing.T, c *config) { assert.True(t, c.opts.NoPrefillAssistant) }},
		{[]string{"--skip-chat-parsing"}, func(t *testing.T, c *config) { assert.True(t, c.opts.SkipChatParsing) }},
		{[]string{"--numa", "isolate"}, func(t *testing.T, c *config) { assert.Equal(t, llama.NUMAIsolate, c.numa) }},
		{[]string{"--numa", "distribute"}, func(t *testing.T, c *config) { assert.Equal(t, llama.NUMADistribute, c.numa) }},
		{[]string{"--sse-ping-interval", "5"}, func(t *testing.T, c *config) { assert.Equal(t, 5*time.Second, c.opts.SSEPing) }},
		{[]string{"--sse-ping-interval", "-1"}, func(t *testing.T, c *config) { assert.Negative(t, c.opts.SSEPing, "none") }},
		{[]string{"--sse-ping-interval", "0"}, func(t *testing.T, c *config) { assert.Negative(t, c.opts.SSEPing, "none, as llama-server") }},
		{[]string{"-nr", "--no-host"}, func(t *testing.T, c *config) {
			assert.True(t, c.opts.ModelOptions.NoRepack)
			assert.True(t, c.opts.ModelOptions.NoHost)
		}},
		{[]string{"-sps", "0.5"}, func(t *testing.T, c *config) { assert.Equal(t, 0.5, c.opts.Engine.SlotSimilarity) }},
		{[]string{"--slot-prompt-similarity", "0"}, func(t *testing.T, c *config) { assert.Negative(t, c.opts.Engine.SlotSimilarity, "off") }},
		{[]string{"--spec-default"}, func(t *testing.T, c *config) {
			sd := c.opts.Engine.Speculative
			assert.Equal(t, []string{"ngram-mod"}, sd.Types)
			assert.Equal(t, [3]int{24, 48, 64}, [3]int{sd.NgramModNMatch, sd.NgramModNMin, sd.NgramModNMax})
		}},
		{[]string{"--spec-ngram-mod-n-min", "0", "--spec-ngram-mod-n-max", "8", "--spec-ngram-mod-n-match", "3"}, func(t *testing.T, c *config) {
			sd := c.opts.Engine.Speculative
			assert.Equal(t, [3]int{3, -1, 8}, [3]int{sd.NgramModNMatch, sd.NgramModNMin, sd.NgramModNMax}, "n-min 0 is none")
		}},
		{[]string{"-lzm", "on"}, func(t *testing.T, c *config) { assert.Equal(t, llama.LazyOn, c.opts.ModelOptions.Lazy) }},
		{[]string{"--lazy-mode", "off"}, func(t *testing.T, c *config) { assert.Equal(t, llama.LazyOff, c.opts.ModelOptions.Lazy) }},
		{[]string{"--no-repack", "--repack"}, func(t *testing.T, c *config) { assert.False(t, c.opts.ModelOptions.NoRepack) }},
		{[]string{"--no-warmup", "--warmup"}, func(t *testing.T, c *config) { assert.False(t, c.opts.Engine.NoWarmup) }},
		{[]string{"-fit", "off"}, func(t *testing.T, c *config) {
			assert.True(t, c.opts.Engine.Context.Fit.Off)
			assert.True(t, c.opts.ModelOptions.Fit.Off)
		}},
		{[]string{"-fitt", "512,2048", "-fitc", "8192"}, func(t *testing.T, c *config) {
			assert.False(t, c.opts.Engine.Context.Fit.Off)
			assert.Equal(t, llama.FitOptions{Margin: 2048 << 20, MinContext: 8192}, c.opts.Engine.Context.Fit)
			assert.Equal(t, llama.FitOptions{Margin: 2048 << 20, MinContext: 8192}, c.opts.ModelOptions.Fit)
		}},
		{[]string{"--fit-target", "0"}, func(t *testing.T, c *config) { assert.EqualValues(t, 1, c.opts.ModelOptions.Fit.Margin, "no margin") }},
		{[]string{"--media-path", os.TempDir()}, func(t *testing.T, c *config) { assert.Equal(t, os.TempDir(), c.opts.MediaPath) }},
		{[]string{"--reasoning-budget", "64", "--reasoning-budget-message", "Done."}, func(t *testing.T, c *config) {
			assert.Equal(t, 64, c.opts.ReasoningBudget)
			assert.Equal(t, "Done.", c.opts.ReasoningBudgetMessage)
			assert.NotContains(t, c.opts.ChatTemplateKwargs, "enable_thinking")
		}},
		{[]string{"--reasoning-budget", "-1"}, func(t *testing.T, c *config) { assert.Zero(t, c.opts.ReasoningBudget, "no budget") }},
		{[]string{"--override-kv", "a.b=int:3,c=str:x", "--override-kv", "d=bool:true,e=float:0.5"}, func(t *testing.T, c *config) {
			assert.Equal(t, map[string]any{"a.b": int64(3), "c": "x", "d": true, "e": 0.5}, c.opts.ModelOptions.KVOverrides)
		}},
		{[]string{"--rope-scaling", "yarn", "--rope-scale", "4", "--rope-freq-base", "10000", "--yarn-orig-ctx", "2048", "--yarn-ext-factor", "0.5"}, func(t *testing.T, c *config) {
			e := c.opts.Engine
			assert.Equal(t, llama.RopeScalingYaRN, e.Context.RopeScaling)
			assert.InDelta(t, 0.25, e.Context.RopeFreqScale, 1e-6)
			assert.InDelta(t, 10000, e.Context.RopeFreqBase, 1e-3)
			assert.Equal(t, 2048, e.Context.YarnOrigCtx)
			require.NotNil(t, e.Context.YarnExtFactor)
			assert.InDelta(t, 0.5, *e.Context.YarnExtFactor, 1e-6)
		}},
		{[]string{"-nkvo", "--no-op-offload"}, func(t *testing.T, c *config) {
			assert.True(t, c.opts.Engine.Context.NoOffloadKQV)
			assert.True(t, c.opts.Engine.Context.NoOpOffload)
		}},
		{[]string{"-t", "0", "-tb", "-1"}, func(t *testing.T, c *config) {
			assert.Equal(t, runtime.NumCPU(), c.opts.Engine.Context.Threads)
			assert.Equal(t, runtime.NumCPU(), c.opts.Engine.Context.ThreadsBatch)
		}},
		{[]string{"--reasoning", "off", "--reasoning-effort", "high", "--chat-template-kwargs", `{"x": 1}`}, func(t *testing.T, c *config) {
			assert.Equal(t, map[string]any{"enable_thinking": false, "reasoning_effort": "high", "x": float64(1)}, c.opts.ChatTemplateKwargs)
		}},
		{[]string{"-rea", "on", "--reasoning", "auto"}, func(t *testing.T, c *config) { assert.NotContains(t, c.opts.ChatTemplateKwargs, "enable_thinking") }},
		{[]string{"--reasoning-format", "deepseek-legacy"}, func(t *testing.T, c *config) { assert.Equal(t, "deepseek-legacy", c.opts.ReasoningFormat) }},
		{[]string{"--cors-origins", "localhost", "--cors-methods", "GET", "--cors-headers", "X-A", "--no-cors-credentials"}, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"localhost"}, c.opts.CORSOrigins)
			assert.Equal(t, "GET", c.opts.CORSMethods)
			assert.Equal(t, "X-A", c.opts.CORSHeaders)
			assert.True(t, c.opts.NoCORSCredentials)
		}},
		{[]string{"--allowed-hosts", "box.lan, *.example.com", "--ui-mcp-proxy", "--cors-proxy-allow-private"}, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"box.lan", "*.example.com"}, c.opts.AllowedHosts)
			assert.True(t, c.opts.Tools.CORSProxy)
			assert.True(t, c.opts.Tools.CORSProxyAllowPrivate)
		}},
		{[]string{"--ui-mcp-proxy"}, func(t *testing.T, c *config) {
			assert.Nil(t, c.opts.AllowedHosts, "loopback names only by default")
			assert.False(t, c.opts.Tools.CORSProxyAllowPrivate, "public addresses only by default")
		}},
		{[]string{"--tools", "all"}, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"localhost"}, c.opts.CORSOrigins, "tools narrow CORS to localhost unless --cors-origins is given")
		}},
		{[]string{"--agent", "--cors-origins", "*"}, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"all"}, c.opts.Tools.Enabled)
			assert.True(t, c.opts.Tools.CORSProxy)
			assert.Equal(t, []string{"*"}, c.opts.CORSOrigins)
		}},
		{[]string{"-hf", "org/model:Q8_0", "-hff", "f.gguf", "-hft", "tok", "--offline"}, func(t *testing.T, c *config) {
			assert.Equal(t, "org/model:Q8_0", c.hf.Repo)
			assert.Equal(t, "f.gguf", c.hf.File)
			assert.Equal(t, "tok", c.hf.Token)
			assert.True(t, c.hf.Offline)
		}},
		{[]string{"-mu", "http://x/m.gguf"}, func(t *testing.T, c *config) { assert.Equal(t, "http://x/m.gguf", c.modelURL) }},
		{[]string{"--sleep-idle-seconds", "-1"}, func(t *testing.T, c *config) { assert.Zero(t, c.opts.SleepIdleSeconds) }},
		{[]string{"--lora", "a.gguf", "--lora-init-without-apply"}, func(t *testing.T, c *config) {
			assert.Equal(t, []engine.AdapterSpec{{Path: "a.gguf", Scale: 0}}, c.opts.Engine.Adapters)
		}},
		{[]string{"--control-vector-layer-range", "1", "5", "--threads-http", "8", "--control-vector", "a.gguf,b.gguf", "--control-vector-scaled", "c.gguf:-0.5"}, func(t *testing.T, c *config) {
			e := c.opts.Engine
			assert.Equal(t, []llama.ControlVectorFile{{Path: "a.gguf", Scale: 1}, {Path: "b.gguf", Scale: 1}, {Path: "c.gguf", Scale: -0.5}}, e.ControlVectors)
			assert.Equal(t, [2]int{1, 5}, [2]int{e.ControlVectorStart, e.ControlVectorEnd})
		}},
		// The compute threads: -C and -Cr add up (the mask's last digit is
		// CPUs 0-3), --poll 0 is no polling, and the -batch forms start
		// from the plain ones.
		{[]string{"--prio", "2", "--poll", "0", "-C", "0x30", "-Cr", "0-1", "--cpu-strict", "1"}, func(t *testing.T, c *config) {
			e := c.opts.Engine
			assert.Equal(t, llama.ThreadPoolOptions{Priority: llama.PriorityHigh, Poll: -1, CPUs: []int{0, 1, 4, 5}, StrictCPU: true}, e.Context.ThreadPool)
			assert.Nil(t, e.Context.ThreadPoolBatch)
		}},
		{[]string{"--poll", "20", "-Cr", "2-", "--prio-batch", "-1", "-Cb", "1", "--poll-batch", "1", "--cpu-strict-batch", "1"}, func(t *testing.T, c *config) {
			e := c.opts.Engine
			assert.Equal(t, 20, e.Context.ThreadPool.Poll)
			assert.Len(t, e.Context.ThreadPool.CPUs, 510)
			require.NotNil(t, e.Context.ThreadPoolBatch)
			assert.Equal(t, llama.ThreadPoolOptions{Priority: llama.PriorityLow, Poll: 1, CPUs: []int{0}, StrictCPU: true}, *e.Context.ThreadPoolBatch)
		}},
		// The draft model's start from the target's.
		{[]string{"--prio", "1", "-Cr", "0-1", "--poll-draft", "0", "--prio-batch-draft", "2"}, func(t *testing.T, c *config) {
			sd := c.opts.Engine.Speculative
			require.NotNil(t, sd.DraftThreadPool)
			assert.Equal(t, llama.ThreadPoolOptions{Priority: llama.PriorityMedium, Poll: -1, CPUs: []int{0, 1}}, *sd.DraftThreadPool)
			require.NotNil(t, sd.DraftThreadPoolBatch)
			assert.Equal(t, llama.ThreadPoolOptions{Priority: llama.PriorityHigh, Poll: -1, CPUs: []int{0, 1}}, *sd.DraftThreadPoolBatch)
		}},
		{[]string{"-t", "2"}, func(t *testing.T, c *config) {
			assert.Nil(t, c.opts.Engine.Speculative.DraftThreadPool)
			assert.Zero(t, c.opts.Engine.Context.ThreadPool)
			assert.Nil(t, c.opts.Engine.Context.ThreadPoolBatch)
		}},
		{[]string{"--port=9090"}, func(t *testing.T, c *config) { assert.Equal(t, 9090, c.port) }},
		{[]string{"--spm-infill"}, func(t *testing.T, c *config) { assert.True(t, c.opts.SPMInfill) }},
		{[]string{"--embd-normalize", "-1"}, func(t *testing.T, c *config) {
			require.NotNil(t, c.opts.EmbdNormalize)
			assert.Equal(t, -1, *c.opts.EmbdNormalize)
		}},
		{[]string{"-sp"}, func(t *testing.T, c *config) { assert.True(t, c.opts.Engine.Special) }},
		{[]string{"--reasoning-budget", "0"}, func(t *testing.T, c *config) {
			assert.Equal(t, false, c.opts.ChatTemplateKwargs["enable_thinking"])
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := parseFlags(append([]string{"-m", "x.gguf"}, tc.args...), noEnv, io.Discard)
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

// TestFlagDefaults checks llama-server's defaults.
func TestFlagDefaults(t *testing.T) {
	c, err := parseFlags(nil, noEnv, io.Discard)
	require.NoError(t, err, "no model at all is router mode with no models")
	assert.Empty(t, c.opts.Model)
	assert.Equal(t, sampling.Defaults(), *c.opts.Sampling)
	assert.Equal(t, []string{"localhost"}, c.opts.CORSOrigins, "without a key, loopback origins only (llama-server: *)")
	assert.Equal(t, 4, c.opts.Engine.Parallel)
	assert.True(t, c.opts.Engine.Context.KVUnified)
	assert.Equal(t, -1, c.opts.NPredict)
	assert.True(t, c.opts.Slots)
	assert.False(t, c.opts.Metrics)
	assert.Equal(t, 8192, c.cacheRAMMiB)
	assert.Zero(t, c.opts.SleepIdleSeconds)
	assert.NoError(t, c.modelSource(context.Background(), io.Discard))
}

// TestFlagEnv checks the environment variables and that the command line
// wins over them.
func TestFlagEnv(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, c *config)
	}{
		{"value", map[string]string{"LLAMA_ARG_CTX_SIZE": "4096", "LLAMA_ARG_TOP_K": "7"}, nil, func(t *testing.T, c *config) {
			assert.Equal(t, 4096, c.opts.Engine.Context.ContextSize)
			assert.Equal(t, 7, c.sampling.TopK)
		}},
		{"command line wins", map[string]string{"LLAMA_ARG_CTX_SIZE": "4096"}, []string{"-c", "512"}, func(t *testing.T, c *config) {
			assert.Equal(t, 512, c.opts.Engine.Context.ContextSize)
		}},
		{"switch truthy", map[string]string{"LLAMA_ARG_ENDPOINT_METRICS": "1", "LLAMA_ARG_EMBEDDINGS": "true"}, nil, func(t *testing.T, c *config) {
			assert.True(t, c.opts.Metrics)
			assert.True(t, c.opts.Engine.Embedding)
		}},
		{"switch falsey ignored", map[string]string{"LLAMA_ARG_ENDPOINT_METRICS": "0"}, nil, func(t *testing.T, c *config) {
			assert.False(t, c.opts.Metrics)
		}},
		{"negatable on/off", map[string]string{"LLAMA_ARG_CONTEXT_SHIFT": "on", "LLAMA_ARG_ENDPOINT_SLOTS": "disabled"}, nil, func(t *testing.T, c *config) {
			assert.True(t, c.opts.Engine.ContextShift)
			assert.False(t, c.opts.Slots)
		}},
		{"LLAMA_ARG_NO_ form", map[string]string{"LLAMA_ARG_NO_ENDPOINT_SLOTS": "1", "LLAMA_ARG_NO_MMAP": "x"}, nil, func(t *testing.T, c *config) {
			assert.False(t, c.opts.Slots)
			assert.Equal(t, llama.LoadRead, c.opts.ModelOptions.Load)
		}},
		{"negative on command line wins", map[string]string{"LLAMA_ARG_CONTEXT_SHIFT": "1"}, []string{"--no-context-shift"}, func(t *testing.T, c *config) {
			assert.False(t, c.opts.Engine.ContextShift)
		}},
		{"api key and token", map[string]string{"LLAMA_API_KEY": "k1,k2", "HF_TOKEN": "t"}, nil, func(t *testing.T, c *config) {
			assert.Equal(t, []string{"k1", "k2"}, c.opts.APIKeys)
			assert.Equal(t, "t", c.hf.Token)
		}},
		{"model and alias", map[string]string{"LLAMA_ARG_MODEL": "m.gguf", "LLAMA_ARG_ALIAS": "one"}, nil, func(t *testing.T, c *config) {
			assert.Equal(t, "m.gguf", c.opts.Model)
			assert.Equal(t, "one", c.opts.Alias)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

// TestFlagErrors checks that bad values are errors (never panics) naming
// the option, as llama-server validates them.
func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	for _, args := range [][]string{
		{"--nope"}, {"-m"}, {"-c", "many"}, {"-c", "99999999999"}, {"-fa", "maybe"}, {"--temp", "hot"},
		{"--lora-scaled", "nocolon"}, {"--pooling", "max"}, {"--metrics=1"}, {"-np", "0"}, {"--seed", "-2"},
		{"--repeat-penalty", "0"}, {"--repeat-last-n", "-2"}, {"--presence-penalty", "inf"}, {"-l", "12"}, {"-l", "x+1"},
		{"-j", "{not json"}, {"--grammar-file", filepath.Join(dir, "none")},
		{"--sleep-idle-seconds", "0"}, {"--sleep-idle-seconds", "-5"}, {"--slot-save-path", file}, {"--media-path", file},
		{"--reasoning-format", "thinky"}, {"--reasoning", "sometimes"}, {"--reasoning-budget", "-2"}, {"--spec-type", "magic"},
		{"-ctk", "q3_k"}, {"--rope-scaling", "longrope"}, {"-sm", "diagonal"}, {"--numa", "all"}, {"-lm", "fast"}, {"-lzm", "sometimes"}, {"--spec-ngram-mod-n-match", "0"}, {"--spec-ngram-mod-n-max", "1025"},
		{"--prio", "4"}, {"--poll", "-1"}, {"--poll", "101"}, {"-C", "xyz"}, {"-Cr", "5-1"}, {"-Cr", "0-512"}, {"--prio-batch", "-2"}, {"--override-kv", "a=int"}, {"--override-kv", "a=date:1"},
		{"--chat-template-kwargs", "[1]"}, {"--control-vector-layer-range", "1"}, {"--api-key-file", filepath.Join(dir, "none")},
		{"-ncmoe", "-1"}, {"--fit", "maybe"}, {"-fitt", "lots"}, {"-fitc", "-1"}, {"--log-colors", "rainbow"}, {"--kv-unified-per-slot", "x"},
	} {
		_, err := parseFlags(args, noEnv, io.Discard)
		if assert.Error(t, err, "%v", args) {
			assert.Contains(t, err.Error(), strings.SplitN(normalize(args[0]), "=", 2)[0], "the error names the option")
		}
	}
	for _, env := range []map[string]string{{"LLAMA_ARG_CTX_SIZE": "big"}, {"LLAMA_ARG_CONTEXT_SHIFT": "maybe"}} {
		_, err := parseFlags(nil, envOf(env), io.Discard)
		assert.Error(t, err, "%v", env)
	}
}

// TestModelSource checks -hf and its flags: the model is pulled before the
// server starts and served under the repo reference unless an alias is
// given; --offline with nothing in the cache fails.
func TestModelSource(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/stories": {Files: map[string][]byte{"stories260K-Q8_0.gguf": model, "other.gguf": model}},
	})
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("LLAMA_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "")
	for _, tc := range []struct {
		name        string
		args        []string
		env         map[string]string
		file, alias string
		err         string
	}{
		{name: "offline, empty cache", args: []string{"-hf", "tiny/stories", "--offline"}, err: "-hf tiny/stories"},
		{name: "repo and quant", args: []string{"-hf", "tiny/stories:Q8_0"}, file: "stories260K-Q8_0.gguf", alias: "tiny/stories:Q8_0"},
		{name: "file, alias kept", args: []string{"-hfr", "tiny/stories", "-hff", "other.gguf", "-a", "mine"}, file: "other.gguf", alias: "mine"},
		{name: "env, offline from the cache", env: map[string]string{"LLAMA_ARG_HF_REPO": "tiny/stories:Q8_0", "LLAMA_ARG_OFFLINE": "1"},
			file: "stories260K-Q8_0.gguf", alias: "tiny/stories:Q8_0"},
		{name: "no -hf: -m untouched", args: []string{"-m", "x.gguf"}, file: "x.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
			require.NoError(t, err)
			err = c.modelSource(context.Background(), io.Discard)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.file, filepath.Base(c.opts.Model))
			assert.Equal(t, tc.alias, c.opts.Alias)
		})
	}
}

// TestFlagHelp checks the --help groups, in llama-server's order.
func TestFlagHelp(t *testing.T) {
	var help bytes.Buffer
	_, err := parseFlags([]string{"--temp", "1", "-h"}, noEnv, &help)
	require.ErrorIs(t, err, errHelp)
	out := help.String()
	sections := []string{"----- common params -----", "----- sampling params -----", "----- speculative params -----", "----- example-specific params -----"}
	last := -1
	for _, s := range sections {
		i := strings.Index(out, s)
		require.Greater(t, i, last, "%s in order", s)
		last = i
	}
	common, sampling := out[:strings.Index(out, sections[1])], out[strings.Index(out, sections[1]):strings.Index(out, sections[2])]
	spec, specific := out[strings.Index(out, sections[2]):strings.Index(out, sections[3])], out[strings.Index(out, sections[3]):]
	assert.Contains(t, common, "-c, --ctx-size N")
	assert.Contains(t, common, "--mmap, --no-mmap")
	assert.Contains(t, sampling, "--temp, --temperature N")
	assert.Contains(t, sampling, "(env: LLAMA_ARG_TOP_K)")
	assert.Contains(t, spec, "--spec-draft-model, -md, --model-draft FNAME")
	assert.Contains(t, specific, "--host HOST")
	assert.Contains(t, specific, "-kvu, --kv-unified, -no-kvu, --no-kv-unified")
	assert.Contains(t, common, "--control-vector-layer-range START END")
	for _, a := range []string{"--usage", "--help"} {
		_, err := parseFlags([]string{a}, noEnv, io.Discard)
		assert.ErrorIs(t, err, errHelp)
	}
	var comp bytes.Buffer
	_, err = parseFlags([]string{"--completion-bash"}, noEnv, &comp)
	require.ErrorIs(t, err, errHelp)
	assert.Contains(t, comp.String(), "--ctx-size")
}

// TestFlagUI checks the web UI flags: they set the server's UI options.
func TestFlagUI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want server.Options
	}{
		{args: nil, want: server.Options{}},
		{args: []string{"--no-ui"}, want: server.Options{NoUI: true}},
		{args: []string{"--no-webui", "--webui"}, want: server.Options{}},
		{env: map[string]string{"LLAMA_ARG_UI": "0"}, want: server.Options{NoUI: true}},
		{args: []string{"--path", "/srv/ui"}, want: server.Options{UIPath: "/srv/ui"}},
		{env: map[string]string{"LLAMA_ARG_STATIC_PATH": "/srv/ui"}, want: server.Options{UIPath: "/srv/ui"}},
		{args: []string{"--ui-config", `{"theme":"dark"}`}, want: server.Options{UIConfig: `{"theme":"dark"}`}},
		{args: []string{"--webui-config-file", "ui.json"}, want: server.Options{UIConfigFile: "ui.json"}},
		{args: []string{"--ui-config", `{}`, "--ui-config-file", "ui.json"}, want: server.Options{UIConfigFile: "ui.json"}},
		{args: []string{"--ui-config-file", "ui.json", "--webui-config", `{"a":1}`}, want: server.Options{UIConfig: `{"a":1}`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
			require.NoError(t, err)
			got := server.Options{NoUI: c.opts.NoUI, UIPath: c.opts.UIPath, UIConfig: c.opts.UIConfig, UIConfigFile: c.opts.UIConfigFile}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestFlagTools checks the agent flags and their environment variables
// (server.ToolsOptions), and the Vertex AI variables (server.GCPOptions).
func TestFlagTools(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		tools server.ToolsOptions
		gcp   server.GCPOptions
		port  int
		cors  []string
		err   string
	}{
		{name: "nothing", port: 8080, cors: []string{"localhost"}},
		{name: "a key keeps llama-server's *", args: []string{"--api-key", "k"}, port: 8080, cors: []string{"*"}},
		{name: "a key and tools", args: []string{"--api-key", "k", "--tools", "read_file"}, tools: server.ToolsOptions{Enabled: []string{"read_file"}}, port: 8080, cors: []string{"localhost"}},
		{name: "explicit * without a key", args: []string{"--cors-origins", "*"}, port: 8080, cors: []string{"*"}},
		{name: "flags", args: []string{"--tools", "read_file, get_info", "--tools-runtime", "docker:busybox",
			"--mcp-servers-config", "/etc/mcp.json", "--mcp-servers-json", `{"mcpServers":{}}`, "--ui-mcp-proxy",
			"--tools-root", "/srv/work", "--tools-allow-cwd", "--tools-allow-runtime"},
			tools: server.ToolsOptions{Enabled: []string{"read_file", "get_info"}, Runtime: "docker:busybox",
				MCPServersConfig: "/etc/mcp.json", MCPServersJSON: `{"mcpServers":{}}`, CORSProxy: true,
				Root: "/srv/work", AllowClientCwd: true, AllowClientRuntime: true}, port: 8080, cors: []string{"localhost"}},
		{name: "environment", env: map[string]string{
			"LLAMA_ARG_TOOLS": "read_file, get_info", "LLAMA_ARG_TOOLS_RUNTIME": "docker:busybox",
			"LLAMA_ARG_MCP_SERVERS_CONFIG": "/etc/mcp.json", "LLAMA_ARG_MCP_SERVERS_JSON": `{"mcpServers":{}}`,
			"LLAMA_ARG_UI_MCP_PROXY": "1",
		}, tools: server.ToolsOptions{Enabled: []string{"read_file", "get_info"}, Runtime: "docker:busybox",
			MCPServersConfig: "/etc/mcp.json", MCPServersJSON: `{"mcpServers":{}}`, CORSProxy: true}, port: 8080, cors: []string{"localhost"}},
		{name: "tools env", args: []string{"--tools", "get_info", "--tools-env", "PGHOST, AWS_PROFILE"},
			tools: server.ToolsOptions{Enabled: []string{"get_info"}, Env: []string{"PGHOST", "AWS_PROFILE"}}, port: 8080, cors: []string{"localhost"}},
		{name: "proxy off", env: map[string]string{"LLAMA_ARG_UI_MCP_PROXY": "0"}, port: 8080, cors: []string{"localhost"}},
		{name: "webui proxy, then off", args: []string{"--webui-mcp-proxy", "--no-ui-mcp-proxy"}, port: 8080, cors: []string{"localhost"}},
		{name: "mcp only narrows CORS", args: []string{"--mcp-servers-json", `{}`}, tools: server.ToolsOptions{MCPServersJSON: `{}`}, port: 8080, cors: []string{"localhost"}},
		{name: "agent", args: []string{"-ag"}, tools: server.ToolsOptions{Enabled: []string{"all"}, CORSProxy: true}, port: 8080, cors: []string{"localhost"}},
		{name: "agent off", args: []string{"--tools", "x", "--no-agent"}, port: 8080, cors: []string{"localhost"}},
		{name: "vertex", env: map[string]string{"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "7070", "AIP_PREDICT_ROUTE": "/p", "AIP_HEALTH_ROUTE": "/h"},
			args: []string{"--port", "9000"}, gcp: server.GCPOptions{Enabled: true, PredictRoute: "/p", HealthRoute: "/h"}, port: 7070, cors: []string{"localhost"}},
		{name: "vertex default port", env: map[string]string{"AIP_MODE": "PREDICTION"}, args: []string{"--port", "9000"},
			gcp: server.GCPOptions{Enabled: true}, port: 8080, cors: []string{"localhost"}},
		{name: "vertex bad port", env: map[string]string{"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": "x"}, err: "AIP_HTTP_PORT"},
		{name: "not vertex", env: map[string]string{"AIP_MODE": "other", "AIP_HTTP_PORT": "7070"}, port: 8080, cors: []string{"localhost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.tools, c.opts.Tools)
			assert.Equal(t, tc.gcp, c.opts.GCP)
			assert.Equal(t, tc.port, c.port)
			assert.Equal(t, tc.cors, c.opts.CORSOrigins)
		})
	}
}

// TestFlagSpeculative checks the speculative decoding flags: they set
// the engine's engine.SpeculativeOptions.
func TestFlagSpeculative(t *testing.T) {
	all := runtime.NumCPU()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want engine.SpeculativeOptions
		err  string
	}{
		{name: "off"},
		{name: "draft model", args: []string{"-md", "d.gguf", "--spec-type", "draft-simple"},
			want: engine.SpeculativeOptions{DraftModel: "d.gguf", Types: []string{"draft-simple"}}},
		{name: "long names", args: []string{"--model-draft", "d.gguf", "--spec-draft-model", "e.gguf"}, want: engine.SpeculativeOptions{DraftModel: "e.gguf"}},
		{name: "env", env: map[string]string{"LLAMA_ARG_SPEC_DRAFT_MODEL": "d.gguf", "LLAMA_ARG_SPEC_TYPE": "ngram-simple,draft-simple",
			"LLAMA_ARG_SPEC_DRAFT_N_MAX": "8", "LLAMA_ARG_SPEC_DRAFT_P_MIN": "0.5"},
			want: engine.SpeculativeOptions{DraftModel: "d.gguf", Types: []string{"ngram-simple", "draft-simple"}, NMax: 8, PMin: 0.5}},
		{name: "types append", args: []string{"--spec-type", "ngram-simple", "--spec-type", "ngram-map-k,ngram-cache"},
			want: engine.SpeculativeOptions{Types: []string{"ngram-simple", "ngram-map-k", "ngram-cache"}}},
		{name: "none clears", args: []string{"--spec-type", "ngram-simple", "--spec-type", "none"}},
		{name: "unknown type", args: []string{"--spec-type", "magic"}, err: "unknown speculative type"},
		{name: "preset", args: []string{"--spec-default"}, want: engine.SpeculativeOptions{Types: []string{"ngram-mod"}, NgramModNMatch: 24, NgramModNMin: 48, NgramModNMax: 64}},
		{name: "draft sizes", args: []string{"--spec-draft-n-max", "16", "--spec-draft-n-min", "2", "--draft-p-min", "0.75", "--spec-draft-p-split", "0.1"},
			want: engine.SpeculativeOptions{NMax: 16, NMin: 2, PMin: 0.75, PSplit: 0.1}},
		{name: "old p names", args: []string{"--spec-draft-p-min", "0.2", "--draft-p-split", "0.3"}, want: engine.SpeculativeOptions{PMin: 0.2, PSplit: 0.3}},
		{name: "negative n-max", args: []string{"--spec-draft-n-max", "-1"}, err: "negative"},
		{name: "threads", args: []string{"-td", "2", "-tbd", "3"}, want: engine.SpeculativeOptions{DraftThreads: 2, DraftThreadsBatch: 3}},
		{name: "threads long, <= 0 all CPUs", args: []string{"--threads-draft", "0", "--spec-draft-threads-batch", "-1"},
			want: engine.SpeculativeOptions{DraftThreads: all, DraftThreadsBatch: all}},
		{name: "cache types", args: []string{"-ctkd", "q8_0", "--cache-type-v-draft", "q4_0"}, want: engine.SpeculativeOptions{DraftTypeK: "q8_0", DraftTypeV: "q4_0"}},
		{name: "cache types long", args: []string{"--spec-draft-type-k", "f32", "-ctvd", "bf16"}, want: engine.SpeculativeOptions{DraftTypeK: "f32", DraftTypeV: "bf16"}},
		{name: "bad cache type", args: []string{"-ctkd", "q9"}, err: "-ctkd"},
		{name: "gpu layers", args: []string{"-ngld", "7"}, want: engine.SpeculativeOptions{DraftModelOptions: llama.ModelOptions{GPULayers: 7}}},
		{name: "gpu layers 0", args: []string{"--gpu-layers-draft", "0"}, want: engine.SpeculativeOptions{DraftModelOptions: llama.ModelOptions{CPUOnly: true}}},
		{name: "gpu layers all", args: []string{"--n-gpu-layers-draft", "3", "--spec-draft-ngl", "all"},
			want: engine.SpeculativeOptions{DraftModelOptions: llama.ModelOptions{GPULayers: math.MaxInt32}}},
		{name: "gpu layers auto", args: []string{"--n-gpu-layers-draft", "3", "--spec-draft-ngl", "auto"}},
		{name: "gpu layers env", env: map[string]string{"LLAMA_ARG_N_GPU_LAYERS_DRAFT": "5"}, want: engine.SpeculativeOptions{DraftModelOptions: llama.ModelOptions{GPULayers: 5}}},
		{name: "gpu layers bad", args: []string{"-ngld", "many"}, err: "-ngld"},
		{name: "draft device none", args: []string{"-devd", "none"}, want: engine.SpeculativeOptions{DraftModelOptions: llama.ModelOptions{CPUOnly: true}}},
		{name: "ngram sizes", args: []string{"--spec-ngram-simple-size-n", "4", "--spec-ngram-simple-size-m", "16", "--spec-ngram-map-k-size-n", "1", "--spec-ngram-map-k-size-m", "1024"},
			want: engine.SpeculativeOptions{NgramSimpleSizeN: 4, NgramSimpleSizeM: 16, NgramMapKSizeN: 1, NgramMapKSizeM: 1024}},
		{name: "ngram size 0", args: []string{"--spec-ngram-simple-size-n", "0"}, err: "out of range"},
		{name: "ngram size too big", args: []string{"--spec-ngram-map-k-size-m", "1025"}, err: "out of range"},
		{name: "ngram map k4v", args: []string{"--spec-ngram-map-k4v-size-n", "3", "--spec-ngram-map-k4v-size-m", "5", "--spec-ngram-map-k4v-min-hits", "65535", "--spec-ngram-map-k-min-hits", "4"},
			want: engine.SpeculativeOptions{NgramMapK4VSizeN: 3, NgramMapK4VSizeM: 5, NgramMapK4VMinHits: 65535}},
		{name: "draft tensor overrides", args: []string{"-otd", `blk\.0\.=CPU,output=CPU`, "-cmoed", "--spec-draft-n-cpu-moe", "1"},
			want: engine.SpeculativeOptions{DraftModelOptions: llama.ModelOptions{TensorBufferOverrides: []llama.TensorBufferOverride{
				{Pattern: `blk\.0\.`, BufferType: "CPU"}, {Pattern: "output", BufferType: "CPU"},
				{Pattern: ffnExpsPattern, BufferType: "CPU"}, {Pattern: `blk\.0` + ffnExpsPattern, BufferType: "CPU"}}}}},
		{name: "draft tensor override bad", args: []string{"--override-tensor-draft", "nothing"}, err: "invalid tensor buffer type override"},
		{name: "removed --draft-max", args: []string{"--draft-max", "16"}, err: "the argument has been removed. use --spec-draft-n-max or --spec-ngram-mod-n-max"},
		{name: "removed --draft-min", args: []string{"--draft-n-min", "2"}, err: "use --spec-draft-n-min"},
		{name: "removed in the environment", env: map[string]string{"LLAMA_ARG_DRAFT_MAX": "8"}, err: "has been removed"},
		{name: "removed ngram sizes", args: []string{"--spec-ngram-size-n", "3"}, err: "use the respective --spec-ngram-*-size-n"},
		{name: "removed ngram hits", args: []string{"--spec-ngram-min-hits", "3"}, err: "use the respective --spec-ngram-*-min-hits"},
		{name: "ngram min hits 0", args: []string{"--spec-ngram-map-k4v-min-hits", "0"}, err: "out of range"},
		{name: "simple min hits 0", args: []string{"--spec-ngram-simple-min-hits", "0"}, err: "out of range"},
		{name: "map-k min hits too big", args: []string{"--spec-ngram-map-k-min-hits", "65536"}, err: "out of range"},
		{name: "lookup caches", args: []string{"-lcs", "s.bin", "--lookup-cache-dynamic", "d.bin"}, want: engine.SpeculativeOptions{LookupCacheStatic: "s.bin", LookupCacheDynamic: "d.bin"}},
		{name: "lookup caches long", args: []string{"--lookup-cache-static", "s.bin", "-lcd", "d.bin"}, want: engine.SpeculativeOptions{LookupCacheStatic: "s.bin", LookupCacheDynamic: "d.bin"}},
		{name: "no adaptation", args: []string{"--no-spec-adapt"}, want: engine.SpeculativeOptions{Adapt: llama.DraftAdapt{Off: true}}},
		{name: "adaptation again", args: []string{"--no-spec-adapt", "--spec-adapt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.opts.Engine.Speculative)
		})
	}
}

// TestFlagMultimodal checks the projector flags: they set
// server.MultimodalOptions.
func TestFlagMultimodal(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want server.MultimodalOptions
		err  string
	}{
		{name: "none"},
		{name: "projector", args: []string{"-mm", "p.gguf"}, want: server.MultimodalOptions{Projector: "p.gguf"}},
		{name: "long", args: []string{"--mmproj", "p.gguf", "--no-mmproj-offload", "--image-min-tokens", "64", "--image-max-tokens", "256"},
			want: server.MultimodalOptions{Projector: "p.gguf", CPUOnly: true, ImageMinTokens: 64, ImageMaxTokens: 256}},
		{name: "env", env: map[string]string{"LLAMA_ARG_MMPROJ": "p.gguf", "LLAMA_ARG_MMPROJ_OFFLOAD": "0", "LLAMA_ARG_IMAGE_MIN_TOKENS": "8", "LLAMA_ARG_IMAGE_MAX_TOKENS": "16"},
			want: server.MultimodalOptions{Projector: "p.gguf", CPUOnly: true, ImageMinTokens: 8, ImageMaxTokens: 16}},
		{name: "offload again", args: []string{"-mm", "p.gguf", "--no-mmproj-offload", "--mmproj-offload"}, want: server.MultimodalOptions{Projector: "p.gguf"}},
		{name: "device none", args: []string{"-mm", "p.gguf", "-mmdev", "none"}, want: server.MultimodalOptions{Projector: "p.gguf", CPUOnly: true}},
		{name: "no-mmproj clears", args: []string{"--no-mmproj", "-mm", "p.gguf", "--image-max-tokens", "9"}, want: server.MultimodalOptions{ImageMaxTokens: 9}},
		{name: "no-mmproj-auto env clears", env: map[string]string{"LLAMA_ARG_MMPROJ": "p.gguf", "LLAMA_ARG_MMPROJ_AUTO": "0"}},
		{name: "mmproj-auto keeps", args: []string{"-mm", "p.gguf", "--mmproj-auto"}, want: server.MultimodalOptions{Projector: "p.gguf"}},
		{name: "bad tokens", args: []string{"--image-min-tokens", "lots"}, err: "--image-min-tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.opts.Multimodal)
		})
	}
	// The projector reaches the server: a missing file stops it from starting.
	c, err := parseFlags([]string{"-m", testenv.Model(t, "stories260K.gguf"), "-c", "256", "-t", "1", "-np", "1",
		"-mm", filepath.Join(t.TempDir(), "missing-mmproj.gguf")}, noEnv, io.Discard)
	require.NoError(t, err)
	_, err = server.New(context.Background(), c.opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "projector")
}

// TestHandlerPrefixAndPath checks --api-prefix and --path through the
// real server (router mode with no model): the API moves under the
// prefix, and --path's files are served at "/" by the server.
func TestHandlerPrefixAndPath(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<!doctype html>home"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("file a"), 0o600))
	for _, tc := range []struct {
		args       []string
		path, want string
		code       int
	}{
		{nil, "/health", `"status"`, 200},
		{[]string{"--api-prefix", "/llm"}, "/llm/health", `"status"`, 200},
		{[]string{"--api-prefix", "/llm"}, "/health", "", 404},
		{[]string{"--path", "DIR"}, "/a.txt", "file a", 200},
		{[]string{"--path", "DIR"}, "/", "<!doctype html>home", 200},
		{[]string{"--path", "DIR"}, "/health", `"status"`, 200},
		{[]string{"--path", "DIR"}, "/missing.txt", "", 404},
		{[]string{"--path", "DIR", "--api-prefix", "/x/"}, "/x/a.txt", "file a", 200},
		{[]string{"--path", "DIR", "--no-ui"}, "/a.txt", "", 404},
	} {
		args := slices.Clone(tc.args)
		for i, a := range args {
			if a == "DIR" {
				args[i] = dir
			}
		}
		c, err := parseFlags(args, noEnv, io.Discard)
		require.NoError(t, err)
		srv, err := server.New(context.Background(), c.opts)
		require.NoError(t, err, "%v", tc.args)
		rec := httptest.NewRecorder()
		c.handler(srv.Handler()).ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		require.NoError(t, srv.Close())
		assert.Equal(t, tc.code, rec.Code, "%v %s", tc.args, tc.path)
		if tc.code == 200 {
			assert.Contains(t, rec.Body.String(), tc.want, "%v %s", tc.args, tc.path)
		}
	}
	// A --path that is not a folder stops the server from starting.
	c, err := parseFlags([]string{"--path", filepath.Join(dir, "a.txt")}, noEnv, io.Discard)
	require.NoError(t, err)
	_, err = server.New(context.Background(), c.opts)
	assert.ErrorContains(t, err, "not a folder")
}

// TestServeSpeculative runs the server from speculative decoding flags and
// checks that a completion was drafted (timings.draft_n), and that the
// types the engine does not run stop it from starting.
func TestServeSpeculative(t *testing.T) {
	model := testenv.Model(t, "stories260K.gguf")
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "draft model", args: []string{"-md", model, "--spec-type", "draft-simple", "--spec-draft-n-max", "4", "-td", "1", "-tbd", "1", "-devd", "none", "-ctkd", "f16"}},
		{name: "ngram-simple", args: []string{"--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"}},
		{name: "ngram-map-k", args: []string{"--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "3", "--spec-ngram-map-k-size-m", "8"}},
		{name: "ngram-mod", args: []string{"--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "3", "--spec-ngram-mod-n-min", "1", "--spec-ngram-mod-n-max", "8"}},
		{name: "ngram-map-k4v", args: []string{"--spec-type", "ngram-map-k4v", "--spec-ngram-map-k4v-size-n", "2", "--spec-ngram-map-k4v-size-m", "8", "--spec-ngram-map-k4v-min-hits", "2"}},
		{name: "not run by the engine", args: []string{"--spec-type", "draft-mtp"}, err: "draft-mtp"},
		{name: "draft tensor overrides reach the draft model", args: []string{"-md", model, "--spec-type", "draft-simple", "-otd", "ffn=VRAM"}, err: `unknown buffer type "VRAM"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-m", model, "-c", "512", "-np", "1", "-t", "1", "-tb", "1", "-ngl", "0"}, tc.args...)
			c, err := parseFlags(args, noEnv, io.Discard)
			require.NoError(t, err)
			srv, err := server.New(context.Background(), c.opts)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			defer srv.Close()
			h := c.handler(srv.Handler())
			complete := func(prompt string, n int) (string, int) {
				rec := httptest.NewRecorder()
				body := `{"prompt":` + strconv.Quote(prompt) + `,"n_predict":` + strconv.Itoa(n) + `,"temperature":0}`
				h.ServeHTTP(rec, httptest.NewRequest("POST", "/completion", strings.NewReader(body)))
				require.Equal(t, 200, rec.Code, rec.Body.String())
				var r struct {
					Content string `json:"content"`
					Timings struct {
						DraftN int `json:"draft_n"`
					} `json:"timings"`
				}
				require.NoError(t, jsonDecode(rec.Body, &r))
				return r.Content, r.Timings.DraftN
			}
			// The n-gram drafters draft from the prompt: give them the
			// model's own continuation to find again.
			text, _ := complete("Once upon a time", 120)
			out, drafted := complete("Once upon a time"+text+" Once upon a time", 32)
			assert.NotEmpty(t, out)
			assert.Positive(t, drafted, "timings.draft_n")
		})
	}
}

// TestFlagPrefillChunk checks --prefill-chunk and --prefill-slowdown, this
// server's own options.
func TestFlagPrefillChunk(t *testing.T) {
	type prefill struct {
		chunk    int
		slowdown float64
	}
	for _, tc := range []struct {
		args []string
		want prefill
		err  string
	}{
		{nil, prefill{}, ""},
		{[]string{"--prefill-chunk", "64"}, prefill{chunk: 64}, ""},
		{[]string{"--prefill-chunk", "-1"}, prefill{chunk: -1}, ""},
		{[]string{"--prefill-chunk", "x"}, prefill{}, "--prefill-chunk"},
		{[]string{"--prefill-slowdown", "1.5"}, prefill{slowdown: 1.5}, ""},
		{[]string{"--prefill-slowdown", "-1"}, prefill{slowdown: -1}, ""},
		{[]string{"--prefill-slowdown", "fast"}, prefill{}, "--prefill-slowdown"},
		{[]string{"--prefill-chunk", "16", "--prefill-slowdown", "3"}, prefill{16, 3}, ""},
	} {
		c, err := parseFlags(tc.args, envOf(nil), io.Discard)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		e := c.opts.Engine
		assert.Equal(t, tc.want, prefill{e.PrefillChunk, e.PrefillSlowdown}, "%v", tc.args)
	}
}

// TestFlagSampleThreads checks --sample-threads, this server's own option.
func TestFlagSampleThreads(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		err  string
	}{
		{nil, 0, ""},
		{[]string{"--sample-threads", "2"}, 2, ""},
		{[]string{"--sample-threads", "-1"}, -1, ""},
		{[]string{"--sample-threads", "two"}, 0, "--sample-threads"},
	} {
		c, err := parseFlags(tc.args, envOf(nil), io.Discard)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.opts.Engine.SampleThreads, "%v", tc.args)
	}
}

// TestFlagDocsNoEffect keeps docs/server-flags.md's list of options
// "accepted with no effect" the options whose help says so: an option
// that comes to act leaves the list.
func TestFlagDocsNoEffect(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "docs", "server-flags.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "## llama-server options accepted with no effect")
	require.True(t, ok)
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(section, -1) {
		listed = append(listed, strings.Split(m[1], "/")...)
	}
	var marked []string
	for _, f := range flagTable(&config{}) {
		if strings.HasSuffix(f.help, "(accepted; no effect here)") {
			marked = append(marked, f.names...)
		}
	}
	slices.Sort(listed)
	slices.Sort(marked)
	assert.Equal(t, marked, listed)
}
