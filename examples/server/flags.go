package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/server"
)

// config is what the command line (llama-server's flags) sets.
type config struct {
	opts    server.Options
	host    string
	port    int
	timeout time.Duration
	verbose bool
}

// A flag of llama-server: its names, whether it takes a value, its
// environment variable, and what it sets.
type flagDef struct {
	names []string
	arg   string // "" for switches
	env   string
	help  string
	set   func(c *config, v string) error
}

func atoi(dst *int) func(*config, string) error {
	return func(_ *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		*dst = n
		return nil
	}
}

// flagTable lists the llama-server flags this server honours, with
// llama-server's meanings and defaults.
func flagTable(c *config) []flagDef {
	o := &c.opts
	e := &o.Engine
	on := func(b *bool, v bool) func(*config, string) error {
		return func(*config, string) error { *b = v; return nil }
	}
	return []flagDef{
		{[]string{"-m", "--model"}, "FNAME", "LLAMA_ARG_MODEL", "model path", func(_ *config, v string) error { o.Model = v; return nil }},
		{[]string{"-a", "--alias"}, "STRING", "LLAMA_ARG_ALIAS", "model name for the API", func(_ *config, v string) error { o.Alias = v; return nil }},
		{[]string{"-c", "--ctx-size"}, "N", "LLAMA_ARG_CTX_SIZE", "context size (0: from the model)", atoi(&e.CtxSize)},
		{[]string{"-np", "--parallel"}, "N", "LLAMA_ARG_N_PARALLEL", "number of slots (-1: auto, 4 with a unified KV cache)", atoi(&e.Parallel)},
		{[]string{"-b", "--batch-size"}, "N", "LLAMA_ARG_BATCH", "logical batch size (default 2048)", atoi(&e.BatchSize)},
		{[]string{"-ub", "--ubatch-size"}, "N", "LLAMA_ARG_UBATCH", "physical batch size (default 512)", atoi(&e.UBatchSize)},
		{[]string{"-t", "--threads"}, "N", "LLAMA_ARG_THREADS", "threads for generation (-1: all CPUs)", atoi(&e.Threads)},
		{[]string{"-tb", "--threads-batch"}, "N", "", "threads for prompts (default: --threads)", atoi(&e.ThreadsBatch)},
		{[]string{"-n", "--predict", "--n-predict"}, "N", "LLAMA_ARG_N_PREDICT", "default tokens to predict (-1: no limit)", atoi(&o.NPredict)},
		{[]string{"--host"}, "HOST", "LLAMA_ARG_HOST", "address to listen on (default 127.0.0.1)", func(c *config, v string) error { c.host = v; return nil }},
		{[]string{"--port"}, "PORT", "LLAMA_ARG_PORT", "port to listen on (default 8080)", atoi(&c.port)},
		{[]string{"--api-key"}, "KEY", "LLAMA_API_KEY", "API keys, comma-separated", func(_ *config, v string) error {
			o.APIKeys = append(o.APIKeys, splitList(v)...)
			return nil
		}},
		{[]string{"--api-key-file"}, "FNAME", "LLAMA_ARG_API_KEY_FILE", "file of API keys, one per line (# comments)", func(_ *config, v string) error {
			b, err := os.ReadFile(v)
			if err != nil {
				return err
			}
			for _, l := range strings.Split(string(b), "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
					o.APIKeys = append(o.APIKeys, l)
				}
			}
			return nil
		}},
		{[]string{"--embedding", "--embeddings"}, "", "LLAMA_ARG_EMBEDDINGS", "embedding server", on(&e.Embedding, true)},
		{[]string{"--reranking", "--rerank"}, "", "LLAMA_ARG_RERANKING", "reranking server", func(*config, string) error { e.Reranking, e.Embedding = true, true; return nil }},
		{[]string{"--pooling"}, "{none,mean,cls,last,rank}", "LLAMA_ARG_POOLING", "embedding pooling", func(_ *config, v string) error {
			p, err := llama.ParsePoolingType(v)
			e.Pooling = p
			return err
		}},
		{[]string{"--metrics"}, "", "LLAMA_ARG_ENDPOINT_METRICS", "enable GET /metrics", on(&o.Metrics, true)},
		{[]string{"--slots"}, "", "LLAMA_ARG_ENDPOINT_SLOTS", "enable GET /slots (default)", on(&o.Slots, true)},
		{[]string{"--no-slots"}, "", "", "disable GET /slots", on(&o.Slots, false)},
		{[]string{"--props"}, "", "LLAMA_ARG_ENDPOINT_PROPS", "enable changing global properties with POST /props", on(&o.PropsEndpoint, true)},
		{[]string{"--slot-save-path"}, "PATH", "", "folder for slot save/restore", func(_ *config, v string) error { o.SlotSavePath = v; return nil }},
		{[]string{"--lora"}, "FNAME", "", "LoRA adapters, comma-separated (scale 1)", func(_ *config, v string) error {
			for _, p := range splitList(v) {
				e.Adapters = append(e.Adapters, server.AdapterSpec{Path: p, Scale: 1})
			}
			return nil
		}},
		{[]string{"--lora-scaled"}, "FNAME:SCALE,...", "", "LoRA adapters with scales", func(_ *config, v string) error {
			for _, p := range splitList(v) {
				i := strings.LastIndexByte(p, ':')
				if i < 0 {
					return fmt.Errorf("%q is not FNAME:SCALE", p)
				}
				s, err := strconv.ParseFloat(p[i+1:], 32)
				if err != nil {
					return fmt.Errorf("bad scale in %q", p)
				}
				e.Adapters = append(e.Adapters, server.AdapterSpec{Path: p[:i], Scale: float32(s)})
			}
			return nil
		}},
		{[]string{"--chat-template"}, "JINJA_TEMPLATE", "LLAMA_ARG_CHAT_TEMPLATE", "chat template: built-in name or Jinja", func(_ *config, v string) error { o.ChatTemplate = v; return nil }},
		{[]string{"--chat-template-file"}, "FNAME", "LLAMA_ARG_CHAT_TEMPLATE_FILE", "chat template file", func(_ *config, v string) error { o.ChatTemplateFile = v; return nil }},
		{[]string{"--jinja"}, "", "LLAMA_ARG_JINJA", "use Jinja templates (default)", on(&o.Jinja, true)},
		{[]string{"--no-jinja"}, "", "", "accepted; templates are always Jinja here", on(&o.Jinja, false)},
		{[]string{"--reasoning-format"}, "FORMAT", "LLAMA_ARG_THINK", "none, deepseek or auto", func(_ *config, v string) error { o.ReasoningFormat = v; return nil }},
		{[]string{"--cors-origins"}, "ORIGINS", "LLAMA_ARG_CORS_ORIGINS", "allowed CORS origins, comma-separated (default: none)", func(_ *config, v string) error {
			o.CORSOrigins = splitList(v)
			return nil
		}},
		{[]string{"--sleep-idle-seconds"}, "SECONDS", "", "unload the model after that long idle (-1: never)", func(_ *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%q is not an integer", v)
			}
			o.SleepIdleSeconds = max(n, 0)
			return nil
		}},
		{[]string{"-fa", "--flash-attn"}, "[on|off|auto]", "LLAMA_ARG_FLASH_ATTN", "flash attention (default auto)", func(_ *config, v string) error {
			switch v {
			case "on", "1", "true", "":
				e.FlashAttention = llama.FlashAttentionOn
			case "off", "0", "false":
				e.FlashAttention = llama.FlashAttentionOff
			case "auto":
				e.FlashAttention = llama.FlashAttentionAuto
			default:
				return fmt.Errorf("%q is not on, off or auto", v)
			}
			return nil
		}},
		{[]string{"-ctk", "--cache-type-k"}, "TYPE", "LLAMA_ARG_CACHE_TYPE_K", "KV cache type for K (default f16)", func(_ *config, v string) error { e.TypeK = v; return nil }},
		{[]string{"-ctv", "--cache-type-v"}, "TYPE", "LLAMA_ARG_CACHE_TYPE_V", "KV cache type for V (default f16)", func(_ *config, v string) error { e.TypeV = v; return nil }},
		{[]string{"--context-shift"}, "", "LLAMA_ARG_CONTEXT_SHIFT", "shift the context when it is full", on(&e.ContextShift, true)},
		{[]string{"--no-context-shift"}, "", "", "stop when the context is full (default)", on(&e.ContextShift, false)},
		{[]string{"--cache-reuse"}, "N", "LLAMA_ARG_CACHE_REUSE", "min chunk for KV cache reuse", atoi(&e.CacheReuse)},
		{[]string{"-kvu", "--kv-unified"}, "", "LLAMA_ARG_KV_UNIFIED", "one KV buffer for all slots", on(&e.KVUnified, true)},
		{[]string{"-to", "--timeout"}, "N", "LLAMA_ARG_TIMEOUT", "read/write timeout in seconds (default 3600)", func(c *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a number of seconds", v)
			}
			c.timeout = time.Duration(n) * time.Second
			return nil
		}},
		{[]string{"--models-dir"}, "PATH", "LLAMA_ARG_MODELS_DIR", "folder of models (router mode)", func(_ *config, v string) error { o.ModelsDir = v; return nil }},
		{[]string{"--models-preset"}, "PATH", "LLAMA_ARG_MODELS_PRESET", "INI file of model presets (router mode)", func(_ *config, v string) error { o.ModelsPreset = v; return nil }},
		{[]string{"--models-max"}, "N", "LLAMA_ARG_MODELS_MAX", "most models loaded at once (default 4, 0: no limit)", atoi(&o.ModelsMax)},
		{[]string{"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N", "LLAMA_ARG_N_GPU_LAYERS", "layers on the GPU: a number, auto or all", func(_ *config, v string) error {
			switch v {
			case "auto", "all", "-1":
				o.ModelOptions.GPULayers, o.ModelOptions.CPUOnly = 0, false
			default:
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return fmt.Errorf("%q is not a layer count, auto or all", v)
				}
				o.ModelOptions.GPULayers, o.ModelOptions.CPUOnly = n, n == 0
			}
			return nil
		}},
		{[]string{"-mg", "--main-gpu"}, "INDEX", "LLAMA_ARG_MAIN_GPU", "GPU for the whole model with split mode none", atoi(&o.ModelOptions.MainGPU)},
		{[]string{"--mlock"}, "", "LLAMA_ARG_MLOCK", "keep the model in RAM", func(*config, string) error { o.ModelOptions.Load = llama.LoadMmapMlock; return nil }},
		{[]string{"--no-mmap"}, "", "LLAMA_ARG_NO_MMAP", "do not memory-map the model", func(*config, string) error { o.ModelOptions.Load = llama.LoadRead; return nil }},
		{[]string{"-v", "--verbose"}, "", "", "log llama.cpp's messages", func(c *config, _ string) error { c.verbose = true; return nil }},
	}
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

var errHelp = errors.New("help requested")

// parseFlags reads llama-server's command line (and its environment
// variables, which the command line overrides).
func parseFlags(args []string, getenv func(string) string, usage io.Writer) (*config, error) {
	c := &config{host: "127.0.0.1", port: 8080, timeout: 3600 * time.Second}
	c.opts.Slots = true
	c.opts.Jinja = true
	c.opts.NPredict = -1
	c.opts.ModelsMax = 4
	c.opts.Engine.Parallel = -1
	c.opts.Engine.Threads = -1
	table := flagTable(c)
	byName := map[string]*flagDef{}
	for i := range table {
		for _, n := range table[i].names {
			byName[n] = &table[i]
		}
	}
	for i := range table {
		if f := &table[i]; f.env != "" {
			if v := getenv(f.env); v != "" {
				if f.arg == "" && (v == "0" || v == "false") {
					continue
				}
				if err := f.set(c, v); err != nil {
					return nil, fmt.Errorf("%s: %w", f.env, err)
				}
			}
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" {
			printUsage(usage, table)
			return nil, errHelp
		}
		name, val, hasVal := strings.Cut(a, "=")
		f, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("unknown argument %q (see --help)", a)
		}
		switch {
		case f.arg == "":
			if hasVal {
				return nil, fmt.Errorf("%s takes no value", name)
			}
		case f.arg == "[on|off|auto]" && !hasVal:
			if i+1 < len(args) && (args[i+1] == "on" || args[i+1] == "off" || args[i+1] == "auto") {
				i++
				val = args[i]
			}
		case !hasVal:
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs a value (%s)", name, f.arg)
			}
			i++
			val = args[i]
		}
		if err := f.set(c, val); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	e := &c.opts.Engine
	if e.Parallel < 0 {
		e.Parallel, e.KVUnified = 4, true
	}
	if e.Threads < 0 {
		e.Threads = runtime.NumCPU()
	}
	if c.opts.Model == "" && c.opts.ModelsDir == "" && c.opts.ModelsPreset == "" {
		return nil, errors.New("no model: give -m FNAME (or --models-dir / --models-preset)")
	}
	c.opts.Timeout = 0
	return c, nil
}

func printUsage(w io.Writer, table []flagDef) {
	fmt.Fprintln(w, "usage: server -m MODEL [options]   (llama-server's flags, meanings and defaults)")
	sort.SliceStable(table, func(i, j int) bool {
		return table[i].names[len(table[i].names)-1] < table[j].names[len(table[j].names)-1]
	})
	for _, f := range table {
		n := strings.Join(f.names, ", ")
		if f.arg != "" {
			n += " " + f.arg
		}
		fmt.Fprintf(w, "  %-44s %s", n, f.help)
		if f.env != "" {
			fmt.Fprintf(w, " (env: %s)", f.env)
		}
		fmt.Fprintln(w)
	}
}
