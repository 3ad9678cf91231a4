// Package benchlimit holds what the benchmarks of the engine and the
// server hold their figures against: the compute-thread count they run
// with, the random 125M-parameter benchmark model, and a bare decoder that
// runs the batches the engine would, without sampling, HTTP or
// bookkeeping (the limit of a figure).
package benchlimit

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// Threads is the compute threads of these benchmarks: never more than
// the cores (ggml's threads spin), at most 2, or $LLAMA_BENCH_THREADS
// when it asks for fewer. On a shared, busy machine 1 thread gives
// steadier ratios: a decode on 2 threads waits at each barrier for a
// thread the system has descheduled.
func Threads() int {
	n := min(2, runtime.NumCPU())
	if v, err := strconv.Atoi(os.Getenv("LLAMA_BENCH_THREADS")); err == nil && v > 0 {
		n = min(n, v)
	}
	return n
}

// BackendSampling reports whether the benchmarks' requests sample on the
// backend (sampling.Params.BackendSampling): $LLAMA_BENCH_BACKEND_SAMPLING
// set to 1.
func BackendSampling() bool { return os.Getenv("LLAMA_BENCH_BACKEND_SAMPLING") == "1" }

// SampleThreads is the engine's SampleThreads in these benchmarks:
// $LLAMA_BENCH_SAMPLE_THREADS, else 0 (the engine's default: one slot
// after another on a CPU).
func SampleThreads() int {
	n, _ := strconv.Atoi(os.Getenv("LLAMA_BENCH_SAMPLE_THREADS"))
	return n
}

// Model is the model the benchmarks that take a model switch run on:
// $LLAMA_BENCH_MODEL, one of "gemma3-270m" (Gemma 3 270M, Q4_K_M, a
// 262,144-token vocabulary), "stories260K", "125M-Q8_0" (the random
// 125M llama), "glm-mtp" and "qwen35-tiny" (ModelGLMMTP,
// ModelQwen35Tiny); def when it is unset. It returns the model's name and path.
func Model(b testing.TB, def string) (name, path string) {
	b.Helper()
	name = os.Getenv("LLAMA_BENCH_MODEL")
	if name == "" {
		name = def
	}
	switch name {
	case "gemma3-270m":
		return name, testenv.RealModel(b, name)
	case "stories260K":
		return name, testenv.Model(b, "stories260K.gguf")
	case "125M-Q8_0":
		return name, Model125M(b)
	case "glm-mtp":
		return name, ModelGLMMTP(b)
	case "qwen35-tiny":
		return name, ModelQwen35Tiny(b)
	}
	b.Fatalf("LLAMA_BENCH_MODEL=%q: want gemma3-270m, stories260K, 125M-Q8_0, glm-mtp or qwen35-tiny", name)
	return "", ""
}

// Model125M returns the path of the 125M benchmark model (Q8_0).
func Model125M(b testing.TB) string {
	b.Helper()
	path, err := gguf.BenchModelFile(testenv.Model(b, "llama-2-tiny-random.gguf"), "llama-125m", gguf.BenchModel125M, gguf.Q8_0)
	if err != nil {
		b.Fatal(err)
	}
	return path
}

// ModelGLMMTP returns the path of a GLM-4.5-layout model with an MTP
// block (512 wide, 4 layers of 4 experts, F32), whose layers pass their
// input on so that its head drafts what it says (gguf's PassThrough):
// for draft-mtp's cost and gain, with --spec-type draft-mtp.
//
// Its byte tokens are plain tokens spelled "<0xNN>": random text then
// never ends inside a UTF-8 character, which llama-server's output parser
// answers with a 500.
func ModelGLMMTP(b testing.TB) string {
	return textModel(b, "glm-mtp-512-text", gguf.TinyModelOptions{Arch: "glm4moe", NEmbd: 512, NLayer: 4, NHead: 8, NFF: 1024,
		NextN: 1, PassThrough: true, NCtx: 4096})
}

// ModelQwen35Tiny returns the path of a tiny Qwen3.5-layout model
// (hybrid: recurrent and attention layers; 4 layers of gguf's tiny
// width, F32) whose layers pass their input on: greedy, its answer soon
// goes round a loop that n-gram drafters draft whole, for the per-step
// cost of speculation through checkpoints of the recurrent state.
func ModelQwen35Tiny(b testing.TB) string {
	return textModel(b, "qwen35-tiny-text", gguf.TinyModelOptions{Arch: "qwen35", NLayer: 4, Seed: 7, PassThrough: true, NCtx: 4096})
}

// textModel writes (once) a model of shape named name with
// llama-2-tiny-random's vocabulary, byte tokens made plain tokens.
func textModel(b testing.TB, name string, shape gguf.TinyModelOptions) string {
	b.Helper()
	vocab := testenv.Model(b, "llama-2-tiny-random.gguf")
	f, err := gguf.Open(vocab)
	if err != nil {
		b.Fatal(err)
	}
	v, _ := f.Get("tokenizer.ggml.token_type")
	types, ok := v.([]int32)
	if !ok {
		b.Fatalf("%s: no token types", vocab)
	}
	types = slices.Clone(types)
	for i, t := range types {
		if t == 6 { // LLAMA_TOKEN_TYPE_BYTE
			types[i] = 1 // normal
		}
	}
	shape.ExtraKV = append(shape.ExtraKV, gguf.KV{Key: "tokenizer.ggml.token_type", Value: types})
	path, err := gguf.BenchModelFile(vocab, name, shape, gguf.F32)
	if err != nil {
		b.Fatal(err)
	}
	return path
}

// Decoder is the limit side: a context of its own on the same model
// file, made as the engine makes its own (seqs sequences of ctxSize/seqs
// positions each, not unified, as the server's default), decoding the
// batches the engine would.
type Decoder struct {
	M     *llama.Model
	C     *llama.Context
	Batch *llama.Batch
	// ReadLogits makes Step read the logits of every row after its
	// decode, as a generating loop must before it samples: on a GPU the
	// decode returns once its work is queued, and a loop that never
	// reads its outputs lets the next decodes overlap it.
	ReadLogits bool
}

// DecoderOptions configure OpenDecoder. The zero value is one sequence
// of 512 positions, batches of 2048, Threads threads, the model on the
// default devices.
type DecoderOptions struct {
	Seqs, CtxSize, Batch int
	Threads              int // 0: Threads()
	Model                llama.ModelOptions
	// KVUnified and FlashAttention are the context's.
	KVUnified      bool
	FlashAttention llama.FlashAttention
	ReadLogits     bool // see Decoder.ReadLogits
}

// NewDecoder loads path and makes the Decoder's context; both are freed
// at the benchmark's end.
func NewDecoder(b testing.TB, path string, seqs, ctxSize, batch int) *Decoder {
	b.Helper()
	d, err := OpenDecoder(path, DecoderOptions{Seqs: seqs, CtxSize: ctxSize, Batch: batch})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	return d
}

// OpenDecoder is NewDecoder outside a test, with all its options; the
// caller closes the Decoder.
func OpenDecoder(path string, o DecoderOptions) (*Decoder, error) {
	o.Seqs, o.CtxSize, o.Batch = max(o.Seqs, 1), cmp.Or(o.CtxSize, 512), cmp.Or(o.Batch, 2048)
	if o.Threads <= 0 {
		o.Threads = Threads()
	}
	m, err := llama.LoadModel(context.Background(), path, o.Model)
	if err != nil {
		return nil, err
	}
	c, err := m.NewContext(llama.ContextOptions{ContextSize: o.CtxSize, Sequences: o.Seqs, BatchSize: o.Batch,
		Threads: o.Threads, ThreadsBatch: o.Threads, KVUnified: o.KVUnified, FlashAttention: o.FlashAttention})
	if err != nil {
		m.Close()
		return nil, err
	}
	return &Decoder{M: m, C: c, Batch: llama.NewBatch(max(o.Batch, o.Seqs), 1), ReadLogits: o.ReadLogits}, nil
}

// Close frees the Decoder's context and model.
func (d *Decoder) Close() {
	d.C.Close()
	d.M.Close()
}

// Steps decodes steps batches of one token for each of n sequences from
// position 0 (a continuous-batching step of n generating slots) after
// clearing the memory, and returns the tokens and the time in Decode.
func (d *Decoder) Steps(b testing.TB, n, steps int) (int, time.Duration) {
	if err := d.C.Memory().Clear(); err != nil {
		b.Fatal(err)
	}
	var spent time.Duration
	for pos := range steps {
		spent += d.Step(b, n, pos)
	}
	return n * steps, spent
}

// Batches decodes, after clearing the memory, the batches of n requests
// of a prompt of prompt tokens and nGen generated tokens each, all
// started at once: one batch of the n prompts (an output at each one's
// last token), then nGen-1 steps of one token for each sequence. It
// returns the tokens generated and the time in Decode.
func (d *Decoder) Batches(b testing.TB, n, prompt, nGen int) (int, time.Duration) {
	if err := d.C.Memory().Clear(); err != nil {
		b.Fatal(err)
	}
	d.Batch.Clear()
	for s := range n {
		for i := range prompt {
			if err := d.Batch.Add(llama.Token(100+s+i), i, s, i == prompt-1); err != nil {
				b.Fatalf("a batch of %d prompts of %d tokens: %v", n, prompt, err)
			}
		}
	}
	start := time.Now()
	if err := d.C.Decode(context.Background(), d.Batch); err != nil {
		b.Fatal(err)
	}
	spent := time.Since(start)
	for k := range nGen - 1 {
		spent += d.Step(b, n, prompt+k)
	}
	return n * nGen, spent
}

// Step decodes one batch of one token for each of n sequences at position
// pos and returns the time in Decode (and in reading the logits, with
// ReadLogits).
func (d *Decoder) Step(b testing.TB, n, pos int) time.Duration {
	took, err := d.StepErr(n, pos)
	if err != nil {
		b.Fatal(err)
	}
	return took
}

// StepErr is Step outside a test.
func (d *Decoder) StepErr(n, pos int) (time.Duration, error) {
	d.Batch.Clear()
	for s := range n {
		if err := d.Batch.Add(llama.Token(100+s+pos), pos, s, true); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := d.C.Decode(context.Background(), d.Batch); err != nil {
		return 0, err
	}
	if d.ReadLogits {
		// llama_get_logits_ith waits for the decode's work: what a
		// sampler's first read of its row does.
		for i := range n {
			if _, err := d.C.Logits(i); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// Throughput holds a figure against its limit over a benchmark's rounds:
// each Round runs the clients at once and the bare steps of the same
// tokens on the Decoder, one after the other so that both see the load of
// the same minute.
type Throughput struct {
	tok, limTok   int
	took, limTook time.Duration
	clients, nGen int
	rounds        int

	// With a prompt: the second limit, of the batches a server runs.
	prompt    int
	batchTok  int
	batchTook time.Duration
}

// NewThroughput measures clients generating nGen tokens each.
func NewThroughput(clients, nGen int) *Throughput {
	return &Throughput{clients: clients, nGen: nGen}
}

// WithPrompt adds a second limit: the batches a server runs for requests
// of a prompt of n tokens that all arrive at once (one batch of every
// client's prompt, whose last tokens give the first generated tokens, then
// nGen-1 steps of one token per client; Decoder.Batches). The first limit,
// nGen steps of one token per client, leaves out the prompts' decode,
// which costs more than the steps it replaces: on the 125M model a batch
// of 5 tokens takes about 3.3 one-token steps (the CPU's matrix kernels
// for several rows against its vector kernel for one). Against the second
// limit, a ratio below 1 is the server's own cost: sampling, HTTP,
// bookkeeping and what they take from the decodes. With 8 clients or more
// the prompts' batch costs one or two steps of 128, less than this
// machine's noise between two runs of a few seconds (8% and more), and
// the two limits read the same within it.
func (t *Throughput) WithPrompt(n int) *Throughput {
	t.prompt = n
	return t
}

// Settle is how long Round waits after the clients before it measures the
// limit: longer than ggml's default polling after a decode.
const Settle = 300 * time.Millisecond

// Round runs gen on clients goroutines at once (each returns the tokens it
// generated) and the limits' decodes on d, one after the other, in turns:
// odd rounds run the limit first, so that neither side always runs right
// after the other (measured interleaved both ways, which side went first
// moved a ratio by several percent).
func (t *Throughput) Round(b testing.TB, d *Decoder, gen func() int) {
	limit := func() {
		steps := func() {
			n, spent := d.Steps(b, t.clients, t.nGen)
			t.limTok += n
			t.limTook += spent
		}
		batches := func() {
			n, spent := d.Batches(b, t.clients, t.prompt, t.nGen)
			t.batchTok += n
			t.batchTook += spent
		}
		switch {
		case t.prompt == 0:
			steps()
		case t.rounds/2%2 == 0:
			steps()
			batches()
		default: // the two limits take turns too
			batches()
			steps()
		}
		d.Idle(b)
	}
	if t.rounds%2 == 1 {
		limit()
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range t.clients {
		wg.Go(func() {
			n := gen()
			mu.Lock()
			t.tok += n
			mu.Unlock()
		})
	}
	wg.Wait()
	t.took += time.Since(start)
	if t.rounds%2 == 0 {
		// A server that lets its compute threads poll after its last
		// decode (llama-server: ggml's default polling, about 100 ms)
		// would take the cores from the limit measured next and make its
		// own ratio look better; this package's engine idles them.
		time.Sleep(Settle)
		limit()
	}
	t.rounds++
}

// Warm runs one round of gen and of the limits' decodes that is not
// counted: the first request of a server and the first decodes of a
// context pay once for what later ones find ready (graphs, caches of the
// vocabulary, the pages of the model), which in the few rounds of a
// benchmark moved a ratio by several percent.
func (t *Throughput) Warm(b testing.TB, d *Decoder, gen func() int) {
	w := Throughput{clients: t.clients, nGen: t.nGen, prompt: t.prompt}
	w.Round(b, d, gen)
}

// Idle puts the decoder's compute threads to sleep (llama.Context.Idle), as
// the engine does when its queue empties: without it they poll for a
// while after the last step and take the cores from the figure measured
// next.
func (d *Decoder) Idle(b testing.TB) {
	if err := d.C.Idle(); err != nil {
		b.Fatal(err)
	}
}

// LimitStep returns the mean time of one bare step so far.
func (t *Throughput) LimitStep() time.Duration {
	if t.limTok == 0 {
		return 0
	}
	return t.limTook / time.Duration(t.limTok/t.clients)
}

// Report fails the benchmark unless every client generated nGen tokens in
// each of rounds rounds, and reports tok/s, limit-tok/s and their ratio.
func (t *Throughput) Report(b *testing.B, rounds int) {
	if want := rounds * t.clients * t.nGen; t.tok != want {
		b.Fatalf("generated %d tokens, want %d", t.tok, want)
	}
	srv, lim := float64(t.tok)/t.took.Seconds(), float64(t.limTok)/t.limTook.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(srv, "tok/s")
	b.ReportMetric(lim, "limit-tok/s")
	b.ReportMetric(srv/lim, "ratio")
	if t.prompt > 0 {
		bl := float64(t.batchTok) / t.batchTook.Seconds()
		b.ReportMetric(bl, "batches-limit-tok/s")
		b.ReportMetric(srv/bl, "batches-ratio")
	}
}

// Prefill decodes toks on sequence seq from position pos in batches of at
// most the decoder's batch size, the last token with output, and returns
// the time in Decode.
func (d *Decoder) Prefill(b testing.TB, seq, pos int, toks []llama.Token) time.Duration {
	var spent time.Duration
	for len(toks) > 0 {
		n := min(len(toks), d.Batch.Cap())
		d.Batch.Clear()
		for i, t := range toks[:n] {
			_ = d.Batch.Add(t, pos+i, seq, i == len(toks)-1)
		}
		start := time.Now()
		if err := d.C.Decode(context.Background(), d.Batch); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		toks, pos = toks[n:], pos+n
	}
	return spent
}

// StartServer starts bin, a server taking llama-server's flags (llama-server
// itself, or a built examples/server), on model with the flags the limit
// benchmarks' servers stand for (Threads threads for both pools, parallel
// slots of 512 positions), and waits until its /health answers 200, three
// minutes at most. It returns the server's URL and the function that stops
// it (an interrupt, then a kill after 10 s).
func StartServer(bin, model string, parallel int) (url string, stop func(), err error) {
	url, _, stop, err = StartServerArgs(bin, model, parallel)
	return url, stop, err
}

// StartServerArgs is StartServer with extra flags after the common ones;
// it also returns the server's process id.
func StartServerArgs(bin, model string, parallel int, extra ...string) (url string, pid int, stop func(), err error) {
	th := strconv.Itoa(Threads())
	args := append([]string{"-m", model, "-t", th, "-tb", th, "-np", strconv.Itoa(parallel),
		"-c", strconv.Itoa(512 * parallel)}, extra...)
	return StartServerFlags(bin, args...)
}

// StartServerFlags starts bin with args and --host and --port of a free
// port of the loopback, and waits as StartServer does. Its output goes to
// this process's stderr when $LLAMA_BENCH_SERVER_LOG is 1.
func StartServerFlags(bin string, args ...string) (url string, pid int, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args = append(slices.Clip(args), "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd := exec.Command(bin, args...)
	if os.Getenv("LLAMA_BENCH_SERVER_LOG") == "1" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	url = "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, cmd.Process.Pid, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", 0, nil, fmt.Errorf("%s not healthy after 3 minutes", bin)
		}
		select {
		case <-exited:
			return "", 0, nil, fmt.Errorf("%s exited before it was healthy: %v (LLAMA_BENCH_SERVER_LOG=1 shows its output)", bin, waitErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Reply is what one /completion request of a benchmark got: when it was
// sent, when its first token arrived (streaming; zero otherwise), when it
// ended, and the tokens the server says it generated.
type Reply struct {
	Start, First, End time.Time
	Predicted         int
}

// Complete posts body to url's /completion and reads the whole answer,
// a stream of events when body asks for one ("stream": true): every event
// before the last is a token (or more), the last one says how many were
// generated.
func Complete(ctx context.Context, url string, body map[string]any) (Reply, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return Reply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/completion", bytes.NewReader(data))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	r := Reply{Start: time.Now()}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return r, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	var last struct {
		Stop            bool `json:"stop"`
		TokensPredicted int  `json:"tokens_predicted"`
	}
	if stream, _ := body["stream"].(bool); !stream {
		if err := json.NewDecoder(resp.Body).Decode(&last); err != nil {
			return r, err
		}
		r.End, r.Predicted = time.Now(), last.TokensPredicted
		return r, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 16<<10), 1<<20) // grows only for long lines: a 1 MiB buffer a request would make the GC run in the process under test
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			return r, fmt.Errorf("event %q: %w", line, err)
		}
		if last.Stop {
			r.End, r.Predicted = time.Now(), last.TokensPredicted
			return r, nil
		}
		if r.First.IsZero() {
			r.First = time.Now()
		}
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	return r, errors.New("the stream ended without its last event")
}

// Quantile returns the q-quantile of ds (nearest rank), 0 for none; ds is
// left as it is.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
