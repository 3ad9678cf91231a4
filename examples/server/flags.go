package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/hub"

	"github.com/x/llama"
	"github.com/x/llama/internal/jsonschema"
	"github.com/x/llama/sampling"
	"github.com/x/llama/server"
)

// config is what the command line (llama-server's flags) sets.
type config struct {
	// warnings are logged at start (startupWarnings): settings given
	// that were skipped.
	warnings []string
	opts     server.Options
	aliases  []string        // -a names, sorted
	sampling sampling.Params // the defaults of requests (--temp, --top-k...)
	host     string
	port     int
	timeout  time.Duration
	verbose  bool
	numa     llama.NUMAStrategy // --numa

	// Model sources other than a local file (see modelSource): -hf, -hff,
	// -hft, --offline; --model-url, --mmproj-url (--no-mmproj: no
	// projector, even with -mm); --spec-draft-hf; -dr/--docker-repo.
	hf                           hfFlags
	modelURL, mmprojURL, draftHF string
	noMMProj                     bool
	dockerRepo                   string
	corsOriginsExplicit          bool
	// The compute threads' placement (-C, --prio, --poll...) and the
	// batch threads' (-Cb, --prio-batch...).
	threads, threadsBatch threadFlags
	// The draft model's (-Cd, --prio-draft... and -Cbd, --prio-batch-draft...).
	threadsDraft, threadsDraftBatch threadFlags
	listDevices, version, cacheList bool
	sslKey, sslCert                 string // --ssl-key-file, --ssl-cert-file (PEM)
	grammarSet                      bool   // --grammar, --grammar-file, -j or -jf given
	jsonSchema                      string

	// Settings read by finish or by serve.
	dryBreakersSet bool
	kvUnifiedSet   bool
	loraNoApply    bool
	logFile        string
	logFormat      logFormat
	reusePort      bool
	// maxConns and maxConnsPerClient cap the listener's connections
	// (--max-connections, --max-connections-per-client; 0: no cap).
	maxConns, maxConnsPerClient int
	apiPrefix                   string
	cacheRAMMiB                 int // --cache-ram (-1: no limit, 0: off)
}

// Help sections, in llama-server's --help order.
type section int

const (
	secCommon section = iota
	secSampling
	secSpec
	secServer
)

var sectionNames = [...]string{"common params", "sampling params", "speculative params", "example-specific params"}

// A flag of llama-server: its spellings, the value it takes, its
// environment variable and what it sets.
type flagDef struct {
	names []string // positive spellings
	neg   []string // negative spellings (--no-x); set then gets "false"
	arg   string   // value hint; "" for switches
	arg2  string   // second value hint (two-value options)
	env   string
	sec   section
	help  string
	// set applies the value: the value given, "" for a plain switch,
	// "true"/"false" for a switch with negative forms, and both values
	// joined by a NUL for two-value options.
	set func(c *config, v string) error
}

// parseInt reads an integer as llama-server does (base 10, int32 range).
func parseInt(v string) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	return int(n), nil
}

func parseFloat(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", v)
	}
	return f, nil
}

func intTo(dst *int) func(*config, string) error {
	return func(_ *config, v string) error {
		n, err := parseInt(v)
		if err == nil {
			*dst = n
		}
		return err
	}
}

func floatTo(dst *float32) func(*config, string) error {
	return func(_ *config, v string) error {
		f, err := parseFloat(v)
		if err == nil {
			*dst = float32(f)
		}
		return err
	}
}

func strTo(dst *string) func(*config, string) error {
	return func(_ *config, v string) error { *dst = v; return nil }
}

// boolTo is for switches: a plain switch sets true, one with negative
// forms sets what it is given.
func boolTo(dst *bool) func(*config, string) error {
	return func(_ *config, v string) error { *dst = v != "false"; return nil }
}

// intIn accepts an integer in [lo, hi] and ignores it: llama-server tunes
// something with it that this server does not have.
func intIn(lo, hi int) func(*config, string) error {
	return func(_ *config, v string) error {
		n, err := parseInt(v)
		if err != nil {
			return err
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is out of range [%d, %d]", n, lo, hi)
		}
		return nil
	}
}

// anyInt accepts any integer and ignores it.
var anyInt = intIn(math.MinInt32, math.MaxInt32)

// anyFloat accepts any number and ignores it.
func anyFloat(_ *config, v string) error { _, err := parseFloat(v); return err }

// anyValue accepts any value (or switch) and ignores it.
func anyValue(*config, string) error { return nil }

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
}

func isTruthy(v string) bool { return v == "on" || v == "enabled" || v == "true" || v == "1" }
func isFalsey(v string) bool { return v == "off" || v == "disabled" || v == "false" || v == "0" }
func isAutoy(v string) bool  { return v == "auto" || v == "-1" }

// kvCacheTypes are the KV cache types llama-server accepts.
var kvCacheTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}

func cacheType(dst *string) func(*config, string) error {
	return func(_ *config, v string) error {
		if err := oneOf(v, kvCacheTypes...); err != nil {
			return err
		}
		*dst = v
		return nil
	}
}

// cpuMask checks an affinity mask (hex digits, optional 0x).
func cpuMask(_ *config, v string) error {
	s := strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X")
	if s == "" {
		return errors.New("invalid cpumask")
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return errors.New("invalid cpumask")
		}
	}
	return nil
}

// cpuRange checks an affinity range lo-hi.
func cpuRange(_ *config, v string) error {
	lo, hi, ok := strings.Cut(v, "-")
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if !ok || (lo != "" && err1 != nil) || (hi != "" && err2 != nil) || (lo != "" && hi != "" && a > b) {
		return errors.New("invalid range")
	}
	return nil
}

// intInTo sets *dst to an integer in [lo, hi].
func intInTo(lo, hi int, dst *int) func(*config, string) error {
	check := intIn(lo, hi)
	return func(c *config, v string) error {
		if err := check(c, v); err != nil {
			return err
		}
		*dst, _ = parseInt(v)
		return nil
	}
}

// namedTo sets *dst to the value names gives v; another v is an error
// saying it is not what (a description of the names).
func namedTo[T any](dst *T, what string, names map[string]T) func(*config, string) error {
	return func(_ *config, v string) error {
		x, ok := names[v]
		if !ok {
			return fmt.Errorf("%q is not %s", v, what)
		}
		*dst = x
		return nil
	}
}

// ngramModSize sets an ngram-mod draft size of 0 to 1024, where 0 is
// draft.NgramMod's negative (none), its zero being the default.
func ngramModSize(dst *int) func(*config, string) error {
	set := intInTo(0, 1024, dst)
	return func(c *config, v string) error {
		if err := set(c, v); err != nil {
			return err
		}
		if *dst == 0 {
			*dst = -1
		}
		return nil
	}
}

// threadsTo sets a thread count; <= 0 means every CPU, as llama-server.
func threadsTo(dst *int) func(*config, string) error {
	return func(_ *config, v string) error {
		n, err := parseInt(v)
		if err != nil {
			return err
		}
		if n <= 0 {
			n = runtime.NumCPU()
		}
		*dst = n
		return nil
	}
}

// gpuLayers reads -ngl's value (a number, auto or all) into mo: auto and
// -1 offload every layer that fits (the default: GPULayers 0, which
// --fit may lower), all and the numbers below -1 every layer whatever the
// memory, 0 none.
func gpuLayers(mo *llama.ModelOptions) func(*config, string) error {
	return func(_ *config, v string) error {
		switch v {
		case "auto":
			mo.GPULayers, mo.CPUOnly = 0, false
			return nil
		case "all":
			mo.GPULayers, mo.CPUOnly = math.MaxInt32, false
			return nil
		}
		n, err := parseInt(v)
		if err != nil {
			return err
		}
		switch {
		case n == -1:
			mo.GPULayers, mo.CPUOnly = 0, false
		case n < -1:
			mo.GPULayers, mo.CPUOnly = math.MaxInt32, false
		default:
			mo.GPULayers, mo.CPUOnly = n, n == 0
		}
		return nil
	}
}

// prio checks a priority: -1 (low) to 3 (realtime).
var prio = intIn(-1, 3)

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// flagTable lists every option llama-server (v0.4.0) takes, with its
// meaning here.
func flagTable(c *config) []flagDef {
	o := &c.opts
	e := &o.Engine
	mo := &o.ModelOptions
	sp := &c.sampling
	sd := &e.Speculative
	cm, sa, spc, sv := secCommon, secSampling, secSpec, secServer
	noEffect := " (accepted; no effect here)"
	return slices.Concat([]flagDef{
		// ---- common
		{names: []string{"-h", "--help", "--usage"}, sec: cm, help: "print this help and exit"},
		{names: []string{"--version"}, sec: cm, help: "print the version and exit", set: boolTo(&c.version)},
		{names: []string{"-cl", "--cache-list"}, sec: cm, help: "list the models in the download cache (-hf) and exit", set: boolTo(&c.cacheList)},
		{names: []string{"--completion-bash"}, sec: cm, help: "print a bash completion script and exit"},
		{names: []string{"-t", "--threads"}, arg: "N", env: "LLAMA_ARG_THREADS", sec: cm, help: "CPU threads for generation (default: all CPUs; <= 0: all)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if n <= 0 {
				n = runtime.NumCPU()
			}
			e.Context.Threads = n
			return err
		}},
		{names: []string{"-tb", "--threads-batch"}, arg: "N", sec: cm, help: "CPU threads for prompts and batches (default: --threads; <= 0: all)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if n <= 0 {
				n = runtime.NumCPU()
			}
			e.Context.ThreadsBatch = n
			return err
		}},
		{names: []string{"-C", "--cpu-mask"}, arg: "M", sec: cm, help: "CPU affinity mask of the compute threads in hex (the last digit for CPUs 0-3); adds to --cpu-range", set: c.threads.mask},
		{names: []string{"-Cr", "--cpu-range"}, arg: "lo-hi", sec: cm, help: "CPUs lo to hi for the compute threads; adds to --cpu-mask", set: c.threads.cpuRange},
		{names: []string{"--cpu-strict"}, arg: "<0|1>", sec: cm, help: "pin each compute thread to one CPU of the mask (default: 0)", set: c.threads.setStrict},
		{names: []string{"--prio"}, arg: "N", sec: cm, help: "process and compute thread priority: low(-1), normal(0), medium(1), high(2), realtime(3) (default: 0; 1-3 run the compute threads SCHED_FIFO and need CAP_SYS_NICE)", set: c.threads.setPrio},
		{names: []string{"--poll"}, arg: "<0...100>", sec: cm, help: "polling level of the compute threads waiting for work (0: no polling; default: 50)", set: c.threads.setPoll},
		{names: []string{"-Cb", "--cpu-mask-batch"}, arg: "M", sec: cm, help: "CPU affinity mask of the batch threads (default: --cpu-mask)", set: c.threadsBatch.mask},
		{names: []string{"-Crb", "--cpu-range-batch"}, arg: "lo-hi", sec: cm, help: "CPU range of the batch threads (default: --cpu-range)", set: c.threadsBatch.cpuRange},
		{names: []string{"--cpu-strict-batch"}, arg: "<0|1>", sec: cm, help: "strict CPU placement of the batch threads (default: --cpu-strict)", set: c.threadsBatch.setStrict},
		{names: []string{"--prio-batch"}, arg: "N", sec: cm, help: "priority of the batch threads (default: --prio)", set: c.threadsBatch.setPrio},
		{names: []string{"--poll-batch"}, arg: "<0|1>", sec: cm, help: "polling level of the batch threads (default: --poll)", set: c.threadsBatch.setPoll},
		{names: []string{"-c", "--ctx-size"}, arg: "N", env: "LLAMA_ARG_CTX_SIZE", sec: cm, help: "context size shared by the slots (default 0: the model's)", set: intTo(&e.Context.ContextSize)},
		{names: []string{"-n", "--predict", "--n-predict"}, arg: "N", env: "LLAMA_ARG_N_PREDICT", sec: cm, help: "most tokens a request generates (default -1: no limit)", set: intTo(&o.NPredict)},
		{names: []string{"--prefill-chunk"}, arg: "N", sec: cm, help: "while other slots generate, prompts of at most N tokens (weighted by position) go whole and longer ones in chunks (default 32; negative: no chunks, as llama-server; not a llama-server option)", set: intTo(&e.PrefillChunk)},
		{names: []string{"--prefill-slowdown"}, arg: "F", sec: cm, help: "a step that prefills a chunk beside generating slots takes about F times a step of theirs before the prefill, chunks sized from measured step times (default 2; negative: chunks of --prefill-chunk tokens; not a llama-server option)", set: func(_ *config, v string) error {
			f, err := parseFloat(v)
			if err == nil {
				e.PrefillSlowdown = f
			}
			return err
		}},
		{names: []string{"--sample-threads"}, arg: "N", sec: cm, help: "goroutines that sample the slots of one step at once, for cores the compute threads leave free (default 0: GOMAXPROCS where the model runs on a GPU, one after another elsewhere; 1: one after another; -1: GOMAXPROCS; not a llama-server option)", set: intTo(&e.SampleThreads)},
		{names: []string{"-b", "--batch-size"}, arg: "N", env: "LLAMA_ARG_BATCH", sec: cm, help: "logical batch size (default 2048)", set: intTo(&e.Context.BatchSize)},
		{names: []string{"-ub", "--ubatch-size"}, arg: "N", env: "LLAMA_ARG_UBATCH", sec: cm, help: "physical batch size (default 512)", set: intTo(&e.Context.UBatchSize)},
		{names: []string{"--keep"}, arg: "N", sec: cm, help: "default n_keep: prompt tokens kept by a context shift (default 0, -1: all)", set: intTo(&o.NKeep)},
		{names: []string{"--swa-full"}, env: "LLAMA_ARG_SWA_FULL", sec: cm, help: "full-size cache for sliding-window attention (default: a window-sized cache, with context checkpoints)", set: boolTo(&e.Context.SWAFull)},
		{names: []string{"-fa", "--flash-attn"}, arg: "[on|off|auto]", env: "LLAMA_ARG_FLASH_ATTN", sec: cm, help: "flash attention (default auto)", set: func(_ *config, v string) error {
			switch {
			case isTruthy(v):
				e.Context.FlashAttention = llama.FlashAttentionOn
			case isFalsey(v):
				e.Context.FlashAttention = llama.FlashAttentionOff
			case isAutoy(v):
				e.Context.FlashAttention = llama.FlashAttentionAuto
			default:
				return fmt.Errorf("%q is not on, off or auto", v)
			}
			return nil
		}},
		{names: []string{"--perf"}, neg: []string{"--no-perf"}, env: "LLAMA_ARG_PERF", sec: cm, help: "llama.cpp's internal performance timings" + noEffect, set: anyValue},
		{names: []string{"-e", "--escape"}, neg: []string{"--no-escape"}, sec: cm, help: "process escapes in prompts given on the command line" + noEffect, set: anyValue},
		{names: []string{"--pooling"}, arg: "{none,mean,cls,last,rank}", env: "LLAMA_ARG_POOLING", sec: sv, help: "embedding pooling (default: the model's)", set: func(_ *config, v string) error {
			if err := oneOf(v, "none", "mean", "cls", "last", "rank"); err != nil {
				return err
			}
			p, err := llama.ParsePoolingType(v)
			e.Context.Pooling = p
			return err
		}},
		{names: []string{"--rope-scaling"}, arg: "{none,linear,yarn}", env: "LLAMA_ARG_ROPE_SCALING_TYPE", sec: cm, help: "RoPE frequency scaling (default: the model's)", set: func(_ *config, v string) error {
			switch v {
			case "none":
				e.Context.RopeScaling = llama.RopeScalingNone
			case "linear":
				e.Context.RopeScaling = llama.RopeScalingLinear
			case "yarn":
				e.Context.RopeScaling = llama.RopeScalingYaRN
			default:
				return fmt.Errorf("%q is not none, linear or yarn", v)
			}
			return nil
		}},
		{names: []string{"--rope-scale"}, arg: "N", env: "LLAMA_ARG_ROPE_SCALE", sec: cm, help: "RoPE context scaling factor (sets --rope-freq-scale to 1/N)", set: func(_ *config, v string) error {
			f, err := parseFloat(v)
			if err == nil {
				e.Context.RopeFreqScale = float32(1 / f)
			}
			return err
		}},
		{names: []string{"--rope-freq-base"}, arg: "N", env: "LLAMA_ARG_ROPE_FREQ_BASE", sec: cm, help: "RoPE base frequency (default: the model's)", set: floatTo(&e.Context.RopeFreqBase)},
		{names: []string{"--rope-freq-scale"}, arg: "N", env: "LLAMA_ARG_ROPE_FREQ_SCALE", sec: cm, help: "RoPE frequency scaling factor (default: the model's)", set: floatTo(&e.Context.RopeFreqScale)},
		{names: []string{"--yarn-orig-ctx"}, arg: "N", env: "LLAMA_ARG_YARN_ORIG_CTX", sec: cm, help: "YaRN original context size (default 0: the model's)", set: intTo(&e.Context.YarnOrigCtx)},
		{names: []string{"--yarn-ext-factor"}, arg: "N", env: "LLAMA_ARG_YARN_EXT_FACTOR", sec: cm, help: "YaRN extrapolation mix factor (default: the model's)", set: floatPtr(&e.Context.YarnExtFactor)},
		{names: []string{"--yarn-attn-factor"}, arg: "N", env: "LLAMA_ARG_YARN_ATTN_FACTOR", sec: cm, help: "YaRN magnitude scaling (default: the model's)", set: floatPtr(&e.Context.YarnAttnFactor)},
		{names: []string{"--yarn-beta-slow"}, arg: "N", env: "LLAMA_ARG_YARN_BETA_SLOW", sec: cm, help: "YaRN high correction dimension (default: the model's)", set: floatPtr(&e.Context.YarnBetaSlow)},
		{names: []string{"--yarn-beta-fast"}, arg: "N", env: "LLAMA_ARG_YARN_BETA_FAST", sec: cm, help: "YaRN low correction dimension (default: the model's)", set: floatPtr(&e.Context.YarnBetaFast)},
		{names: []string{"-kvo", "--kv-offload"}, neg: []string{"-nkvo", "--no-kv-offload"}, env: "LLAMA_ARG_KV_OFFLOAD", sec: cm, help: "offload the KV cache to the GPU (default on)", set: func(_ *config, v string) error {
			e.Context.NoOffloadKQV = v == "false"
			return nil
		}},
		{names: []string{"--repack"}, neg: []string{"-nr", "--no-repack"}, env: "LLAMA_ARG_REPACK", sec: cm, help: "repack weights for the CPU's kernels (default on)", set: func(_ *config, v string) error {
			mo.NoRepack = v == "false"
			return nil
		}},
		{names: []string{"--no-host"}, env: "LLAMA_ARG_NO_HOST", sec: cm, help: "load GPU weights without a pinned host buffer, so that the extra buffer types can be used", set: boolTo(&mo.NoHost)},
		{names: []string{"-ctk", "--cache-type-k"}, arg: "TYPE", env: "LLAMA_ARG_CACHE_TYPE_K", sec: cm, help: "KV cache type for K: " + strings.Join(kvCacheTypes, ", ") + " (default f16)", set: cacheType(&e.Context.TypeK)},
		{names: []string{"-ctv", "--cache-type-v"}, arg: "TYPE", env: "LLAMA_ARG_CACHE_TYPE_V", sec: cm, help: "KV cache type for V (default f16)", set: cacheType(&e.Context.TypeV)},
		{names: []string{"-dt", "--defrag-thold"}, arg: "N", env: "LLAMA_ARG_DEFRAG_THOLD", sec: cm, help: "deprecated" + noEffect, set: anyValue},
		{names: []string{"--rpc"}, arg: "SERVERS", env: "LLAMA_ARG_RPC", sec: cm, help: "RPC workers (rpc-server, see llama-install -rpc) as host:port, comma-separated: the model's layers are split across them", set: func(_ *config, v string) error {
			mo.RPCServers = splitList(v)
			return nil
		}},
		{names: []string{"--mlock"}, env: "LLAMA_ARG_MLOCK", sec: cm, help: "read the model and lock it in RAM (--load-mode mlock)", set: func(*config, string) error { mo.Load = llama.LoadMlock; return nil }},
		{names: []string{"--mmap"}, neg: []string{"--no-mmap"}, env: "LLAMA_ARG_MMAP", sec: cm, help: "memory-map the model (--load-mode mmap; --no-mmap: none)", set: func(_ *config, v string) error {
			mo.Load = llama.LoadMmap
			if v == "false" {
				mo.Load = llama.LoadRead
			}
			return nil
		}},
		{names: []string{"-dio", "--direct-io"}, neg: []string{"-ndio", "--no-direct-io"}, env: "LLAMA_ARG_DIO", sec: cm, help: "read the model with direct I/O (--load-mode dio)", set: func(_ *config, v string) error {
			mo.Load = llama.LoadDirectIO
			if v == "false" {
				mo.Load = llama.LoadRead
			}
			return nil
		}},
		{names: []string{"-lm", "--load-mode"}, arg: "MODE", env: "LLAMA_ARG_LOAD_MODE", sec: cm, help: "how to load the model: auto, none, mmap, mlock, mmap+mlock, dio (default auto)", set: namedTo(&mo.Load, "a load mode", map[string]llama.LoadMode{"auto": llama.LoadAuto, "none": llama.LoadRead, "mmap": llama.LoadMmap, "mlock": llama.LoadMlock, "mmap+mlock": llama.LoadMmapMlock, "dio": llama.LoadDirectIO})},
		{names: []string{"-lzm", "--lazy-mode"}, arg: "MODE", env: "LLAMA_ARG_LAZY_MODE", sec: cm, help: "read the tensors the architecture marks (Gemma 4's per-layer embeddings) on demand: on (needs mmap), off, auto (those over 4 GiB; default)", set: namedTo(&mo.Lazy, "a lazy mode (on, off, auto)", map[string]llama.LazyMode{"auto": llama.LazyAuto, "on": llama.LazyOn, "off": llama.LazyOff})},
		{names: []string{"--numa"}, arg: "TYPE", env: "LLAMA_ARG_NUMA", sec: cm, help: "place the compute threads over NUMA nodes: distribute (spread over all), isolate (the starting node's CPUs), numactl (numactl's CPU map)", set: func(c *config, v string) error {
			switch v {
			case "distribute", "":
				c.numa = llama.NUMADistribute
			case "isolate":
				c.numa = llama.NUMAIsolate
			case "numactl":
				c.numa = llama.NUMANumactl
			default:
				return fmt.Errorf("%q is none of distribute, isolate, numactl", v)
			}
			return nil
		}},
		{names: []string{"-dev", "--device"}, arg: "<dev1,dev2,..>", env: "LLAMA_ARG_DEVICE", sec: cm, help: "devices to offload to, from --list-devices (none or CPU: the CPU only; an unknown name fails at start)", set: devicesTo(mo)},
		{names: []string{"--list-devices"}, sec: cm, help: "list the compute devices and exit", set: boolTo(&c.listDevices)},
		{names: []string{"-ot", "--override-tensor"}, arg: "<tensor name pattern>=<buffer type>,...", env: "LLAMA_ARG_OVERRIDE_TENSOR", sec: cm, help: "put the weights matching a pattern (a regular expression) in a buffer type, such as CPU; an unknown type fails at start with the list", set: tensorOverrides(mo)},
		{names: []string{"-cmoe", "--cpu-moe"}, env: "LLAMA_ARG_CPU_MOE", sec: cm, help: "keep the MoE experts on the CPU", set: cpuMoE(mo)},
		{names: []string{"-ncmoe", "--n-cpu-moe"}, arg: "N", env: "LLAMA_ARG_N_CPU_MOE", sec: cm, help: "keep the MoE experts of the first N layers on the CPU", set: cpuLayers(mo, ffnExpsPattern)},
		{names: []string{"-ncffn", "--n-cpu-ffn"}, arg: "N", env: "LLAMA_ARG_N_CPU_FFN", sec: cm, help: "keep the dense FFN of the first N layers on the CPU (for MoE experts: --n-cpu-moe)", set: cpuLayers(mo, ffnDensePattern)},
		{names: []string{"-ngl", "--gpu-layers", "--n-gpu-layers"}, arg: "N", env: "LLAMA_ARG_N_GPU_LAYERS", sec: cm, help: "layers on the GPU: a number, auto (as many as --fit finds room for) or all (default auto)", set: gpuLayers(mo)},
		{names: []string{"-sm", "--split-mode"}, arg: "{none,layer,row,tensor}", env: "LLAMA_ARG_SPLIT_MODE", sec: cm, help: "how to split the model across GPUs (default layer)", set: namedTo(&mo.Split, "none, layer, row or tensor", map[string]llama.SplitMode{"none": llama.SplitNone, "layer": llama.SplitLayer, "row": llama.SplitRow, "tensor": llama.SplitTensor})},
		{names: []string{"-ts", "--tensor-split"}, arg: "N0,N1,N2,...", env: "LLAMA_ARG_TENSOR_SPLIT", sec: cm, help: "share of the model per GPU", set: func(_ *config, v string) error {
			mo.TensorSplit = nil
			for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '/' }) {
				f, err := parseFloat(p)
				if err != nil {
					return err
				}
				mo.TensorSplit = append(mo.TensorSplit, float32(f))
			}
			return nil
		}},
		{names: []string{"-mg", "--main-gpu"}, arg: "INDEX", env: "LLAMA_ARG_MAIN_GPU", sec: cm, help: "the GPU for the whole model with --split-mode none (default 0)", set: intTo(&mo.MainGPU)},
		{names: []string{"-fit", "--fit"}, arg: "[on|off]", env: "LLAMA_ARG_FIT", sec: cm, help: "lower an unset -ngl (MoE experts to the CPU first), then an unset -c, until the model fits the free memory (default on)", set: func(_ *config, v string) error {
			if !isTruthy(v) && !isFalsey(v) {
				return fmt.Errorf("%q is not on or off", v)
			}
			e.Context.Fit.Off, mo.Fit.Off = isFalsey(v), isFalsey(v)
			return nil
		}},
		{names: []string{"-fitt", "--fit-target"}, arg: "MiB0,MiB1,MiB2,...", env: "LLAMA_ARG_FIT_TARGET", sec: cm, help: "memory --fit leaves free on the host and each GPU; the largest of a list applies to all (default 1024)", set: func(_ *config, v string) error {
			var most uint64
			for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '/' }) {
				n, err := strconv.ParseUint(p, 10, 64)
				if err != nil || n > 1<<40 {
					return fmt.Errorf("%q is not a number of MiB", p)
				}
				most = max(most, n)
			}
			e.Context.Fit.Margin = most << 20
			if most == 0 {
				e.Context.Fit.Margin = 1 // no margin (0 is the default's)
			}
			mo.Fit.Margin = e.Context.Fit.Margin
			return nil
		}},
		{names: []string{"-fitc", "--fit-ctx"}, arg: "N", env: "LLAMA_ARG_FIT_CTX", sec: cm, help: "smallest context per slot --fit may choose (default 4096)", set: func(_ *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 1<<24 {
				return fmt.Errorf("%q is not a context size", v)
			}
			e.Context.Fit.MinContext, mo.Fit.MinContext = n, n
			return nil
		}},
		{names: []string{"--check-tensors"}, sec: cm, help: "check the tensor data while loading", set: boolTo(&mo.CheckTensors)},
		{names: []string{"--override-kv"}, arg: "KEY=TYPE:VALUE,...", sec: cm, help: "override model metadata: types int, float, bool, str", set: func(_ *config, v string) error {
			for _, item := range splitList(v) {
				if err := overrideKV(mo, item); err != nil {
					return err
				}
			}
			return nil
		}},
		{names: []string{"--op-offload"}, neg: []string{"--no-op-offload"}, sec: cm, help: "offload host tensor operations to the device (default on)", set: func(_ *config, v string) error {
			e.Context.NoOpOffload = v == "false"
			return nil
		}},
		{names: []string{"--lora"}, arg: "FNAME", sec: cm, help: "LoRA adapters, comma-separated (scale 1)", set: func(_ *config, v string) error {
			for _, p := range splitList(v) {
				e.Adapters = append(e.Adapters, engine.AdapterSpec{Path: p, Scale: 1})
			}
			return nil
		}},
		{names: []string{"--lora-scaled"}, arg: "FNAME:SCALE,...", sec: cm, help: "LoRA adapters with their scales", set: func(_ *config, v string) error {
			for _, p := range splitList(v) {
				parts := strings.Split(p, ":")
				if len(parts) != 2 {
					return fmt.Errorf("%q is not FNAME:SCALE", p)
				}
				s, err := parseFloat(parts[1])
				if err != nil {
					return err
				}
				e.Adapters = append(e.Adapters, engine.AdapterSpec{Path: parts[0], Scale: float32(s)})
			}
			return nil
		}},
		{names: []string{"--control-vector"}, arg: "FNAME", sec: cm, help: "control vectors, comma-separated (scale 1; all summed, applied at start)", set: func(_ *config, v string) error {
			for _, p := range splitList(v) {
				e.ControlVectors = append(e.ControlVectors, llama.ControlVectorFile{Path: p, Scale: 1})
			}
			return nil
		}},
		{names: []string{"--control-vector-scaled"}, arg: "FNAME:SCALE,...", sec: cm, help: "control vectors with their scales", set: func(_ *config, v string) error {
			for _, p := range splitList(v) {
				parts := strings.Split(p, ":")
				if len(parts) != 2 {
					return fmt.Errorf("%q is not FNAME:SCALE", p)
				}
				s, err := parseFloat(parts[1])
				if err != nil {
					return err
				}
				e.ControlVectors = append(e.ControlVectors, llama.ControlVectorFile{Path: parts[0], Scale: float32(s)})
			}
			return nil
		}},
		{names: []string{"--control-vector-layer-range"}, arg: "START", arg2: "END", sec: cm, help: "layers the control vectors apply to, both included (default: 1 to the last)", set: func(_ *config, v string) error {
			a, b, _ := strings.Cut(v, "\x00")
			start, err := parseInt(a)
			if err != nil {
				return err
			}
			end, err := parseInt(b)
			e.ControlVectorStart, e.ControlVectorEnd = start, end
			return err
		}},
		{names: []string{"-m", "--model"}, arg: "FNAME", env: "LLAMA_ARG_MODEL", sec: cm, help: "the GGUF model to serve (none: router mode)", set: strTo(&o.Model)},
		{names: []string{"-mu", "--model-url"}, arg: "MODEL_URL", env: "LLAMA_ARG_MODEL_URL", sec: cm, help: "download the model from this URL (into the file -m names, else the cache folder: $LLAMA_CACHE or ~/.cache/llama.cpp), unless it is there", set: strTo(&c.modelURL)},
		{names: []string{"-dr", "--docker-repo"}, arg: "[<repo>/]<model>[:quant]", env: "LLAMA_ARG_DOCKER_REPO", sec: cm, help: "pull the model from a Docker Hub repository (namespace default ai/, tag default latest); a reference may start with another OCI registry's host[:port]/", set: strTo(&c.dockerRepo)},
		{names: []string{"-hf", "-hfr", "--hf-repo"}, arg: "<user>/<model>[:quant]", env: "LLAMA_ARG_HF_REPO", sec: cm, help: "pull the model from a Hugging Face repository", set: strTo(&c.hf.Repo)},
		{names: []string{"-hff", "--hf-file"}, arg: "FILE", env: "LLAMA_ARG_HF_FILE", sec: cm, help: "the file of --hf-repo to pull", set: strTo(&c.hf.File)},
		{names: []string{"-hft", "--hf-token"}, arg: "TOKEN", env: "HF_TOKEN", sec: cm, help: "Hugging Face access token", set: strTo(&c.hf.Token)},
		{names: []string{"--log-disable"}, sec: cm, help: "no logs", set: func(c *config, _ string) error { c.opts.Logger = discardLogger; return nil }},
		{names: []string{"--log-file"}, arg: "FNAME", env: "LLAMA_ARG_LOG_FILE", sec: cm, help: "also write the logs to this file", set: strTo(&c.logFile)},
		{names: []string{"--log-colors"}, arg: "[on|off|auto]", env: "LLAMA_ARG_LOG_COLORS", sec: cm, help: "color the log's levels: on, off, auto (default: on a terminal, unless NO_COLOR is set or TERM is dumb)", set: func(c *config, v string) error {
			if !isTruthy(v) && !isFalsey(v) && !isAutoy(v) {
				return fmt.Errorf("%q is not on, off or auto", v)
			}
			c.logFormat.colors = v
			return nil
		}},
		{names: []string{"-v", "--verbose", "--log-verbose"}, sec: cm, help: "log everything, llama.cpp's messages included", set: boolTo(&c.verbose)},
		{names: []string{"--offline"}, env: "LLAMA_ARG_OFFLINE", sec: cm, help: "never use the network: models come from the cache only", set: boolTo(&c.hf.Offline)},
		{names: []string{"-lv", "--verbosity", "--log-verbosity"}, arg: "N", env: "LLAMA_ARG_LOG_VERBOSITY", sec: cm, help: "log threshold (4 and more: llama.cpp's messages too)", set: func(c *config, v string) error {
			n, err := parseInt(v)
			c.verbose = n >= 4
			return err
		}},
		{names: []string{"--log-prefix"}, neg: []string{"--no-log-prefix"}, env: "LLAMA_ARG_LOG_PREFIX", sec: cm, help: "begin log lines with their level (default on)", set: func(c *config, v string) error {
			c.logFormat.noPrefix = v == "false"
			return nil
		}},
		{names: []string{"--log-timestamps"}, neg: []string{"--no-log-timestamps"}, env: "LLAMA_ARG_LOG_TIMESTAMPS", sec: cm, help: "begin log lines with the time (default on)", set: func(c *config, v string) error {
			c.logFormat.noTimestamps = v == "false"
			return nil
		}},
		{names: []string{"--spec-draft-type-k", "-ctkd", "--cache-type-k-draft"}, arg: "TYPE", env: "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K", sec: cm, help: "KV cache type for K of the draft model", set: cacheType(&sd.DraftTypeK)},
		{names: []string{"--spec-draft-type-v", "-ctvd", "--cache-type-v-draft"}, arg: "TYPE", env: "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V", sec: cm, help: "KV cache type for V of the draft model", set: cacheType(&sd.DraftTypeV)},

		// ---- sampling: the defaults of requests that do not set them
		{names: []string{"--samplers"}, arg: "SAMPLERS", sec: sa, help: "samplers in order, separated by ';' (default: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)", set: func(_ *config, v string) error {
			var names []string
			for _, n := range strings.Split(v, ";") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
			return samplerList(c, names, "")
		}},
		{names: []string{"-s", "--seed"}, arg: "SEED", sec: sa, help: "random seed (default -1: random)", set: func(_ *config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < -1 || n > math.MaxUint32 {
				return fmt.Errorf("%q is not a seed", v)
			}
			sp.Seed = uint32(n)
			return nil
		}},
		{names: []string{"--sampler-seq", "--sampling-seq"}, arg: "SEQUENCE", sec: sa, help: "samplers in order, one letter each (default edskypmxt)", set: func(_ *config, v string) error {
			return samplerList(c, nil, v)
		}},
		{names: []string{"--ignore-eos"}, sec: sa, help: "keep generating past the end-of-generation tokens", set: boolTo(&sp.IgnoreEOS)},
		{names: []string{"--dry-sequence-breaker"}, arg: "STRING", sec: sa, help: "a DRY sequence breaker (repeatable; the first one replaces the defaults; none: no breakers)", set: func(c *config, v string) error {
			if !c.dryBreakersSet {
				sp.DRYSequenceBreakers, c.dryBreakersSet = nil, true
			}
			if v == "none" {
				// Empty, not nil: nil means llama.cpp's default breakers.
				sp.DRYSequenceBreakers = []string{}
			} else {
				sp.DRYSequenceBreakers = append(sp.DRYSequenceBreakers, v)
			}
			return nil
		}},
		{names: []string{"-l", "--logit-bias"}, arg: "TOKEN_ID(+/-)BIAS", sec: sa, help: "bias a token's logit, e.g. 15043+1 or 15043-inf (repeatable)", set: func(_ *config, v string) error {
			i := strings.IndexAny(strings.TrimLeft(v, " +-"), "+-")
			if i < 0 {
				return errors.New("invalid input format")
			}
			i += len(v) - len(strings.TrimLeft(v, " +-"))
			tok, err := strconv.Atoi(strings.TrimSpace(v[:i]))
			if err != nil {
				return errors.New("invalid input format")
			}
			b, err := strconv.ParseFloat(strings.TrimSpace(v[i+1:]), 32)
			if err != nil {
				return errors.New("invalid input format")
			}
			if v[i] == '-' {
				b = -b
			}
			if sp.LogitBias == nil {
				sp.LogitBias = map[llama.Token]float32{}
			}
			sp.LogitBias[llama.Token(tok)] = float32(b)
			return nil
		}},
		{names: []string{"--grammar"}, arg: "GRAMMAR", sec: sa, help: "default GBNF grammar", set: func(c *config, v string) error {
			sp.Grammar, c.grammarSet = v, true
			return nil
		}},
		{names: []string{"--grammar-file"}, arg: "FNAME", sec: sa, help: "file of the default GBNF grammar", set: func(c *config, v string) error {
			b, err := os.ReadFile(v)
			sp.Grammar, c.grammarSet = string(b), true
			return err
		}},
		{names: []string{"-j", "--json-schema"}, arg: "SCHEMA", sec: sa, help: "default JSON schema the output follows", set: func(c *config, v string) error {
			return c.setSchema([]byte(v))
		}},
		{names: []string{"-jf", "--json-schema-file"}, arg: "FILE", sec: sa, help: "file of the default JSON schema", set: func(c *config, v string) error {
			b, err := os.ReadFile(v)
			if err != nil {
				return err
			}
			return c.setSchema(b)
		}},
		{names: []string{"-bs", "--backend-sampling"}, env: "LLAMA_ARG_BACKEND_SAMPLING", sec: sa, help: "sample inside the decode, for requests whose samplers llama.cpp can run there (default: every such request where the model runs on a GPU, only those that ask (backend_sampling) on a CPU)", set: boolTo(&sp.BackendSampling)},
		{names: []string{"--no-backend-sampling"}, sec: sa, help: "sample inside the decode only for the requests that ask (backend_sampling), also where the model runs on a GPU (not a llama-server option)", set: func(*config, string) error {
			sp.BackendSampling, e.BackendSampling = false, engine.BackendSamplingAsked
			return nil
		}},
	}, samplingFlags(c), []flagDef{

		// ---- speculative decoding (not supported yet)
		{names: []string{"--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft"}, arg: "<user>/<model>[:quant]", env: "LLAMA_ARG_SPEC_DRAFT_HF_REPO", sec: spc, help: "pull the draft model from a Hugging Face repository, as -hf (with -md: the file of the repo to pull)", set: strTo(&c.draftHF)},
		{names: []string{"--spec-draft-threads", "-td", "--threads-draft"}, arg: "N", sec: spc, help: "threads of the draft model (default: --threads; <= 0: all CPUs)", set: threadsTo(&sd.DraftThreads)},
		{names: []string{"--spec-draft-threads-batch", "-tbd", "--threads-batch-draft"}, arg: "N", sec: spc, help: "batch threads of the draft model (default: --threads-batch; <= 0: all CPUs)", set: threadsTo(&sd.DraftThreadsBatch)},
		{names: []string{"--spec-draft-cpu-mask", "-Cd", "--cpu-mask-draft"}, arg: "M", sec: spc, help: "CPU mask of the draft model's threads (default: --cpu-mask)", set: c.threadsDraft.mask},
		{names: []string{"--spec-draft-cpu-range", "-Crd", "--cpu-range-draft"}, arg: "lo-hi", sec: spc, help: "CPU range of the draft model's threads (default: --cpu-range)", set: c.threadsDraft.cpuRange},
		{names: []string{"--spec-draft-cpu-strict", "--cpu-strict-draft"}, arg: "<0|1>", sec: spc, help: "strict CPU placement of the draft model's threads (default: --cpu-strict)", set: c.threadsDraft.setStrict},
		{names: []string{"--spec-draft-prio", "--prio-draft"}, arg: "N", sec: spc, help: "priority of the draft model's threads (default: --prio)", set: c.threadsDraft.setPrio},
		{names: []string{"--spec-draft-poll", "--poll-draft"}, arg: "<0|1>", sec: spc, help: "polling level of the draft model's threads (default: --poll)", set: c.threadsDraft.setPoll},
		{names: []string{"--spec-draft-cpu-mask-batch", "-Cbd", "--cpu-mask-batch-draft"}, arg: "M", sec: spc, help: "CPU mask of the draft model's batch threads (default: --cpu-mask-draft)", set: c.threadsDraftBatch.mask},
		{names: []string{"--spec-draft-cpu-strict-batch", "--cpu-strict-batch-draft"}, arg: "<0|1>", sec: spc, help: "strict CPU placement of the draft model's batch threads (default: --cpu-strict-draft)", set: c.threadsDraftBatch.setStrict},
		{names: []string{"--spec-draft-prio-batch", "--prio-batch-draft"}, arg: "N", sec: spc, help: "priority of the draft model's batch threads (default: --prio-draft)", set: c.threadsDraftBatch.setPrio},
		{names: []string{"--spec-draft-poll-batch", "--poll-batch-draft"}, arg: "<0|1>", sec: spc, help: "polling level of the draft model's batch threads (default: --poll-draft)", set: c.threadsDraftBatch.setPoll},
		{names: []string{"--spec-draft-override-tensor", "-otd", "--override-tensor-draft"}, arg: "<tensor name pattern>=<buffer type>,...", sec: spc, help: "-ot for the draft model", set: tensorOverrides(&sd.DraftModelOptions)},
		{names: []string{"--spec-draft-cpu-moe", "-cmoed", "--cpu-moe-draft"}, env: "LLAMA_ARG_SPEC_DRAFT_CPU_MOE", sec: spc, help: "-cmoe for the draft model", set: cpuMoE(&sd.DraftModelOptions)},
		{names: []string{"--spec-draft-n-cpu-moe", "--spec-draft-ncmoe", "-ncmoed", "--n-cpu-moe-draft"}, arg: "N", env: "LLAMA_ARG_SPEC_DRAFT_N_CPU_MOE", sec: spc, help: "-ncmoe for the draft model", set: cpuLayers(&sd.DraftModelOptions, ffnExpsPattern)},
		{names: []string{"--spec-draft-n-max"}, arg: "N", env: "LLAMA_ARG_SPEC_DRAFT_N_MAX", sec: spc, help: "most tokens drafted (default 3)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if err == nil && n < 0 {
				err = fmt.Errorf("%d is negative", n)
			}
			if err == nil {
				sd.NMax = n
			}
			return err
		}},
		{names: []string{"--spec-draft-n-min"}, arg: "N", env: "LLAMA_ARG_SPEC_DRAFT_N_MIN", sec: spc, help: "fewest tokens drafted", set: intTo(&sd.NMin)},
		{names: []string{"--spec-synth-len"}, arg: "N", env: "LLAMA_ARG_SPEC_SYNTH_LEN", sec: spc, help: "synthetic draft acceptance, for benchmarking" + noEffect, set: anyInt},
		{names: []string{"--spec-synth-rates"}, arg: "R0,R1,...", env: "LLAMA_ARG_SPEC_SYNTH_RATES", sec: spc, help: "synthetic draft acceptance rates, for benchmarking" + noEffect, set: func(_ *config, v string) error {
			for _, p := range splitList(v) {
				if _, err := parseFloat(p); err != nil {
					return err
				}
			}
			return nil
		}},
		{names: []string{"--spec-draft-p-split", "--draft-p-split"}, arg: "P", env: "LLAMA_ARG_SPEC_DRAFT_P_SPLIT", sec: spc, help: "draft split probability", set: floatTo(&sd.PSplit)},
		{names: []string{"--spec-draft-p-min", "--draft-p-min"}, arg: "P", env: "LLAMA_ARG_SPEC_DRAFT_P_MIN", sec: spc, help: "smallest draft probability", set: floatTo(&sd.PMin)},
		{names: []string{"--spec-draft-backend-sampling"}, neg: []string{"--no-spec-draft-backend-sampling"}, env: "LLAMA_ARG_SPEC_DRAFT_BACKEND_SAMPLING", sec: spc, help: "sample drafts inside the draft model's decode; drafts are sampled on the CPU" + noEffect, set: anyValue},
		{names: []string{"--spec-draft-device", "-devd", "--device-draft"}, arg: "<dev1,dev2,..>", sec: spc, help: "devices of the draft model, as --device", set: devicesTo(&sd.DraftModelOptions)},
		{names: []string{"--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"}, arg: "N", env: "LLAMA_ARG_N_GPU_LAYERS_DRAFT", sec: spc, help: "GPU layers of the draft model: a number, auto or all (default auto)", set: gpuLayers(&sd.DraftModelOptions)},
		{names: []string{"--spec-draft-model", "-md", "--model-draft"}, arg: "FNAME", env: "LLAMA_ARG_SPEC_DRAFT_MODEL", sec: spc, help: "draft model for speculative decoding (draft-simple), or an MTP head in a file of its own (draft-mtp, chosen by itself without --spec-type)", set: strTo(&sd.DraftModel)},
		{names: []string{"--spec-type"}, arg: "TYPE[,TYPE...]", env: "LLAMA_ARG_SPEC_TYPE", sec: spc, help: "speculative decoding types: none, draft-simple, draft-mtp, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache (default none; draft-eagle3, draft-dflash and draft-dspark are refused as not supported)", set: func(c *config, v string) error {
			for _, t := range strings.Split(v, ",") {
				if err := oneOf(t, "none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
					"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"); err != nil {
					return fmt.Errorf("unknown speculative type: %s", t)
				}
				if t == "none" {
					sd.Types = nil
					return nil
				}
				sd.Types = append(sd.Types, t)
			}
			return nil
		}},
		{names: []string{"--spec-ngram-mod-n-min"}, arg: "N", sec: spc, help: "n-gram (mod) fewest tokens of a draft (0 to 1024, default 48)", set: ngramModSize(&sd.NgramModNMin)},
		{names: []string{"--spec-ngram-mod-n-max"}, arg: "N", sec: spc, help: "n-gram (mod) most tokens of a draft (0 to 1024, default 64)", set: ngramModSize(&sd.NgramModNMax)},
		{names: []string{"--spec-ngram-mod-n-match"}, arg: "N", sec: spc, help: "n-gram (mod) lookup length (1 to 1024, default 24)", set: intInTo(1, 1024, &sd.NgramModNMatch)},
		{names: []string{"--spec-adapt"}, neg: []string{"--no-spec-adapt"}, sec: spc, help: "adapt each slot's drafting to acceptance: drafters whose drafts do not pay sit out a while (default on; not a llama-server option: off drafts as llama-server, with its draft_n counts)", set: func(_ *config, v string) error {
			sd.Adapt.Off = v == "false"
			return nil
		}},
		{names: []string{"--spec-ngram-simple-size-n"}, arg: "N", sec: spc, help: "n-gram (simple) lookup length (1 to 1024, default 12)", set: intInTo(1, 1024, &sd.NgramSimpleSizeN)},
		{names: []string{"--spec-ngram-simple-size-m"}, arg: "N", sec: spc, help: "n-gram (simple) draft length (1 to 1024, default 48)", set: intInTo(1, 1024, &sd.NgramSimpleSizeM)},
		{names: []string{"--spec-ngram-simple-min-hits"}, arg: "N", sec: spc, help: "n-gram (simple) fewest hits (1 to 65535; no effect, as in llama-server)", set: intIn(1, 65535)},
		{names: []string{"--spec-ngram-map-k-size-n"}, arg: "N", sec: spc, help: "n-gram (map-k) lookup length (1 to 1024, default 12)", set: intInTo(1, 1024, &sd.NgramMapKSizeN)},
		{names: []string{"--spec-ngram-map-k-size-m"}, arg: "N", sec: spc, help: "n-gram (map-k) draft length (1 to 1024, default 48)", set: intInTo(1, 1024, &sd.NgramMapKSizeM)},
		{names: []string{"--spec-ngram-map-k-min-hits"}, arg: "N", sec: spc, help: "n-gram (map-k) fewest hits (1 to 65535; no effect, as in llama-server)", set: intIn(1, 65535)},
		{names: []string{"--spec-ngram-map-k4v-size-n"}, arg: "N", sec: spc, help: "n-gram (map-k4v) lookup length (1 to 1024, default 12)", set: intInTo(1, 1024, &sd.NgramMapK4VSizeN)},
		{names: []string{"--spec-ngram-map-k4v-size-m"}, arg: "N", sec: spc, help: "n-gram (map-k4v) draft length (1 to 1024, default 48)", set: intInTo(1, 1024, &sd.NgramMapK4VSizeM)},
		{names: []string{"--spec-ngram-map-k4v-min-hits"}, arg: "N", sec: spc, help: "n-gram (map-k4v) times a key must be found before it drafts (1 to 65535, default 1)", set: intInTo(1, 65535, &sd.NgramMapK4VMinHits)},
		// Removed from llama.cpp, which refuses them with the replacement.
		{names: []string{"--draft", "--draft-n", "--draft-max"}, arg: "N", env: "LLAMA_ARG_DRAFT_MAX", sec: spc, help: "removed: use --spec-draft-n-max or --spec-ngram-mod-n-max", set: removed("use --spec-draft-n-max or --spec-ngram-mod-n-max")},
		{names: []string{"--draft-min", "--draft-n-min"}, arg: "N", env: "LLAMA_ARG_DRAFT_MIN", sec: spc, help: "removed: use --spec-draft-n-min or --spec-ngram-mod-n-min", set: removed("use --spec-draft-n-min or --spec-ngram-mod-n-min")},
		{names: []string{"--spec-ngram-size-n"}, arg: "N", sec: spc, help: "removed: use the respective --spec-ngram-*-size-n", set: removed("use the respective --spec-ngram-*-size-n")},
		{names: []string{"--spec-ngram-size-m"}, arg: "N", sec: spc, help: "removed: use the respective --spec-ngram-*-size-m", set: removed("use the respective --spec-ngram-*-size-m")},
		{names: []string{"--spec-ngram-min-hits"}, arg: "N", sec: spc, help: "removed: use the respective --spec-ngram-*-min-hits", set: removed("use the respective --spec-ngram-*-min-hits")},

		// ---- llama-server's own
		{names: []string{"-lcs", "--lookup-cache-static"}, arg: "FNAME", sec: sv, help: "static n-gram lookup cache of ngram-cache (read only)", set: strTo(&sd.LookupCacheStatic)},
		{names: []string{"-lcd", "--lookup-cache-dynamic"}, arg: "FNAME", sec: sv, help: "dynamic n-gram lookup cache of ngram-cache (read only here)", set: strTo(&sd.LookupCacheDynamic)},
		{names: []string{"--kv-unified-per-slot"}, arg: "N", env: "LLAMA_ARG_KV_UNIFIED_PER_SLOT", sec: sv, help: "most positions one slot may use with a unified KV cache; without -c the cache is slots*N", set: intTo(&e.KVUnifiedPerSlot)},
		{names: []string{"-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"}, arg: "N", env: "LLAMA_ARG_CTX_CHECKPOINTS", sec: sv, help: fmt.Sprintf("most context checkpoints per slot, with a window-sized sliding-window cache (default %d, 0: none, at most %d)", engine.DefaultContextCheckpoints, engine.MaxContextCheckpoints), set: func(c *config, v string) error {
			if err := intInTo(0, engine.MaxContextCheckpoints, &e.ContextCheckpoints)(c, v); err != nil {
				return err
			}
			if e.ContextCheckpoints == 0 {
				e.ContextCheckpoints = -1 // none
			}
			return nil
		}},
		{names: []string{"-cms", "--checkpoint-min-step"}, arg: "N", env: "LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT", sec: sv, help: fmt.Sprintf("spacing in tokens below which a new request drops the earlier requests' context checkpoints (default %d)", engine.DefaultCheckpointMinStep), set: func(c *config, v string) error {
			if err := intInTo(0, math.MaxInt32, &e.CheckpointMinStep)(c, v); err != nil {
				return err
			}
			if e.CheckpointMinStep == 0 {
				e.CheckpointMinStep = -1 // none
			}
			return nil
		}},
		{names: []string{"-cram", "--cache-ram"}, arg: "N", env: "LLAMA_ARG_CACHE_RAM", sec: sv, help: "MiB of RAM for the prompt cache of idle slots (default 8192, -1: no limit, 0: off)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if err != nil {
				return err
			}
			c.cacheRAMMiB = n
			e.PromptCacheMiB, e.NoPromptCache = n, n == 0
			return nil
		}},
		{names: []string{"-kvu", "--kv-unified"}, neg: []string{"-no-kvu", "--no-kv-unified"}, env: "LLAMA_ARG_KV_UNIFIED", sec: sv, help: "one KV buffer shared by all slots (default: on when -np is auto)", set: func(c *config, v string) error {
			e.Context.KVUnified, c.kvUnifiedSet = v != "false", true
			return nil
		}},
		{names: []string{"--cache-idle-slots"}, neg: []string{"--no-cache-idle-slots"}, env: "LLAMA_ARG_CACHE_IDLE_SLOTS", sec: sv, help: "keep idle slots' prompts in the RAM cache when a new task comes (default on)", set: func(_ *config, v string) error {
			e.NoCacheIdleSlots = v == "false"
			return nil
		}},
		{names: []string{"--context-shift"}, neg: []string{"--no-context-shift"}, env: "LLAMA_ARG_CONTEXT_SHIFT", sec: sv, help: "shift the context when it is full (default off)", set: boolTo(&e.ContextShift)},
		{names: []string{"-r", "--reverse-prompt"}, arg: "PROMPT", sec: sv, help: "default stop string", set: func(_ *config, v string) error {
			o.Stop = append(o.Stop, v)
			return nil
		}},
		{names: []string{"-sp", "--special"}, sec: sv, help: "output special tokens as their text", set: boolTo(&e.Special)},
		{names: []string{"--warmup"}, neg: []string{"--no-warmup"}, sec: sv, help: "decode once at start, so that the first request does not pay for it (default on)", set: func(_ *config, v string) error {
			e.NoWarmup = v == "false"
			return nil
		}},
		{names: []string{"--spm-infill"}, sec: sv, help: "build /infill prompts suffix first (default: prefix first)", set: boolTo(&o.SPMInfill)},
		{names: []string{"-np", "--parallel"}, arg: "N", env: "LLAMA_ARG_N_PARALLEL", sec: sv, help: "number of slots (default -1: auto, 4 with a unified KV cache)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if err == nil && n == 0 {
				return errors.New("invalid value for n_parallel")
			}
			e.Parallel = n
			return err
		}},
		{names: []string{"-cb", "--cont-batching"}, neg: []string{"-nocb", "--no-cont-batching"}, env: "LLAMA_ARG_CONT_BATCHING", sec: sv, help: "continuous batching (always on here)", set: anyValue},
		{names: []string{"-mm", "--mmproj"}, arg: "FILE", env: "LLAMA_ARG_MMPROJ", sec: sv, help: "multimodal projector: image and audio input", set: strTo(&o.Multimodal.Projector)},
		{names: []string{"-mmu", "--mmproj-url"}, arg: "URL", env: "LLAMA_ARG_MMPROJ_URL", sec: sv, help: "download the multimodal projector from this URL, as --model-url (into the file -mm names, else the cache folder)", set: strTo(&c.mmprojURL)},
		{names: []string{"--mmproj-auto"}, neg: []string{"--no-mmproj", "--no-mmproj-auto"}, env: "LLAMA_ARG_MMPROJ_AUTO", sec: sv, help: "use the projector of -hf models when there is one (--no-mmproj: no projector at all, -mm included)", set: func(c *config, v string) error {
			c.noMMProj = v == "false"
			return nil
		}},
		{names: []string{"--mmproj-offload"}, neg: []string{"--no-mmproj-offload"}, env: "LLAMA_ARG_MMPROJ_OFFLOAD", sec: sv, help: "projector on the GPU (default on)", set: func(_ *config, v string) error {
			o.Multimodal.CPUOnly = v == "false"
			return nil
		}},
		{names: []string{"-mmdev", "--mmproj-device"}, arg: "DEVICE", env: "MTMD_BACKEND_DEVICE", sec: sv, help: "device of the projector (none: the CPU; others: the default device)", set: func(_ *config, v string) error {
			if v == "none" {
				o.Multimodal.CPUOnly = true
			}
			return nil
		}},
		{names: []string{"--image-min-tokens"}, arg: "N", env: "LLAMA_ARG_IMAGE_MIN_TOKENS", sec: sv, help: "fewest tokens per image, for projectors with dynamic resolution (default: the file's)", set: intTo(&o.Multimodal.ImageMinTokens)},
		{names: []string{"--image-max-tokens"}, arg: "N", env: "LLAMA_ARG_IMAGE_MAX_TOKENS", sec: sv, help: "most tokens per image, for projectors with dynamic resolution (default: the file's)", set: intTo(&o.Multimodal.ImageMaxTokens)},
		{names: []string{"--video-fps"}, arg: "N", env: "LLAMA_ARG_VIDEO_FPS", sec: sv, help: "frames per second taken from videos", set: anyFloat},
		{names: []string{"--video-timestamp-interval"}, arg: "MS", env: "LLAMA_ARG_VIDEO_TIMESTAMP_INTERVAL", sec: sv, help: "video timestamp interval", set: anyValue},
		{names: []string{"--video-ffmpeg-dir"}, arg: "PATH", env: "LLAMA_ARG_VIDEO_FFMPEG_DIR", sec: sv, help: "folder of ffmpeg", set: anyValue},
		{names: []string{"--mtmd-batch-max-tokens"}, arg: "N", env: "LLAMA_ARG_MTMD_BATCH_MAX_TOKENS", sec: sv, help: "most image tokens per batch", set: anyInt},
		{names: []string{"--embd-normalize"}, arg: "N", sec: sv, help: "default embedding normalisation: -1 none, 0 max int16, 1 taxicab, 2 euclidean (default), >2 p-norm", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			o.EmbdNormalize = &n
			return err
		}},
		{names: []string{"--host"}, arg: "HOST", env: "LLAMA_ARG_HOST", sec: sv, help: "address to listen on (default 127.0.0.1)", set: strTo(&c.host)},
		{names: []string{"--port"}, arg: "PORT", env: "LLAMA_ARG_PORT", sec: sv, help: "port to listen on (default 8080)", set: intTo(&c.port)},
		{names: []string{"--max-connections"}, arg: "N", sec: sv, help: "most connections open at once; past it a new one is closed at once (default 2048; 0: no cap; not a llama-server option)", set: intTo(&c.maxConns)},
		{names: []string{"--max-connections-per-client"}, arg: "N", sec: sv, help: "most connections open at once from one client address (default 256; 0: no cap; not a llama-server option)", set: intTo(&c.maxConnsPerClient)},
		{names: []string{"--reuse-port"}, env: "LLAMA_ARG_REUSE_PORT", sec: sv, help: "let other sockets bind the same port (SO_REUSEPORT)", set: boolTo(&c.reusePort)},
		{names: []string{"--path"}, arg: "PATH", env: "LLAMA_ARG_STATIC_PATH", sec: sv, help: "folder of static files to serve", set: strTo(&o.UIPath)},
		{names: []string{"--cors-origins"}, arg: "ORIGINS", env: "LLAMA_ARG_CORS_ORIGINS", sec: sv, help: "allowed CORS origins, comma-separated (*: any page; localhost: loopback origins; default: * with an API key, localhost without one or with tools; llama-server's default is * always)", set: func(c *config, v string) error {
			o.CORSOrigins, c.corsOriginsExplicit = splitList(v), true
			return nil
		}},
		{names: []string{"--allowed-hosts"}, arg: "HOSTS", sec: sv, help: "Host names the server answers besides loopback names, this machine's names and (beyond loopback) IP addresses, comma-separated (*.example.com: names under it; *: any, as llama-server), against DNS rebinding (not a llama-server option)", set: func(_ *config, v string) error {
			o.AllowedHosts = splitList(v)
			return nil
		}},
		{names: []string{"--cors-methods"}, arg: "METHODS", env: "LLAMA_ARG_CORS_METHODS", sec: sv, help: "allowed CORS methods (default GET, POST, DELETE, OPTIONS)", set: strTo(&o.CORSMethods)},
		{names: []string{"--cors-headers"}, arg: "HEADERS", env: "LLAMA_ARG_CORS_HEADERS", sec: sv, help: "allowed CORS headers (default *)", set: strTo(&o.CORSHeaders)},
		{names: []string{"--cors-credentials"}, neg: []string{"--no-cors-credentials"}, env: "LLAMA_ARG_CORS_CREDENTIALS", sec: sv, help: "allow CORS credentials (default on)", set: func(_ *config, v string) error {
			o.NoCORSCredentials = v == "false"
			return nil
		}},
		{names: []string{"--api-prefix"}, arg: "PREFIX", env: "LLAMA_ARG_API_PREFIX", sec: sv, help: "path prefix of every endpoint", set: strTo(&c.apiPrefix)},
		{names: []string{"--ui-config", "--webui-config"}, arg: "JSON", env: "LLAMA_ARG_UI_CONFIG", sec: sv, help: "web UI settings (JSON)", set: func(_ *config, v string) error {
			o.UIConfig, o.UIConfigFile = v, "" // the last of --ui-config and --ui-config-file wins
			return nil
		}},
		{names: []string{"--ui-config-file", "--webui-config-file"}, arg: "PATH", env: "LLAMA_ARG_UI_CONFIG_FILE", sec: sv, help: "file of the web UI settings", set: func(c *config, v string) error {
			o.UIConfig, o.UIConfigFile = "", v
			return nil
		}},
		{names: []string{"--ui-mcp-proxy", "--webui-mcp-proxy"}, neg: []string{"--no-ui-mcp-proxy", "--no-webui-mcp-proxy"}, env: "LLAMA_ARG_UI_MCP_PROXY", sec: sv, help: "the web UI's MCP proxy (default off)", set: boolTo(&o.Tools.CORSProxy)},
		{names: []string{"--cors-proxy-allow-private"}, env: "LLAMA_ARG_CORS_PROXY_ALLOW_PRIVATE", sec: sv, help: "let the MCP proxy connect to loopback, private and link-local addresses, cloud metadata included (default off: public addresses only; not a llama-server option)", set: boolTo(&o.Tools.CORSProxyAllowPrivate)},
		{names: []string{"--tools"}, arg: "TOOL1,TOOL2,...", env: "LLAMA_ARG_TOOLS", sec: sv, help: "built-in tools the server runs (all: every one)", set: func(_ *config, v string) error {
			o.Tools.Enabled = splitList(v)
			return nil
		}},
		{names: []string{"--tools-runtime"}, arg: "OPTION", env: "LLAMA_ARG_TOOLS_RUNTIME", sec: sv, help: "runtime of the built-in tools", set: strTo(&o.Tools.Runtime)},
		{names: []string{"--tools-root"}, arg: "DIR", env: "LLAMA_ARG_TOOLS_ROOT", sec: sv, help: "folder the file tools are confined to (default: the working directory; / opens everything, /proc/self/environ and its keys included; not a llama-server option)", set: strTo(&o.Tools.Root)},
		{names: []string{"--tools-allow-cwd"}, neg: []string{"--no-tools-allow-cwd"}, env: "LLAMA_ARG_TOOLS_ALLOW_CWD", sec: sv, help: "honour a request's x-tool-cwd header, inside --tools-root (default off: refused; llama-server always honours it)", set: boolTo(&o.Tools.AllowClientCwd)},
		{names: []string{"--tools-allow-runtime"}, neg: []string{"--no-tools-allow-runtime"}, env: "LLAMA_ARG_TOOLS_ALLOW_RUNTIME", sec: sv, help: "honour a request's x-tool-runtime header: any running container or ssh host (default off: refused; llama-server always honours it)", set: boolTo(&o.Tools.AllowClientRuntime)},
		{names: []string{"--tools-env"}, arg: "NAME1,NAME2,...", env: "LLAMA_ARG_TOOLS_ENV", sec: sv, help: "variables of the server's environment that tool commands and MCP servers get besides PATH, HOME, LANG, TERM, TMPDIR... (*: all but secret-looking names; default none; llama-server passes all; not a llama-server option)", set: func(_ *config, v string) error {
			o.Tools.Env = splitList(v)
			return nil
		}},
		{names: []string{"--mcp-servers-config"}, arg: "PATH", env: "LLAMA_ARG_MCP_SERVERS_CONFIG", sec: sv, help: "file of MCP servers", set: strTo(&o.Tools.MCPServersConfig)},
		{names: []string{"--mcp-servers-json"}, arg: "JSON", env: "LLAMA_ARG_MCP_SERVERS_JSON", sec: sv, help: "MCP servers (JSON)", set: strTo(&o.Tools.MCPServersJSON)},
		{names: []string{"-ag", "--agent"}, neg: []string{"-no-ag", "--no-agent"}, env: "LLAMA_ARG_AGENT", sec: sv, help: "--tools all and --ui-mcp-proxy together", set: func(c *config, v string) error {
			if v == "false" {
				o.Tools.Enabled, o.Tools.CORSProxy = nil, false
			} else {
				o.Tools.Enabled, o.Tools.CORSProxy = []string{"all"}, true
			}
			return nil
		}},
		{names: []string{"--ui", "--webui"}, neg: []string{"--no-ui", "--no-webui"}, env: "LLAMA_ARG_UI", sec: sv, help: "serve the web UI (default on)", set: func(c *config, v string) error {
			o.NoUI = v == "false"
			return nil
		}},
		{names: []string{"--embedding", "--embeddings"}, env: "LLAMA_ARG_EMBEDDINGS", sec: sv, help: "serve embeddings too", set: boolTo(&e.Embedding)},
		{names: []string{"--rerank", "--reranking"}, env: "LLAMA_ARG_RERANKING", sec: sv, help: "serve reranking (rank pooling)", set: func(*config, string) error { e.Reranking, e.Embedding = true, true; return nil }},
		{names: []string{"--api-key"}, arg: "KEY", env: "LLAMA_API_KEY", sec: sv, help: "API keys, comma-separated", set: func(_ *config, v string) error {
			o.APIKeys = append(o.APIKeys, splitList(v)...)
			return nil
		}},
		{names: []string{"--api-key-file"}, arg: "FNAME", env: "LLAMA_ARG_API_KEY_FILE", sec: sv, help: "file of API keys, one a line (# comments)", set: func(_ *config, v string) error {
			b, err := os.ReadFile(v)
			if err != nil {
				return err
			}
			for _, l := range strings.Split(string(b), "\n") {
				if l = strings.TrimRight(l, "\r"); l != "" && !strings.HasPrefix(l, "#") {
					o.APIKeys = append(o.APIKeys, l)
				}
			}
			return nil
		}},
		{names: []string{"--ssl-key-file"}, arg: "FNAME", env: "LLAMA_ARG_SSL_KEY_FILE", sec: sv, help: "PEM private key for HTTPS (with --ssl-cert-file)", set: strTo(&c.sslKey)},
		{names: []string{"--ssl-cert-file"}, arg: "FNAME", env: "LLAMA_ARG_SSL_CERT_FILE", sec: sv, help: "PEM certificate (chain) for HTTPS (with --ssl-key-file)", set: strTo(&c.sslCert)},
		{names: []string{"--chat-template-kwargs"}, arg: "STRING", env: "LLAMA_ARG_CHAT_TEMPLATE_KWARGS", sec: sv, help: "default template variables (a JSON object)", set: func(_ *config, v string) error {
			return c.templateKwargs(v)
		}},
		{names: []string{"-to", "--timeout"}, arg: "N", env: "LLAMA_ARG_TIMEOUT", sec: sv, help: "read/write timeout in seconds, a write waiting that long for the client (default 3600)", set: func(c *config, v string) error {
			n, err := parseInt(v)
			c.timeout = time.Duration(n) * time.Second
			return err
		}},
		{names: []string{"--sse-ping-interval"}, arg: "N", env: "LLAMA_ARG_SSE_PING_INTERVAL", sec: sv, help: "seconds of silence after which an event stream gets a comment line, so that clients keep it open (default 30; 0 or less: none)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if err != nil {
				return err
			}
			o.SSEPing = time.Duration(min(n, 1<<20)) * time.Second
			if n <= 0 {
				o.SSEPing = -1
			}
			return nil
		}},
		{names: []string{"--threads-http"}, arg: "N", env: "LLAMA_ARG_THREADS_HTTP", sec: sv, help: "HTTP threads (goroutines here)" + noEffect, set: anyInt},
		{names: []string{"--cache-prompt"}, neg: []string{"--no-cache-prompt"}, env: "LLAMA_ARG_CACHE_PROMPT", sec: sv, help: "reuse the cached prompt of a slot (default on)", set: func(_ *config, v string) error {
			o.NoCachePrompt = v == "false"
			return nil
		}},
		{names: []string{"--cache-reuse"}, arg: "N", env: "LLAMA_ARG_CACHE_REUSE", sec: sv, help: "smallest chunk moved by KV shifting to reuse the cache (default 0: off)", set: intTo(&e.CacheReuse)},
		{names: []string{"--metrics"}, env: "LLAMA_ARG_ENDPOINT_METRICS", sec: sv, help: "serve GET /metrics", set: boolTo(&o.Metrics)},
		{names: []string{"--props"}, env: "LLAMA_ARG_ENDPOINT_PROPS", sec: sv, help: "allow POST /props", set: boolTo(&o.PropsEndpoint)},
		{names: []string{"--slots"}, neg: []string{"--no-slots"}, env: "LLAMA_ARG_ENDPOINT_SLOTS", sec: sv, help: "serve GET /slots (default on)", set: boolTo(&o.Slots)},
		{names: []string{"--slot-save-path"}, arg: "PATH", sec: sv, help: "folder of saved slots", set: func(_ *config, v string) error {
			if st, err := os.Stat(v); err != nil || !st.IsDir() {
				return fmt.Errorf("not a directory: %s", v)
			}
			o.SlotSavePath = v
			return nil
		}},
		{names: []string{"--media-path"}, arg: "PATH", sec: sv, help: "folder of local media files, which requests name with file:// URLs relative to it (default: none, file:// refused)", set: func(c *config, v string) error {
			if st, err := os.Stat(v); err != nil || !st.IsDir() {
				return fmt.Errorf("not a directory: %s", v)
			}
			o.MediaPath = v
			return nil
		}},
		{names: []string{"--models-dir"}, arg: "PATH", env: "LLAMA_ARG_MODELS_DIR", sec: sv, help: "folder of models (router mode)", set: strTo(&o.ModelsDir)},
		{names: []string{"--models-preset"}, arg: "PATH", env: "LLAMA_ARG_MODELS_PRESET", sec: sv, help: "INI file of model presets (router mode)", set: strTo(&o.ModelsPreset)},
		{names: []string{"--models-max"}, arg: "N", env: "LLAMA_ARG_MODELS_MAX", sec: sv, help: "most models loaded at once (default 4, 0: no limit)", set: intTo(&o.ModelsMax)},
		{names: []string{"--models-autoload"}, neg: []string{"--no-models-autoload"}, env: "LLAMA_ARG_MODELS_AUTOLOAD", sec: sv, help: "load a model when a request names it (default on)", set: func(_ *config, v string) error {
			o.NoModelsAutoload = v == "false"
			return nil
		}},
		{names: []string{"--jinja"}, neg: []string{"--no-jinja"}, env: "LLAMA_ARG_JINJA", sec: sv, help: "Jinja chat templates (default on; always Jinja here)", set: boolTo(&o.Jinja)},
		{names: []string{"--reasoning-format"}, arg: "FORMAT", env: "LLAMA_ARG_THINK", sec: sv, help: "reasoning output: none, deepseek, deepseek-legacy, auto (default auto)", set: func(_ *config, v string) error {
			if err := oneOf(v, "none", "auto", "deepseek", "deepseek-legacy"); err != nil {
				return err
			}
			o.ReasoningFormat = v
			return nil
		}},
		{names: []string{"-rea", "--reasoning"}, arg: "[on|off|auto]", env: "LLAMA_ARG_REASONING", sec: sv, help: "thinking: on, off or auto (default: the template's)", set: func(_ *config, v string) error {
			switch {
			case isTruthy(v):
				return c.templateKwargs(`{"enable_thinking": true}`)
			case isFalsey(v):
				return c.templateKwargs(`{"enable_thinking": false}`)
			case isAutoy(v):
				delete(o.ChatTemplateKwargs, "enable_thinking")
				return nil
			}
			return fmt.Errorf("%q is not on, off or auto", v)
		}},
		{names: []string{"--reasoning-effort"}, arg: "LEVEL", env: "LLAMA_ARG_REASONING_EFFORT", sec: sv, help: "default reasoning_effort of templates (default: none)", set: func(_ *config, v string) error {
			if v == "default" {
				delete(o.ChatTemplateKwargs, "reasoning_effort")
				return nil
			}
			return c.templateKwargs(fmt.Sprintf(`{"reasoning_effort": %q}`, v))
		}},
		{names: []string{"--reasoning-budget"}, arg: "N", env: "LLAMA_ARG_THINK_BUDGET", sec: sv, help: "thinking token budget of chats: the thinking block is ended after N tokens (default -1: none; 0: no thinking)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if err != nil {
				return err
			}
			if n < -1 {
				return errors.New("invalid value")
			}
			o.ReasoningBudget = max(n, 0)
			if n == 0 {
				return c.templateKwargs(`{"enable_thinking": false}`)
			}
			return nil
		}},
		{names: []string{"--reasoning-budget-message"}, arg: "MESSAGE", env: "LLAMA_ARG_THINK_BUDGET_MESSAGE", sec: sv, help: "text put before the end-of-thinking tag when the budget runs out (default: none)", set: strTo(&o.ReasoningBudgetMessage)},
		{names: []string{"--reasoning-preserve"}, neg: []string{"--no-reasoning-preserve"}, env: "LLAMA_ARG_REASONING_PRESERVE", sec: sv, help: "keep past reasoning in prompts (default on)", set: func(_ *config, v string) error {
			return c.templateKwargs(fmt.Sprintf(`{"preserve_reasoning": %s}`, v))
		}},
		{names: []string{"--chat-template"}, arg: "JINJA_TEMPLATE", env: "LLAMA_ARG_CHAT_TEMPLATE", sec: sv, help: "chat template: a built-in name or Jinja source", set: strTo(&o.ChatTemplate)},
		{names: []string{"--chat-template-file"}, arg: "JINJA_TEMPLATE_FILE", env: "LLAMA_ARG_CHAT_TEMPLATE_FILE", sec: sv, help: "file of the chat template", set: strTo(&o.ChatTemplateFile)},
		{names: []string{"--skip-chat-parsing"}, neg: []string{"--no-skip-chat-parsing"}, env: "LLAMA_ARG_SKIP_CHAT_PARSING", sec: sv, help: "return model output as plain content (no tool call or reasoning parsing, no tool grammar)", set: boolTo(&o.SkipChatParsing)},
		{names: []string{"--prefill-assistant"}, neg: []string{"--no-prefill-assistant"}, env: "LLAMA_ARG_PREFILL_ASSISTANT", sec: sv, help: "continue a trailing assistant message (default on; off: answer it in a new turn)", set: func(_ *config, v string) error {
			o.NoPrefillAssistant = v == "false"
			return nil
		}},
		{names: []string{"-sps", "--slot-prompt-similarity"}, arg: "SIMILARITY", sec: sv, help: "how much of a prompt must match a slot's cache to pick that slot (default 0.1, 0.0 = off: the least recently used slot)", set: func(_ *config, v string) error {
			f, err := parseFloat(v)
			if err != nil {
				return err
			}
			e.SlotSimilarity = f
			if f == 0 {
				e.SlotSimilarity = -1 // llama-server's 0 turns the match off
			}
			return nil
		}},
		{names: []string{"--lora-init-without-apply"}, sec: sv, help: "load LoRA adapters with scale 0 (set them with POST /lora-adapters)", set: boolTo(&c.loraNoApply)},
		{names: []string{"--sleep-idle-seconds"}, arg: "SECONDS", sec: sv, help: "unload the model after that long idle (default -1: never)", set: func(_ *config, v string) error {
			n, err := parseInt(v)
			if err != nil {
				return err
			}
			if n == 0 || n < -1 {
				return errors.New("invalid value: cannot be 0 or less than -1")
			}
			o.SleepIdleSeconds = max(n, 0)
			return nil
		}},
		{names: []string{"--log-prompts-dir"}, arg: "PATH", sec: sv, help: "write each completion request's prompt, as the model reads it, to a file in this folder (made if missing; for debugging: the files hold the conversations)", set: strTo(&o.LogPromptsDir)},
		{names: []string{"--embd-gemma-default"}, sec: sv, help: "preset: EmbeddingGemma 300M from Hugging Face, embeddings, port 8011", set: modelPreset(func(c *config) {
			c.hf.Repo, c.hf.File, c.port = "ggml-org/embeddinggemma-300M-qat-q4_0-GGUF", "embeddinggemma-300M-qat-Q4_0.gguf", 8011
			e.Context.UBatchSize, e.Context.BatchSize, e.Parallel, e.Context.ContextSize, e.Embedding = 2048, 2048, 32, 2048*32, true
		})},
		{names: []string{"--fim-qwen-1.5b-default"}, sec: sv, help: "preset: Qwen 2.5 Coder 1.5B from Hugging Face, for infill, port 8012", set: fimPreset(c, "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF", "qwen2.5-coder-1.5b-q8_0.gguf")},
		{names: []string{"--fim-qwen-3b-default"}, sec: sv, help: "preset: Qwen 2.5 Coder 3B from Hugging Face, for infill, port 8012", set: fimPreset(c, "ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF", "qwen2.5-coder-3b-q8_0.gguf")},
		{names: []string{"--fim-qwen-7b-default"}, sec: sv, help: "preset: Qwen 2.5 Coder 7B from Hugging Face, for infill, port 8012", set: fimPreset(c, "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "qwen2.5-coder-7b-q8_0.gguf")},
		{names: []string{"--fim-qwen-7b-spec"}, sec: sv, help: "preset: Qwen 2.5 Coder 7B with the 0.5B as draft model, from Hugging Face, port 8012", set: fimPreset(c, "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "qwen2.5-coder-7b-q8_0.gguf", qwenDraft...)},
		{names: []string{"--fim-qwen-14b-spec"}, sec: sv, help: "preset: Qwen 2.5 Coder 14B with the 0.5B as draft model, from Hugging Face, port 8012", set: fimPreset(c, "ggml-org/Qwen2.5-Coder-14B-Q8_0-GGUF", "qwen2.5-coder-14b-q8_0.gguf", qwenDraft...)},
		{names: []string{"--fim-qwen-30b-default"}, sec: sv, help: "preset: Qwen 3 Coder 30B-A3B from Hugging Face, for infill, port 8012", set: fimPreset(c, "ggml-org/Qwen3-Coder-30B-A3B-Instruct-Q8_0-GGUF", "qwen3-coder-30b-a3b-instruct-q8_0.gguf")},
		{names: []string{"--gpt-oss-20b-default"}, sec: sv, help: "preset: gpt-oss-20b from Hugging Face, port 8013", set: gptOSSPreset(c, "ggml-org/gpt-oss-20b-GGUF", "gpt-oss-20b-mxfp4.gguf")},
		{names: []string{"--gpt-oss-120b-default"}, sec: sv, help: "preset: gpt-oss-120b from Hugging Face, port 8013", set: gptOSSPreset(c, "ggml-org/gpt-oss-120b-GGUF", "")},
		{names: []string{"--vision-gemma-4b-default"}, sec: sv, help: "preset: Gemma 3 4B QAT from Hugging Face, port 8014", set: modelPreset(func(c *config) {
			c.hf.Repo, c.port, e.Context.ContextSize, o.Jinja = "ggml-org/gemma-3-4b-it-qat-GGUF", 8014, 0, true
		})},
		{names: []string{"--vision-gemma-12b-default"}, sec: sv, help: "preset: Gemma 3 12B QAT from Hugging Face, port 8014", set: modelPreset(func(c *config) {
			c.hf.Repo, c.port, e.Context.ContextSize, o.Jinja = "ggml-org/gemma-3-12b-it-qat-GGUF", 8014, 0, true
		})},
		{names: []string{"--spec-default"}, sec: sv, help: "preset: llama-server's default speculative decoding (ngram-mod: 24-token n-grams, drafts of 48 to 64 tokens)", set: func(c *config, _ string) error {
			sd.Types = append(sd.Types, "ngram-mod")
			sd.NgramModNMatch, sd.NgramModNMin, sd.NgramModNMax = 24, 48, 64
			return nil
		}},
		{names: []string{"-a", "--alias"}, arg: "STRING", env: "LLAMA_ARG_ALIAS", sec: sv, help: "model names for the API, comma-separated (the first in sort order is its id)", set: func(c *config, v string) error {
			c.aliases = mergeSorted(c.aliases, splitList(v))
			return nil
		}},
		{names: []string{"--tags"}, arg: "STRING", env: "LLAMA_ARG_TAGS", sec: sv, help: "model tags for /models, comma-separated", set: func(_ *config, v string) error {
			o.Tags = mergeSorted(o.Tags, splitList(v))
			return nil
		}},
	})
}

// samplingFlags are the flags of the numeric sampling parameters, from
// sampling.Table: the defaults of requests that do not set them.
func samplingFlags(c *config) []flagDef {
	var out []flagDef
	for i := range sampling.Table {
		p := &sampling.Table[i]
		if len(p.Flags) == 0 {
			continue
		}
		out = append(out, flagDef{names: p.Flags, arg: "N", env: p.Env, sec: secSampling, help: p.Help, set: func(c *config, v string) error {
			return p.SetFlag(&c.sampling, v)
		}})
	}
	return out
}

// devicesTo reads a -dev list into mo: none (or CPU) keeps the model on
// the CPU, names go to ModelOptions.Devices (checked at load).
func devicesTo(mo *llama.ModelOptions) func(*config, string) error {
	return func(_ *config, v string) error {
		names := strings.Split(v, ",")
		if len(names) == 1 && (v == "none" || v == "CPU") {
			mo.CPUOnly, mo.Devices = true, nil
			return nil
		}
		for _, n := range names {
			if n == "" {
				return errors.New("no devices specified")
			}
		}
		mo.Devices, mo.CPUOnly = names, false
		return nil
	}
}

// modelPreset is one of llama-server's model shortcuts: it sets what
// apply sets, as llama-server's does (later flags override), the model
// coming from Hugging Face (-hf).
func modelPreset(apply func(c *config)) func(*config, string) error {
	return func(c *config, _ string) error { apply(c); return nil }
}

// qwenDraft is the draft model of the --fim-qwen-*-spec presets.
var qwenDraft = []string{"ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF", "qwen2.5-coder-0.5b-q8_0.gguf"}

// fimPreset is a --fim-qwen-* preset: the repo's file, with a draft
// model's repo and file when given.
func fimPreset(c *config, repo, file string, draft ...string) func(*config, string) error {
	e := &c.opts.Engine
	return modelPreset(func(c *config) {
		c.hf.Repo, c.hf.File, c.port = repo, file, 8012
		e.Context.UBatchSize, e.Context.BatchSize, e.Context.ContextSize, e.CacheReuse = 1024, 1024, 0, 256
		if len(draft) == 2 {
			c.draftHF, e.Speculative.DraftModel = draft[0], draft[1]
		}
	})
}

// gptOSSPreset is a --gpt-oss-* preset and its sampling.
func gptOSSPreset(c *config, repo, file string) func(*config, string) error {
	e, sp := &c.opts.Engine, &c.sampling
	return modelPreset(func(c *config) {
		c.hf.Repo, c.hf.File, c.port = repo, file, 8013
		e.Context.UBatchSize, e.Context.BatchSize, e.Parallel, e.Context.ContextSize = 2048, 32768, 2, 131072*2
		sp.Temperature, sp.TopP, sp.TopK, sp.MinP = 1, 1, 0, 0.01
		c.opts.Jinja = true
	})
}

// mergeSorted adds names to a sorted set.
func mergeSorted(set, names []string) []string {
	for _, n := range names {
		i := sort.SearchStrings(set, n)
		if i < len(set) && set[i] == n {
			continue
		}
		set = append(set[:i], append([]string{n}, set[i:]...)...)
	}
	return set
}

func floatPtr(dst **float32) func(*config, string) error {
	return func(_ *config, v string) error {
		f, err := parseFloat(v)
		if err == nil {
			x := float32(f)
			*dst = &x
		}
		return err
	}
}

// The weights --cpu-moe, --n-cpu-moe and --n-cpu-ffn keep on the CPU, as
// llama.cpp's common names them: the MoE experts and the dense FFN.
const (
	ffnExpsPattern  = `\.ffn_(up|down|gate|gate_up)_(ch|)exps`
	ffnDensePattern = `\.ffn_(up|down|gate)\.`
)

// cpuLayers keeps the weights matching ffn in the first N layers on the
// CPU (--n-cpu-moe, --n-cpu-ffn).
// tensorOverrides reads -ot's PATTERN=TYPE,... into mo.
func tensorOverrides(mo *llama.ModelOptions) func(*config, string) error {
	return func(_ *config, v string) error {
		for _, p := range strings.Split(v, ",") {
			pat, buft, ok := strings.Cut(p, "=")
			if !ok {
				return fmt.Errorf("invalid tensor buffer type override %q", p)
			}
			mo.TensorBufferOverrides = append(mo.TensorBufferOverrides, llama.TensorBufferOverride{Pattern: pat, BufferType: buft})
		}
		return nil
	}
}

// cpuMoE keeps mo's MoE experts on the CPU (-cmoe).
func cpuMoE(mo *llama.ModelOptions) func(*config, string) error {
	return func(*config, string) error {
		mo.TensorBufferOverrides = append(mo.TensorBufferOverrides, llama.TensorBufferOverride{Pattern: ffnExpsPattern, BufferType: "CPU"})
		return nil
	}
}

// removed refuses a flag llama.cpp removed, as llama.cpp does.
func removed(hint string) func(*config, string) error {
	return func(*config, string) error {
		return errors.New("the argument has been removed. " + hint)
	}
}

func cpuLayers(mo *llama.ModelOptions, ffn string) func(*config, string) error {
	return func(_ *config, v string) error {
		n, err := parseInt(v)
		if err != nil {
			return err
		}
		if n < 0 {
			return errors.New("invalid value")
		}
		for i := range min(n, 1<<16) { // no model has more layers
			mo.TensorBufferOverrides = append(mo.TensorBufferOverrides, llama.TensorBufferOverride{Pattern: fmt.Sprintf(`blk\.%d%s`, i, ffn), BufferType: "CPU"})
		}
		return nil
	}
}

// overrideKV reads one KEY=TYPE:VALUE of --override-kv.
func overrideKV(mo *llama.ModelOptions, item string) error {
	key, rest, ok := strings.Cut(item, "=")
	typ, val, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || key == "" || len(key) > 127 {
		return fmt.Errorf("invalid metadata override %q (want KEY=TYPE:VALUE)", item)
	}
	var v any
	var err error
	switch typ {
	case "int":
		v, err = strconv.ParseInt(val, 10, 64)
	case "float":
		v, err = strconv.ParseFloat(val, 64)
	case "bool":
		switch val {
		case "true":
			v = true
		case "false":
			v = false
		default:
			err = errors.New("not true or false")
		}
	case "str":
		if len(val) > 127 {
			err = errors.New("string longer than 127 bytes")
		}
		v = val
	default:
		err = errors.New("type is not int, float, bool or str")
	}
	if err != nil {
		return fmt.Errorf("invalid metadata override %q: %v", item, err)
	}
	if mo.KVOverrides == nil {
		mo.KVOverrides = map[string]any{}
	}
	mo.KVOverrides[key] = v
	return nil
}

// templateKwargs adds the members of a JSON object to the default template
// variables.
func (c *config) templateKwargs(obj string) error {
	var m map[string]any
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if c.opts.ChatTemplateKwargs == nil {
		c.opts.ChatTemplateKwargs = map[string]any{}
	}
	for k, v := range m {
		c.opts.ChatTemplateKwargs[k] = v
	}
	return nil
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// setSchema makes the default grammar from a JSON schema.
func (c *config) setSchema(schema []byte) error {
	g, err := jsonschema.ToGBNF(schema)
	if err != nil {
		return fmt.Errorf("invalid JSON schema: %v", err)
	}
	c.sampling.Grammar, c.grammarSet, c.jsonSchema = g, true, string(schema)
	return nil
}

var errHelp = errors.New("help requested")

// normalize spells an argument as llama-server looks it up: "--" options
// with '_' read as '-' (--backend_sampling is --backend-sampling).
func normalize(a string) string {
	if strings.HasPrefix(a, "--") {
		return strings.ReplaceAll(a, "_", "-")
	}
	return a
}

// envValue reads f's environment variable as llama-server does; for a
// switch with negative forms LLAMA_ARG_NO_X set (to anything) means off.
func envValue(f *flagDef, getenv func(string) string) (string, bool) {
	if f.env == "" {
		return "", false
	}
	if len(f.neg) > 0 && strings.HasPrefix(f.env, "LLAMA_ARG_") {
		if v := getenv("LLAMA_ARG_NO_" + strings.TrimPrefix(f.env, "LLAMA_ARG_")); v != "" {
			return "0", true
		}
	}
	v := getenv(f.env)
	return v, v != ""
}

// parseFlags reads llama-server's command line and its environment
// variables (the command line wins).
func parseFlags(args []string, getenv func(string) string, usage io.Writer) (*config, error) {
	c := &config{host: "127.0.0.1", port: 8080, timeout: 3600 * time.Second, sampling: sampling.Defaults(),
		maxConns: defaultMaxConns, maxConnsPerClient: defaultMaxConnsPerClient}
	c.opts.Slots = true
	// As llama-server: LLAMA_SERVER_SLOTS_DEBUG (a non-zero number) shows
	// more of each slot in /slots.
	if n, err := strconv.Atoi(getenv("LLAMA_SERVER_SLOTS_DEBUG")); err == nil && n != 0 {
		c.opts.SlotsDebug = true
	}
	c.opts.Jinja = true
	c.opts.NPredict = -1
	c.opts.ModelsMax = 4
	c.opts.Engine.Parallel = -1
	c.opts.Engine.Context.Threads = runtime.NumCPU()
	c.cacheRAMMiB = 8192
	table := flagTable(c)
	byName := map[string]*flagDef{}
	for i := range table {
		for _, n := range append(append([]string{}, table[i].names...), table[i].neg...) {
			byName[n] = &table[i]
		}
	}
	for i := range table {
		f := &table[i]
		v, ok := envValue(f, getenv)
		if !ok || f.set == nil {
			continue
		}
		switch {
		case f.arg == "" && len(f.neg) == 0:
			if !isTruthy(v) {
				continue
			}
			v = ""
		case f.arg == "":
			switch {
			case isTruthy(v):
				v = "true"
			case isFalsey(v):
				v = "false"
			default:
				return nil, fmt.Errorf("environment variable %s: invalid boolean value %q", f.env, v)
			}
		}
		if err := f.set(c, v); err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", f.env, err)
		}
	}
	for i := 0; i < len(args); i++ {
		a := normalize(args[i])
		f, ok := byName[a]
		inline, hasInline := "", false
		if !ok {
			// An extension: --name=value for options taking a value.
			if name, v, cut := strings.Cut(args[i], "="); cut {
				if g, found := byName[normalize(name)]; found && g.arg != "" && g.arg2 == "" {
					f, a, inline, hasInline, ok = g, normalize(name), v, true, true
				}
			}
		}
		if !ok {
			return nil, fmt.Errorf("invalid argument: %s (see --help)", args[i])
		}
		if f.names[0] == "-h" {
			printUsage(usage, table)
			return nil, errHelp
		}
		if f.names[0] == "--completion-bash" {
			printCompletion(usage, table)
			return nil, errHelp
		}
		var val string
		switch {
		case f.arg == "" && len(f.neg) > 0:
			val = "true"
			if slicesContains(f.neg, a) {
				val = "false"
			}
		case f.arg == "":
		case hasInline:
			val = inline
		default:
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s: expected a value (%s)", a, f.arg)
			}
			i++
			val = args[i]
			if f.arg2 != "" {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("%s: expected a second value (%s)", a, f.arg2)
				}
				i++
				val += "\x00" + args[i]
			}
		}
		if err := f.set(c, val); err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
	}
	if c.version || c.listDevices || c.cacheList {
		return c, nil
	}
	if err := c.gcpEnv(getenv); err != nil {
		return nil, err
	}
	return c, c.finish()
}

// gcpEnv reads the Vertex AI variables that llama-server reads: with
// AIP_MODE=PREDICTION it serves AIP_PREDICT_ROUTE (default /predict) and
// AIP_HEALTH_ROUTE, on port AIP_HTTP_PORT (default 8080), which overrides
// --port as in llama-server.
func (c *config) gcpEnv(getenv func(string) string) error {
	if getenv("AIP_MODE") != "PREDICTION" {
		return nil
	}
	c.opts.GCP = server.GCPOptions{Enabled: true, PredictRoute: getenv("AIP_PREDICT_ROUTE"), HealthRoute: getenv("AIP_HEALTH_ROUTE")}
	c.port = 8080
	if v := getenv("AIP_HTTP_PORT"); v != "" {
		p, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("AIP_HTTP_PORT: %q is not a port", v)
		}
		c.port = p
	}
	return nil
}

// finish turns what the flags said into server options, as llama-server
// does after parsing.
func (c *config) finish() error {
	o := &c.opts
	e := &o.Engine
	if e.Parallel < 0 {
		// -np auto: 4 slots sharing a unified KV cache.
		e.Parallel = 4
		if !c.kvUnifiedSet {
			e.Context.KVUnified = true
		}
	}
	if e.Context.ThreadsBatch <= 0 {
		e.Context.ThreadsBatch = e.Context.Threads
	}
	c.threadPools()
	if e.KVUnifiedPerSlot > 0 && e.Context.ContextSize == 0 {
		e.Context.ContextSize = e.KVUnifiedPerSlot * e.Parallel
	}
	if len(c.aliases) > 0 {
		// The server takes the names comma-separated (its id is the first).
		o.Alias = strings.Join(c.aliases, ",")
	}
	// As llama-server: --verbose also adds the __verbose debug object to
	// OpenAI-shaped answers; --offline keeps POST /models off the network.
	o.Verbose = c.verbose
	o.Offline = c.hf.Offline
	if c.noMMProj {
		o.Multimodal.Projector = ""
	}
	if c.loraNoApply {
		for i := range e.Adapters {
			e.Adapters[i].Scale = 0
		}
	}
	if !c.corsOriginsExplicit {
		// llama-server's default is "*", which lets any web page the
		// user visits call a server without a key: then only the
		// server's own page and loopback origins may (a page cannot send
		// the key). As llama-server, server tools or MCP servers narrow
		// CORS to localhost too.
		o.CORSOrigins = []string{"*"}
		if len(o.APIKeys) == 0 || len(o.Tools.Enabled) > 0 || o.Tools.MCPServersConfig != "" || o.Tools.MCPServersJSON != "" {
			o.CORSOrigins = []string{"localhost"}
		}
	}
	s := c.sampling
	o.Sampling = &s
	o.Timeout = 0
	o.WriteTimeout = c.timeout
	if c.timeout <= 0 {
		o.WriteTimeout = -1
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// printUsage prints the options grouped as llama-server's --help does.
func printUsage(w io.Writer, table []flagDef) {
	fmt.Fprintln(w, "usage: server [options]   (llama-server's options, meanings and defaults)")
	for sec := secCommon; sec <= secServer; sec++ {
		fmt.Fprintf(w, "\n----- %s -----\n\n", sectionNames[sec])
		for _, f := range table {
			if f.sec != sec {
				continue
			}
			n := strings.Join(append(append([]string{}, f.names...), f.neg...), ", ")
			if f.arg != "" {
				n += " " + f.arg
			}
			if f.arg2 != "" {
				n += " " + f.arg2
			}
			help := f.help
			if f.env != "" {
				help += " (env: " + f.env + ")"
			}
			if len(n) > 40 {
				fmt.Fprintf(w, "%s\n%-41s %s\n", n, "", help)
			} else {
				fmt.Fprintf(w, "%-41s %s\n", n, help)
			}
		}
	}
}

// printCompletion prints a bash completion script of the options.
func printCompletion(w io.Writer, table []flagDef) {
	var names []string
	for _, f := range table {
		names = append(names, f.names...)
		names = append(names, f.neg...)
	}
	fmt.Fprintf(w, "_llama_server_completions() {\n    COMPREPLY=( $(compgen -W %q -- \"${COMP_WORDS[COMP_CWORD]}\") )\n}\ncomplete -F _llama_server_completions server\n", strings.Join(names, " "))
}

// modelSource makes the model local when it is not a local file:
// -hf/--hf-repo (with --hf-file, --hf-token, --offline) pulls it into the
// Hugging Face cache, with a progress bar on progress, and points the
// options at it (see pullHF); --spec-draft-hf does the same for the draft
// model. --model-url and --mmproj-url download their files (fetchURL);
// -dr/--docker-repo pulls the model from an OCI registry (pullDocker).
func (c *config) modelSource(ctx context.Context, progress io.Writer) error {
	if c.dockerRepo != "" {
		p, err := pullDocker(ctx, c.dockerRepo, c.hf.Offline, os.Getenv, progress)
		if err != nil {
			return fmt.Errorf("--docker-repo %s: %w", c.dockerRepo, err)
		}
		c.opts.Model = p
	}
	if c.modelURL != "" && c.hf.Repo == "" {
		p, err := fetchURL(ctx, c.modelURL, c.opts.Model, c.hf.Offline, os.Getenv, progress)
		if err != nil {
			return fmt.Errorf("--model-url %s: %w", c.modelURL, err)
		}
		c.opts.Model = p
	}
	if c.mmprojURL != "" && !c.noMMProj {
		p, err := fetchURL(ctx, c.mmprojURL, c.opts.Multimodal.Projector, c.hf.Offline, os.Getenv, progress)
		if err != nil {
			return fmt.Errorf("--mmproj-url %s: %w", c.mmprojURL, err)
		}
		c.opts.Multimodal.Projector = p
	}
	if err := pullHF(ctx, c.hf, &c.opts, progress); err != nil {
		return fmt.Errorf("-hf %s: %w", c.hf.Repo, err)
	}
	if c.draftHF != "" {
		// As llama-server, -md names the file of the draft repo then.
		// Without --spec-type, or with draft-mtp, an MTP head the repo
		// ships is taken first (its type follows from the file, as with
		// llama-server).
		sd := &c.opts.Engine.Speculative
		mtp := sd.DraftModel == "" && (len(sd.Types) == 0 || slices.Contains(sd.Types, engine.SpecDraftMTP))
		res, err := hub.PullFiles(ctx, c.draftHF, hub.Options{File: sd.DraftModel, Token: c.hf.Token, Offline: c.hf.Offline, MTP: mtp,
			Progress: hub.ProgressBar(progress)})
		if err != nil {
			return fmt.Errorf("--spec-draft-hf %s: %w", c.draftHF, err)
		}
		switch {
		case res.MTP != "":
			sd.DraftModel = res.MTP
		case res.Model != "":
			sd.DraftModel = res.Model
		default:
			return fmt.Errorf("--spec-draft-hf %s: a preset repo, not a draft model", c.draftHF)
		}
	}
	return nil
}

// samplerList sets the default samplers from a list of names or, when
// seq is not empty, a sequence of letters (sampling.ParseSamplers,
// ParseSamplerSeq). As llama-server, a name or letter no sampler has is
// skipped with a warning at start: scripts written for older llama.cpp
// name "tfs_z", which it no longer has.
func samplerList(c *config, names []string, seq string) error {
	list, skipped := sampling.ParseSamplers(names)
	if seq != "" {
		list, skipped = sampling.ParseSamplerSeq(seq)
	}
	for _, s := range skipped {
		c.warnings = append(c.warnings, fmt.Sprintf("no sampler is named %q: skipped", s))
	}
	if len(list) > sampling.MaxSamplers {
		return fmt.Errorf("%d samplers; at most %d are allowed", len(list), sampling.MaxSamplers)
	}
	c.sampling.Samplers = list
	return nil
}
