// Command gpubench measures the server on a GPU (or a CPU) against the
// bare decode limit and llama-server, on random-weight models it makes
// itself, and prints one table.
//
//	go run ./internal/cmd/gpubench                        # a GPU, the default shapes
//	go run ./internal/cmd/gpubench -flavor vulkan          # the Vulkan build
//	go run ./internal/cmd/gpubench -device cpu             # a CPU, tiny shapes (about a minute on 2 cores)
//
// It writes two models with the GGUF writer of internal/gguf (no
// download; cached in the user cache folder, go-llama-bench): a llama
// with a 262,144-token vocabulary and Gemma 3 270M's widths (640 wide, 18
// layers, 2048 feed-forward, 5 heads of 128 over 1 KV head: Gemma's 4
// heads of 256 do not fit llama's square query projection), and a
// 1B-class llama in F16 with a 32,000-token vocabulary (2048 wide, 16
// layers, 8192 feed-forward, 32 heads over 8). Both vocabularies are
// synthetic SentencePiece ones; the requests send their prompts as tokens.
//
// For each model it runs, with the same slots, context, KV layout
// (-kvu), flash attention (-fa) and threads (-t):
//
//   - the limit: bare llama.Context.Decode steps of one token for each
//     of n sequences, reading every row's logits after each step as a
//     generating loop must (on a GPU the decode only queues the work);
//   - our server, in process (server.New, httptest);
//   - llama-server, when a build is found (-llama-server, else the one
//     llama-install -server put beside the library).
//
// Every batch size up to the largest client count is decoded once on
// each side before measuring, and each client count's first round of each
// side is not counted. Then for each client count (-clients) and each
// mode (streaming and not) the two servers take turns for -rounds rounds.
// Every client sends one /completion of -n tokens (ignore_eos, a prompt
// of 8 tokens, no prompt cache, llama-server's default sampling, a seed
// per client).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/lib"
	"github.com/x/llama/server"
)

// promptLen is the prompt of every request, in tokens.
const promptLen = 8

// shape is one model of the benchmark.
type shape struct {
	name  string
	path  string // a given file, or "": made from the fields below
	vocab int
	opts  gguf.TinyModelOptions
	typ   gguf.TensorType
}

// shapes returns the models: the real shapes, or tiny ones of the same
// kinds (a large vocabulary and a narrow model; a small vocabulary and a
// wider one) for a CPU.
func shapes(small bool) []shape {
	if small {
		return []shape{
			{"tiny-vocab32k", "", 32768, gguf.TinyModelOptions{NEmbd: 64, NLayer: 2, NHead: 2, NHeadKV: 1, NFF: 256, NCtx: 2048}, gguf.F16},
			{"tiny-vocab4k", "", 4096, gguf.TinyModelOptions{NEmbd: 128, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 512, NCtx: 2048}, gguf.F16},
		}
	}
	return []shape{
		{"gemma3-270m-shape-vocab262k", "", 262144, gguf.TinyModelOptions{NEmbd: 640, NLayer: 18, NHead: 5, NHeadKV: 1, NFF: 2048, NCtx: 32768}, gguf.F16},
		{"1b-f16-vocab32k", "", 32000, gguf.BenchModel1B, gguf.F16},
	}
}

type config struct {
	deadline      time.Time
	device        string
	small         bool
	clients       []int
	modes         []bool // streaming or not
	nGen, rounds  int
	threads       int
	kvu           bool
	fa            string
	sampleThreads int
	backendSmpl   engine.BackendSamplingMode
	llamaServer   string
	models        []string
	// cpuProfile, when set, is where the CPU profile of the process
	// while the servers are measured goes (pprof's format).
	cpuProfile string
	verbose    bool // log every round
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("gpubench: ")
	var (
		device   = flag.String("device", "gpu", "gpu (every layer offloaded) or cpu (none, tiny shapes unless -small=false)")
		small    = flag.Bool("small", false, "tiny shapes (the default with -device cpu)")
		clients  = flag.String("clients", "", "client counts, comma-separated (default 1,8,32,64; 1,4 with tiny shapes)")
		modes    = flag.String("stream", "both", "streaming requests: both, true or false")
		nGen     = flag.Int("n", 0, "tokens per request (default 128; 16 with tiny shapes)")
		rounds   = flag.Int("rounds", 1, "counted rounds per client count, mode and server (3 for steadier ratios)")
		budget   = flag.Duration("budget", 8*time.Minute, "after this long, the rows not started yet are skipped and the table printed")
		outFile  = flag.String("o", "", "also write the table to this file")
		threads  = flag.Int("t", 0, "compute threads of every side (default: 2 at most on a CPU, the cores up to 8 on a GPU)")
		kvu      = flag.Bool("kvu", false, "one KV buffer shared by the slots (llama-server's -kvu) on every side")
		fa       = flag.String("fa", "auto", "flash attention on every side: on, off or auto")
		sampleTh = flag.Int("sample-threads", 0, "our engine's SampleThreads: goroutines sampling a step's rows at once (0: the engine's default, GOMAXPROCS on a GPU and one after another on a CPU; 1: one after another; -1: GOMAXPROCS)")
		flavor   = flag.String("flavor", "", "the library's flavor: cuda, vulkan, or empty for the CPU build")
		libDir   = flag.String("lib", "", "the library's folder (default: $LLAMA_LIB_DIR, else the flavor's install)")
		lsBin    = flag.String("llama-server", "", "llama-server to compare with (default: the one beside the library; none: skip)")
		onlyModl = flag.String("models", "", "the models to run, comma-separated names (default: both)")
		file     = flag.String("model", "", "a GGUF file to measure instead of the made models (its vocabulary must have 512 tokens or more)")
		backend  = flag.String("backend-sampling", "auto", "our engine's BackendSampling: auto (every request the backend can run samples there on a GPU), asked (none here: the requests do not ask) or always")
		verbose  = flag.Bool("v", false, "log every counted round's figures")
		cpuProf  = flag.String("cpuprofile", "", "write a CPU profile of this process while the servers are measured (the first model's rows) to this file; with -llama-server none it is our server's alone")
	)
	flag.Parse()
	cfg := config{deadline: time.Now().Add(*budget), device: *device, small: *small, nGen: *nGen, rounds: max(*rounds, 1), threads: *threads, kvu: *kvu, fa: *fa, sampleThreads: *sampleTh, cpuProfile: *cpuProf, verbose: *verbose}
	switch cfg.device {
	case "cpu":
		if !isFlagSet("small") {
			cfg.small = true
		}
	case "gpu":
	default:
		log.Fatalf("-device %q: want gpu or cpu", cfg.device)
	}
	if cfg.nGen <= 0 {
		cfg.nGen = 128
		if cfg.small {
			cfg.nGen = 16
		}
	}
	cs := "1,8,32,64"
	if cfg.small {
		cs = "1,4"
	}
	if *clients != "" {
		cs = *clients
	}
	for _, f := range strings.Split(cs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 512 {
			log.Fatalf("-clients %q: want counts from 1 to 512", cs)
		}
		cfg.clients = append(cfg.clients, n)
	}
	switch *modes {
	case "both":
		cfg.modes = []bool{false, true}
	case "true", "false":
		cfg.modes = []bool{*modes == "true"}
	default:
		log.Fatalf("-stream %q: want both, true or false", *modes)
	}
	if _, err := faSetting(cfg.fa); err != nil {
		log.Fatal(err)
	}
	switch *backend {
	case "auto":
		cfg.backendSmpl = engine.BackendSamplingAuto
	case "asked":
		cfg.backendSmpl = engine.BackendSamplingAsked
	case "always":
		cfg.backendSmpl = engine.BackendSamplingAlways
	default:
		log.Fatalf("-backend-sampling %q: want auto, asked or always", *backend)
	}
	if cfg.threads <= 0 {
		cfg.threads = benchlimit.Threads()
		if cfg.device == "gpu" {
			cfg.threads = min(runtime.NumCPU(), 8)
		}
	}
	if *onlyModl != "" {
		cfg.models = strings.Split(*onlyModl, ",")
	}

	fl := lib.Flavor(*flavor)
	if err := llama.Init(llama.LibraryOptions{Dir: *libDir, Flavor: fl}); err != nil {
		log.Fatal(err)
	}
	libPath, _ := llama.LibraryDir()
	devs, err := llama.Devices()
	if err != nil {
		log.Fatal(err)
	}
	var names []string
	gpus := 0
	for _, d := range devs {
		names = append(names, d.Name+" ("+d.Description+")")
		if d.Type != "cpu" {
			gpus++
		}
	}
	log.Printf("library %s; devices: %s", libPath, strings.Join(names, ", "))
	if cfg.device == "gpu" && gpus == 0 {
		log.Print("warning: -device gpu, but the library found no GPU: every side runs on the CPU")
	}
	cfg.llamaServer = *lsBin
	switch cfg.llamaServer {
	case "none":
		cfg.llamaServer = ""
	case "":
		if p, err := lib.ServerPath(libPath); err == nil {
			cfg.llamaServer = p
		} else {
			log.Printf("no llama-server beside the library (%v): its columns stay empty", err)
		}
	}

	log.Print("the table's rows as they are measured:\n" + tableHeader)
	var rows []row
	list := shapes(cfg.small)
	if *file != "" {
		list = []shape{{name: filepath.Base(*file), path: *file}}
	}
	for _, sh := range list {
		if len(cfg.models) > 0 && !slices.Contains(cfg.models, sh.name) {
			continue
		}
		if time.Now().After(cfg.deadline) {
			log.Printf("%s: skipped, past -budget", sh.name)
			continue
		}
		start := time.Now()
		path := sh.path
		if path == "" {
			if path, err = makeModel(sh); err != nil {
				log.Fatalf("%s: %v", sh.name, err)
			}
		}
		log.Printf("%s: model %s ready in %v", sh.name, path, time.Since(start).Round(time.Millisecond))
		r, err := runModel(cfg, sh, path)
		if err != nil {
			log.Fatalf("%s: %v", sh.name, err)
		}
		cfg.cpuProfile = "" // the first model's only: a process has one CPU profile at a time
		rows = append(rows, r...)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "device %s (%s), %d threads, kv unified %v, flash attention %s, sample threads %d, backend sampling %s, %d tokens per request, %d rounds\n\n",
		cfg.device, strings.Join(names, ", "), cfg.threads, cfg.kvu, cfg.fa, cfg.sampleThreads, *backend, cfg.nGen, cfg.rounds)
	printTable(&sb, rows)
	fmt.Print("\n" + sb.String())
	if *outFile != "" {
		if err := os.WriteFile(*outFile, []byte(sb.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func faSetting(s string) (llama.FlashAttention, error) {
	switch s {
	case "auto":
		return llama.FlashAttentionAuto, nil
	case "on":
		return llama.FlashAttentionOn, nil
	case "off":
		return llama.FlashAttentionOff, nil
	}
	return 0, fmt.Errorf("-fa %q: want on, off or auto", s)
}

// makeModel writes sh's vocabulary and model into the user cache (once)
// and returns the model's path.
func makeModel(sh shape) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "go-llama-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	vocab := filepath.Join(dir, fmt.Sprintf("gpubench-vocab-%d.gguf", sh.vocab))
	if _, err := os.Stat(vocab); err != nil {
		tmp := fmt.Sprintf("%s.%d.tmp", vocab, os.Getpid())
		if err := writeVocab(tmp, sh.vocab); err != nil {
			os.Remove(tmp)
			return "", err
		}
		if err := os.Rename(tmp, vocab); err != nil {
			return "", err
		}
	}
	return gguf.BenchModelFile(vocab, "gpubench-"+sh.name, sh.opts, sh.typ)
}

// writeVocab writes a vocabulary-only GGUF of a SentencePiece (llama)
// tokenizer of n tokens: <unk>, <s>, </s>, the 256 byte tokens, the
// printable ASCII characters alone and after the word marker, then
// lowercase words of two letters and more, alone and after the marker.
func writeVocab(path string, n int) error {
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := range 256 {
		// Byte tokens that are not a printable ASCII character alone are
		// control tokens: a random model generates them, and alone they
		// would be invalid UTF-8 (or a control character) in the answer,
		// which llama-server refuses; as control tokens they render as
		// nothing, and tokenizing still falls back to them.
		typ := int32(3)
		if b == '\n' || b == '\t' || (b >= ' ' && b <= '~') {
			typ = 6
		}
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		types = append(types, typ)
	}
	const marker = "\u2581"
	toks, types = append(toks, marker), append(types, 1)
	for c := byte('!'); c <= '~'; c++ {
		toks, types = append(toks, string(c), marker+string(c)), append(types, 1, 1)
	}
	word := []byte{'a', 'a'}
	for len(toks) < n {
		toks, types = append(toks, string(word), marker+string(word)), append(types, 1, 1)
		// The next word: base 26, then one letter longer.
		i := len(word) - 1
		for i >= 0 && word[i] == 'z' {
			word[i] = 'a'
			i--
		}
		if i < 0 {
			word = append(word, 'a')
		} else {
			word[i]++
		}
	}
	toks, types = toks[:n], types[:n]
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = -float32(i)
	}
	w := gguf.NewWriter()
	w.SetKV("general.architecture", "llama")
	w.SetKV("tokenizer.ggml.model", "llama")
	w.SetKV("tokenizer.ggml.tokens", toks)
	w.SetKV("tokenizer.ggml.scores", scores)
	w.SetKV("tokenizer.ggml.token_type", types)
	w.SetKV("tokenizer.ggml.unknown_token_id", uint32(0))
	w.SetKV("tokenizer.ggml.bos_token_id", uint32(1))
	w.SetKV("tokenizer.ggml.eos_token_id", uint32(2))
	w.SetKV("tokenizer.ggml.add_bos_token", true)
	return w.WriteFile(path)
}

// row is one line of the table: a model, a client count and a mode.
type row struct {
	model   string
	clients int
	stream  bool
	limit   float64 // tok/s
	ours    side
	ref     side // llama-server (tok == 0: not run)
	steps   engine.StepTimes
}

// side is one server's figures over the counted rounds.
type side struct {
	tok  int
	took time.Duration
	ttft []time.Duration
	// rounds is the tok/s of each counted round, in order: round k of
	// ours and of llama-server ran one right after the other.
	rounds []float64
}

func (s side) tokS() float64 {
	if s.tok == 0 {
		return 0
	}
	return float64(s.tok) / s.took.Seconds()
}

// runModel measures the limit and the servers on one model.
func runModel(cfg config, sh shape, path string) ([]row, error) {
	maxC := slices.Max(cfg.clients)
	slotCtx := (promptLen + cfg.nGen + 64 + 255) / 256 * 256
	fa, _ := faSetting(cfg.fa)
	mo := llama.ModelOptions{CPUOnly: cfg.device == "cpu"}

	// The limit first, alone on the device.
	log.Printf("%s: the decode limit", sh.name)
	limits, err := measureLimit(cfg, path, benchlimit.DecoderOptions{Seqs: maxC, CtxSize: maxC * slotCtx, Batch: 2048,
		Threads: cfg.threads, Model: mo, KVUnified: cfg.kvu, FlashAttention: fa, ReadLogits: true})
	if err != nil {
		return nil, fmt.Errorf("limit: %w", err)
	}

	srv, err := server.New(context.Background(), server.Options{Model: path, Metrics: true, ModelOptions: mo,
		Logger: slog.New(slog.DiscardHandler),
		Engine: engine.Options{Parallel: maxC, SampleThreads: cfg.sampleThreads, BackendSampling: cfg.backendSmpl, Context: llama.ContextOptions{ContextSize: maxC * slotCtx, BatchSize: 2048,
			Threads: cfg.threads, ThreadsBatch: cfg.threads, KVUnified: cfg.kvu, FlashAttention: fa}}})
	if err != nil {
		return nil, fmt.Errorf("our server: %w", err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	sides := []*server_{{name: "ours", url: ts.URL}}
	pids := []int{os.Getpid()} // the processes under test, for settle
	if cfg.llamaServer != "" {
		th := strconv.Itoa(cfg.threads)
		args := []string{"-m", path, "-t", th, "-tb", th, "-np", strconv.Itoa(maxC), "-c", strconv.Itoa(maxC * slotCtx),
			"-b", "2048", "-fa", cfg.fa, "--no-webui"}
		if cfg.kvu {
			args = append(args, "-kvu")
		}
		if cfg.device == "cpu" {
			args = append(args, "-ngl", "0")
		} else {
			args = append(args, "-ngl", "999")
		}
		url, pid, stop, err := benchlimit.StartServerFlags(cfg.llamaServer, args...)
		if err != nil {
			return nil, fmt.Errorf("llama-server: %w", err)
		}
		defer stop()
		sides = append(sides, &server_{name: "llama-server", url: url})
		pids = append(pids, pid)
	}
	// Every batch size up to the largest client count, once: a prompt of
	// k tokens is a batch of k.
	for _, s := range sides {
		log.Printf("%s: warming %s up", sh.name, s.name)
		for k := 1; k <= max(maxC, promptLen); k++ {
			if _, err := s.round(1, k, 1, false, 0); err != nil {
				return nil, fmt.Errorf("%s warm-up: %w", s.name, err)
			}
		}
		settle(pids)
	}
	stopProfile, err := startProfile(cfg.cpuProfile)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	var rows []row
	for _, c := range cfg.clients {
		for _, stream := range cfg.modes {
			if time.Now().After(cfg.deadline) {
				log.Printf("%s: %d clients, stream %v: skipped, past -budget", sh.name, c, stream)
				continue
			}
			r := row{model: sh.name, clients: c, stream: stream, limit: limits[c]}
			for _, s := range sides { // uncounted
				if _, err := s.round(c, promptLen, cfg.nGen, stream, 0); err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
				settle(pids)
			}
			for k := range cfg.rounds {
				for j := range sides {
					s := sides[(j+k)%len(sides)]
					var before engine.StepTimes
					var err error
					if s.name == "ours" {
						before, err = scrapeSteps(ts.URL)
					}
					if err != nil {
						return nil, fmt.Errorf("/metrics: %w", err)
					}
					res, err := s.round(c, promptLen, cfg.nGen, stream, 1000*k)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", s.name, err)
					}
					if s.name == "ours" {
						after, err := scrapeSteps(ts.URL)
						if err != nil {
							return nil, fmt.Errorf("/metrics: %w", err)
						}
						r.ours.add(res)
						r.steps = r.steps.Add(after.Sub(before))
					} else {
						r.ref.add(res)
					}
					quiet := settle(pids)
					if cfg.verbose {
						log.Printf("%s: %d clients, stream %v, round %d, %s: %.0f tok/s, TTFT p50 %v; idle %v after the pause",
							sh.name, c, stream, k, s.name, res.tokS(), benchlimit.Quantile(res.ttft, 0.5).Round(10*time.Microsecond), quiet)
					}
				}
			}
			// Each row as it is measured: a run cut short still tells.
			log.Print(r.line())
			rows = append(rows, r)
		}
	}
	return rows, nil
}

func (s *side) add(o side) {
	s.tok += o.tok
	s.took += o.took
	s.ttft = append(s.ttft, o.ttft...)
	s.rounds = append(s.rounds, o.tokS())
}

// measureLimit returns the limit's tok/s by client count: cfg.rounds
// runs of nGen steps of one token for each of c sequences, every row's
// logits read after each step, after one decode of every batch size up
// to the largest count.
func measureLimit(cfg config, path string, o benchlimit.DecoderOptions) (map[int]float64, error) {
	d, err := benchlimit.OpenDecoder(path, o)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	mem := d.C.Memory()
	for n := 1; n <= o.Seqs; n++ {
		if err := mem.Clear(); err != nil {
			return nil, err
		}
		if _, err := d.StepErr(n, 0); err != nil {
			return nil, err
		}
	}
	out := map[int]float64{}
	for _, c := range cfg.clients {
		tok, took := 0, time.Duration(0)
		for range cfg.rounds {
			if err := mem.Clear(); err != nil {
				return nil, err
			}
			start := time.Now()
			for pos := range cfg.nGen {
				if _, err := d.StepErr(c, pos); err != nil {
					return nil, err
				}
			}
			took += time.Since(start)
			tok += c * cfg.nGen
		}
		out[c] = float64(tok) / took.Seconds()
	}
	return out, d.C.Idle()
}

// server_ is one server under test.
type server_ struct {
	name, url string
}

// round runs clients requests at once, each of a prompt of prompt tokens
// and nGen generated tokens, and returns their figures; seed offsets the
// clients' seeds.
func (s *server_) round(clients, prompt, nGen int, stream bool, seed int) (side, error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		res  side
		errs []error
	)
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			toks := make([]int, prompt)
			for k := range toks {
				toks[k] = 300 + (i*7+k)%200
			}
			body := map[string]any{"prompt": toks, "n_predict": nGen, "ignore_eos": true, "seed": 42 + seed + i,
				"cache_prompt": false, "stream": stream}
			r, err := benchlimit.Complete(context.Background(), s.url, body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case r.Predicted != nGen:
				errs = append(errs, fmt.Errorf("%d tokens generated, want %d", r.Predicted, nGen))
			default:
				res.tok += r.Predicted
				if !r.First.IsZero() {
					res.ttft = append(res.ttft, r.First.Sub(r.Start))
				}
			}
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	if len(errs) > 0 {
		return res, fmt.Errorf("%d of %d requests failed, the first: %w", len(errs), clients, errs[0])
	}
	return res, nil
}

// startProfile starts the CPU profile of the process into path (nothing
// when path is empty) and returns the function that stops it.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Printf("cpu profile: %v", err)
		}
	}, nil
}
