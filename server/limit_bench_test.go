package server

// Benchmarks that hold each server figure against its limit measured in the
// same benchmark function, interleaved with it, so that both see the same
// machine state (the machine is shared: absolute figures move, ratios much
// less). The limit is bare llama.Context.Decode of the batches the engine
// would run, without sampling, HTTP or bookkeeping. They run on the random
// 125M-parameter llama (Q8_0, 32k vocabulary) that gguf.BenchModelFile makes
// once in the user cache, and on stories260K; not in CI.
//
//	go test -run '^$' -bench Limit -benchtime 1x -count 3 ./server/ > bench.txt; go run ./internal/cmd/benchtable bench.txt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/x/llama/engine"

	"github.com/x/llama"
	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/testenv"
)

// limitModels are the models of the throughput benchmark with their client
// counts.
func limitModels(b *testing.B) []struct {
	name, path string
	clients    []int
} {
	return []struct {
		name, path string
		clients    []int
	}{
		{"125M-Q8_0", benchlimit.Model125M(b), []int{1, 8, 16}},
		{"stories260K", testenv.Model(b, "stories260K.gguf"), []int{8, 16}},
	}
}

// limitServer starts a server on path with parallel slots of slotCtx
// tokens each, min(2, NumCPU) threads, and the other engine options of
// o.
func limitServer(b *testing.B, path string, parallel, slotCtx, batch int, o engine.Options) string {
	b.Helper()
	o.Parallel, o.Context.ContextSize, o.Context.BatchSize = parallel, parallel*slotCtx, batch
	o.Context.Threads, o.Context.ThreadsBatch = benchlimit.Threads(), benchlimit.Threads()
	o.SampleThreads = benchlimit.SampleThreads()
	_, ts := newTestServer(b, Options{Model: path, Engine: o})
	return ts.URL
}

// limitStream is what a streaming /completion answered: the arrival time of
// each event with a token and the final count.
type limitStream struct {
	start     time.Time
	times     []time.Time
	predicted int
	merged    int // events that carried more than one token
}

// limitPost streams /completion with body; each event with content is a
// token (ignore_eos, no stop strings: one event per token). stop, when not
// nil, is asked after every event and ends the stream early when true.
func limitPost(ctx context.Context, url string, body any, stop func(*limitStream) bool) (*limitStream, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/completion", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	st := &limitStream{start: time.Now()}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		now := time.Now()
		var ev struct {
			Stop            bool          `json:"stop"`
			TokensPredicted int           `json:"tokens_predicted"`
			Tokens          []llama.Token `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return nil, fmt.Errorf("event %q: %w", line, err)
		}
		if ev.Stop {
			st.predicted = ev.TokensPredicted
			break
		}
		st.times = append(st.times, now)
		if len(ev.Tokens) > 1 {
			st.merged++
		}
		if stop != nil && stop(st) {
			break
		}
	}
	return st, sc.Err()
}

// BenchmarkLimitThroughput is server throughput (streaming /completion,
// 128 tokens per request, ignore_eos, the clients all at once) against
// bare decode of the same number of one-token-per-sequence batches (ratio)
// and against bare decode of the batches the server runs, the prompts'
// batch included (batches-ratio; see benchlimit.Throughput.WithPrompt).
// Slots: max(8, clients), as -np. It reports the figures in tok/s and
// their ratios.
func BenchmarkLimitThroughput(b *testing.B) {
	const nGen = 128
	for _, md := range limitModels(b) {
		for _, clients := range md.clients {
			b.Run(fmt.Sprintf("model=%s/clients=%d", md.name, clients), func(b *testing.B) {
				parallel := max(8, clients)
				var url string
				if bin := os.Getenv("LLAMA_BENCH_SERVER"); bin != "" {
					url = limitExternal(b, bin, md.path, parallel)
				} else {
					url = limitServer(b, md.path, parallel, 512, 0, engine.Options{})
				}
				d := benchlimit.NewDecoder(b, md.path, parallel, 512*parallel, 2048)
				body := map[string]any{"prompt": "Once upon a time", "n_predict": nGen, "ignore_eos": true,
					"seed": limitSeed(), "cache_prompt": false, "stream": true, "backend_sampling": benchlimit.BackendSampling()}
				tp := benchlimit.NewThroughput(clients, nGen).WithPrompt(limitPromptLen(b, d.M, body["prompt"].(string)))
				gen := func() int {
					st, err := limitPost(context.Background(), url, body, nil)
					if err != nil {
						b.Error(err)
						return 0
					}
					return st.predicted
				}
				tp.Warm(b, d, gen)
				for b.Loop() {
					tp.Round(b, d, gen)
				}
				tp.Report(b, b.N)
			})
		}
	}
}

// limitExternal starts bin (benchlimit.StartServer) for the benchmark:
// $LLAMA_BENCH_SERVER makes BenchmarkLimitThroughput hold that server,
// rather than this package's, against the same-run limit.
func limitExternal(b *testing.B, bin, path string, parallel int) string {
	b.Helper()
	url, stop, err := benchlimit.StartServer(bin, path, parallel)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	return url
}

// limitSeed is the requests' seed: 42, or $LLAMA_BENCH_SEED. llama-server
// v0.4.0 ends some streams of the random 125M model early with a 500
// ("does not match the expected Content-only format"), seed 42's among
// them with the prebuilt library, where seed 1's runs through.
func limitSeed() int {
	if n, err := strconv.Atoi(os.Getenv("LLAMA_BENCH_SEED")); err == nil {
		return n
	}
	return 42
}

// limitPromptLen returns the tokens of prompt as the server decodes it
// (with the model's BOS).
func limitPromptLen(b *testing.B, m *llama.Model, prompt string) int {
	toks, err := m.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true})
	if err != nil {
		b.Fatal(err)
	}
	return len(toks)
}

// limitRandomTokens returns n random token ids of the 32k vocabulary
// (above the control tokens).
func limitRandomTokens(r *rand.Rand, n int) []llama.Token {
	toks := make([]llama.Token, n)
	for i := range toks {
		toks[i] = llama.Token(1000 + r.IntN(30000))
	}
	return toks
}

// limitWholeText returns a logit_bias that bans the tokens whose piece is
// not valid UTF-8 on its own (the byte tokens 0x80-0xFF of a byte-fallback
// vocabulary). A token ending in the middle of a character has no text to
// send: as llama-server, the server holds it back and sends it with the
// next one, so its stream shows one gap of two steps, which is not a stall.
// A random-weight model samples such tokens far more often than a trained
// one writing prose (0.4% of its tokens); banned, each event is one token.
func limitWholeText(b *testing.B, m *llama.Model) [][2]any {
	var bias [][2]any
	for t := range m.VocabSize() {
		if p, err := m.TokenPiece(llama.Token(t), false); err == nil && !utf8.ValidString(p) {
			bias = append(bias, [2]any{t, false})
		}
	}
	if len(bias) == 0 {
		b.Fatal("no byte tokens found")
	}
	return bias
}

// limitQuantile returns the q quantile of ds (sorted in place).
func limitQuantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// BenchmarkLimitTTFT is time to first token, one request at a time, of a
// prompt of a 1,000-token system prompt shared by every request (a prefix
// cache hit: only the 16-token tail is decoded) and of a unique prompt of
// the same 1,016 tokens, against bare prefill of the same tokens (the
// tail after a cached prefix; the whole prompt). Each iteration runs one
// of each, interleaved. Ratios are limit/figure at the median.
func BenchmarkLimitTTFT(b *testing.B) {
	const nSys, nTail = 1000, 16
	path := benchlimit.Model125M(b)
	url := limitServer(b, path, 8, 2048, 0, engine.Options{})
	d := benchlimit.NewDecoder(b, path, 8, 8*2048, 2048)
	r := rand.New(rand.NewPCG(1, 2))
	sys := limitRandomTokens(r, nSys)
	if err := d.C.Memory().Clear(); err != nil {
		b.Fatal(err)
	}
	d.Prefill(b, 0, 0, sys)
	d.Idle(b)
	ttft := func(prompt []llama.Token) time.Duration {
		st, err := limitPost(context.Background(), url, map[string]any{"prompt": prompt, "n_predict": 2,
			"ignore_eos": true, "cache_prompt": true, "stream": true, "seed": 1},
			func(*limitStream) bool { return true })
		if err != nil {
			b.Fatal(err)
		}
		if len(st.times) == 0 {
			b.Fatal("no token")
		}
		return st.times[0].Sub(st.start)
	}
	// one shared request first: the prefix is then in a slot's cache
	ttft(append(slices.Clone(sys), limitRandomTokens(r, nTail)...))
	var shared, unique, limShared, limUnique []time.Duration
	for b.Loop() {
		shared = append(shared, ttft(append(slices.Clone(sys), limitRandomTokens(r, nTail)...)))
		unique = append(unique, ttft(limitRandomTokens(r, nSys+nTail)))
		if _, err := d.C.Memory().Remove(0, nSys, -1); err != nil {
			b.Fatal(err)
		}
		limShared = append(limShared, d.Prefill(b, 0, nSys, limitRandomTokens(r, nTail)))
		if _, err := d.C.Memory().Remove(0, 0, -1); err != nil {
			b.Fatal(err)
		}
		limUnique = append(limUnique, d.Prefill(b, 0, 0, limitRandomTokens(r, nSys+nTail)))
		if _, err := d.C.Memory().Remove(0, 0, -1); err != nil {
			b.Fatal(err)
		}
		d.Prefill(b, 0, 0, sys)
		d.Idle(b)
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	sp50, up50 := limitQuantile(shared, 0.5), limitQuantile(unique, 0.5)
	ls, lu := limitQuantile(limShared, 0.5), limitQuantile(limUnique, 0.5)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(sp50), "shared-p50-ms")
	b.ReportMetric(ms(limitQuantile(shared, 0.99)), "shared-p99-ms")
	b.ReportMetric(ms(up50), "unique-p50-ms")
	b.ReportMetric(ms(limitQuantile(unique, 0.99)), "unique-p99-ms")
	b.ReportMetric(ms(ls), "limit-shared-ms")
	b.ReportMetric(ms(lu), "limit-unique-ms")
	b.ReportMetric(float64(ls)/float64(sp50), "shared-ratio")
	b.ReportMetric(float64(lu)/float64(up50), "unique-ratio")
}

// BenchmarkLimitPrefillGap is the worst inter-token gap of 7 generating
// streams while a 4,000-token prompt is prefilled beside them (slot 8),
// against their median gap before it, and against the limit of that worst
// gap: bare decode of the largest step the engine runs then (a full batch:
// the prompt's first BatchSize-7 tokens and the 7 streams' tokens). With
// BatchSize 2048 (the default) and 512. The streams ban the tokens that
// end inside a character (limitWholeText), so that each event is one
// token and each gap one step. bare-worst/median is the machine's own
// jitter: the worst bare decode of the 7 streams' step against its median,
// over a fifth of the prefill's time right after it.
func BenchmarkLimitPrefillGap(b *testing.B) {
	const nStreams, nPrompt = 7, 4000
	path := benchlimit.Model125M(b)
	for _, batch := range []int{2048, 512} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			// $LLAMA_BENCH_PREFILL_SLOWDOWN sets engine.Options.PrefillSlowdown
			// (the trade-off between the gap and the prefill's time).
			slowdown, _ := strconv.ParseFloat(os.Getenv("LLAMA_BENCH_PREFILL_SLOWDOWN"), 64)
			url := limitServer(b, path, nStreams+1, 4608, batch, engine.Options{PrefillSlowdown: slowdown})
			d := benchlimit.NewDecoder(b, path, nStreams+1, (nStreams+1)*4608, batch)
			whole := limitWholeText(b, d.M)
			r := rand.New(rand.NewPCG(3, 4))
			var worst, median, lim, duringP50, duringP99, ttft []time.Duration
			var bareJitter []float64
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				var started sync.WaitGroup
				started.Add(nStreams)
				var prefilled, prefillEnd time.Time
				var mu sync.Mutex
				done := make(chan struct{})
				streams := make([]*limitStream, nStreams)
				var wg sync.WaitGroup
				for i := range nStreams {
					wg.Go(func() {
						once := false
						st, err := limitPost(ctx, url, map[string]any{"prompt": "Once upon a time", "n_predict": 4000,
							"ignore_eos": true, "cache_prompt": false, "stream": true, "seed": i, "logit_bias": whole},
							func(st *limitStream) bool {
								if len(st.times) == 32 && !once {
									once = true
									started.Done()
								}
								select {
								case <-done:
									mu.Lock()
									defer mu.Unlock()
									return st.times[len(st.times)-1].After(prefillEnd.Add(100 * time.Millisecond))
								default:
									return false
								}
							})
						if err != nil && ctx.Err() == nil {
							b.Error(err)
						}
						streams[i] = st
					})
				}
				started.Wait()
				mu.Lock()
				prefilled = time.Now()
				mu.Unlock()
				st, err := limitPost(ctx, url, map[string]any{"prompt": limitRandomTokens(r, nPrompt), "n_predict": 1,
					"ignore_eos": true, "cache_prompt": false, "stream": true}, func(*limitStream) bool { return true })
				if err != nil || len(st.times) == 0 {
					b.Fatalf("prefill: %v", err)
				}
				mu.Lock()
				prefillEnd = st.times[0]
				mu.Unlock()
				close(done)
				wg.Wait()
				cancel()
				var before, during []time.Duration
				var w time.Duration
				for _, s := range streams {
					if s == nil {
						b.Fatal("a stream failed")
					}
					if s.merged > 0 {
						b.Fatalf("%d events carried more than one token", s.merged)
					}
					for j := 1; j < len(s.times); j++ {
						g := s.times[j].Sub(s.times[j-1])
						if s.times[j].Before(prefilled) {
							before = append(before, g)
						} else if !s.times[j-1].After(prefillEnd) {
							w = max(w, g)
							during = append(during, g)
						}
					}
				}
				worst = append(worst, w)
				median = append(median, limitQuantile(before, 0.5))
				duringP50 = append(duringP50, limitQuantile(during, 0.5))
				duringP99 = append(duringP99, limitQuantile(during, 0.99))
				ttft = append(ttft, prefillEnd.Sub(prefilled))
				// the limit: the largest step, a full batch of prompt and stream tokens
				if err := d.C.Memory().Clear(); err != nil {
					b.Fatal(err)
				}
				d.Batch.Clear()
				for s := range nStreams {
					_ = d.Batch.Add(llama.Token(100+s), 0, s, true)
				}
				for i, t := range limitRandomTokens(r, batch-nStreams) {
					_ = d.Batch.Add(t, i, nStreams, false)
				}
				start := time.Now()
				if err := d.C.Decode(context.Background(), d.Batch); err != nil {
					b.Fatal(err)
				}
				lim = append(lim, time.Since(start))
				// The machine's own jitter: bare steps of the 7 streams for
				// a fifth of the prefill's time, their worst against their
				// median (the floor under worst/median on this machine).
				var bare []time.Duration
				for t0, pos := time.Now(), 0; time.Since(t0) < prefillEnd.Sub(prefilled)/5; pos++ {
					if pos%512 == 0 {
						if err := d.C.Memory().Clear(); err != nil {
							b.Fatal(err)
						}
					}
					bare = append(bare, d.Step(b, nStreams, 64+pos%512))
				}
				d.Idle(b)
				bareJitter = append(bareJitter, float64(limitQuantile(bare, 1))/float64(limitQuantile(bare, 0.5)))
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			wm, mm, lm := limitQuantile(worst, 0.5), limitQuantile(median, 0.5), limitQuantile(lim, 0.5)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(wm), "worst-gap-ms")
			b.ReportMetric(ms(mm), "median-gap-ms")
			b.ReportMetric(ms(limitQuantile(duringP50, 0.5)), "prefill-p50-gap-ms")
			b.ReportMetric(ms(limitQuantile(duringP99, 0.5)), "prefill-p99-gap-ms")
			b.ReportMetric(limitQuantile(ttft, 0.5).Seconds(), "prefill-s")
			b.ReportMetric(ms(lm), "limit-step-ms")
			b.ReportMetric(float64(wm)/float64(mm), "worst/median")
			b.ReportMetric(float64(lm)/float64(wm), "ratio")
			slices.Sort(bareJitter)
			b.ReportMetric(bareJitter[len(bareJitter)/2], "bare-worst/median")
		})
	}
}
