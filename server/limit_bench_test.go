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
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// limitThreads is the compute threads of these benchmarks: never more than
// the cores (ggml's threads spin).
func limitThreads() int { return min(2, runtime.NumCPU()) }

// limitModel125M returns the path of the 125M benchmark model (Q8_0).
func limitModel125M(b *testing.B) string {
	b.Helper()
	path, err := gguf.BenchModelFile(testenv.Model(b, "llama-2-tiny-random.gguf"), "llama-125m", gguf.BenchModel125M, gguf.Q8_0)
	if err != nil {
		b.Fatal(err)
	}
	return path
}

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
		{"125M-Q8_0", limitModel125M(b), []int{1, 8, 16}},
		{"stories260K", testenv.Model(b, "stories260K.gguf"), []int{8, 16}},
	}
}

// limitServer starts a server on path with parallel slots of slotCtx
// tokens each, min(2, NumCPU) threads.
func limitServer(b *testing.B, path string, parallel, slotCtx, batch int) string {
	b.Helper()
	_, ts := newTestServer(b, Options{Model: path, Engine: EngineOptions{
		Parallel: parallel, CtxSize: parallel * slotCtx, BatchSize: batch,
		Threads: limitThreads(), ThreadsBatch: limitThreads()}})
	return ts.URL
}

// limitDecoder is the limit side: a context of its own on the same model
// file, made as the engine makes its own (seqs sequences of ctxSize/seqs
// positions each, not unified, as the server's default), decoding the
// batches the engine would.
type limitDecoder struct {
	m     *llama.Model
	c     *llama.Context
	batch *llama.Batch
}

func newLimitDecoder(b *testing.B, path string, seqs, ctxSize, batch int) *limitDecoder {
	b.Helper()
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := m.NewContext(llama.ContextOptions{ContextSize: ctxSize, Sequences: seqs, BatchSize: batch,
		Threads: limitThreads(), ThreadsBatch: limitThreads()})
	if err != nil {
		m.Close()
		b.Fatal(err)
	}
	d := &limitDecoder{m: m, c: c, batch: llama.NewBatch(max(batch, seqs), 1)}
	b.Cleanup(func() {
		c.Close()
		m.Close()
	})
	return d
}

// steps decodes steps batches of one token for each of n sequences from
// position 0 (a continuous-batching step of n generating slots) after
// clearing the memory, and returns the tokens and the time in Decode.
func (d *limitDecoder) steps(b *testing.B, n, steps int) (int, time.Duration) {
	if err := d.c.ClearMemory(); err != nil {
		b.Fatal(err)
	}
	var spent time.Duration
	for pos := range steps {
		d.batch.Clear()
		for s := range n {
			_ = d.batch.Add(llama.Token(100+s+pos), pos, s, true)
		}
		start := time.Now()
		if err := d.c.Decode(context.Background(), d.batch); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
	}
	return n * steps, spent
}

// prefill decodes toks on sequence seq from position pos in batches of at
// most the decoder's batch size, the last token with output, and returns
// the time in Decode.
func (d *limitDecoder) prefill(b *testing.B, seq, pos int, toks []llama.Token) time.Duration {
	var spent time.Duration
	for len(toks) > 0 {
		n := min(len(toks), d.batch.Cap())
		d.batch.Clear()
		for i, t := range toks[:n] {
			_ = d.batch.Add(t, pos+i, seq, i == len(toks)-1)
		}
		start := time.Now()
		if err := d.c.Decode(context.Background(), d.batch); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		toks, pos = toks[n:], pos+n
	}
	return spent
}

// limitStream is what a streaming /completion answered: the arrival time of
// each event with a token and the final count.
type limitStream struct {
	start     time.Time
	times     []time.Time
	predicted int
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
			Stop            bool `json:"stop"`
			TokensPredicted int  `json:"tokens_predicted"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return nil, fmt.Errorf("event %q: %w", line, err)
		}
		if ev.Stop {
			st.predicted = ev.TokensPredicted
			break
		}
		st.times = append(st.times, now)
		if stop != nil && stop(st) {
			break
		}
	}
	return st, sc.Err()
}

// BenchmarkLimitThroughput is server throughput (streaming /completion,
// 128 tokens per request, ignore_eos, the clients all at once) against
// bare decode of the same number of one-token-per-sequence batches. Slots:
// max(8, clients), as -np. It reports both in tok/s and their ratio.
func BenchmarkLimitThroughput(b *testing.B) {
	const nGen = 128
	for _, md := range limitModels(b) {
		for _, clients := range md.clients {
			b.Run(fmt.Sprintf("model=%s/clients=%d", md.name, clients), func(b *testing.B) {
				parallel := max(8, clients)
				url := limitServer(b, md.path, parallel, 512, 0)
				d := newLimitDecoder(b, md.path, parallel, 512*parallel, 2048)
				body := map[string]any{"prompt": "Once upon a time", "n_predict": nGen, "ignore_eos": true,
					"seed": 42, "cache_prompt": false, "stream": true}
				var srvTok, limTok int
				var srvTime, limTime time.Duration
				for b.Loop() {
					start := time.Now()
					var wg sync.WaitGroup
					var mu sync.Mutex
					for range clients {
						wg.Go(func() {
							st, err := limitPost(context.Background(), url, body, nil)
							if err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							srvTok += st.predicted
							mu.Unlock()
						})
					}
					wg.Wait()
					srvTime += time.Since(start)
					n, spent := d.steps(b, clients, nGen)
					limTok += n
					limTime += spent
				}
				if srvTok != b.N*clients*nGen {
					b.Fatalf("generated %d tokens, want %d", srvTok, b.N*clients*nGen)
				}
				srv, lim := float64(srvTok)/srvTime.Seconds(), float64(limTok)/limTime.Seconds()
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(srv, "tok/s")
				b.ReportMetric(lim, "limit-tok/s")
				b.ReportMetric(srv/lim, "ratio")
			})
		}
	}
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
	path := limitModel125M(b)
	url := limitServer(b, path, 8, 2048, 0)
	d := newLimitDecoder(b, path, 8, 8*2048, 2048)
	r := rand.New(rand.NewPCG(1, 2))
	sys := limitRandomTokens(r, nSys)
	if err := d.c.ClearMemory(); err != nil {
		b.Fatal(err)
	}
	d.prefill(b, 0, 0, sys)
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
		if _, err := d.c.RemoveTokens(0, nSys, -1); err != nil {
			b.Fatal(err)
		}
		limShared = append(limShared, d.prefill(b, 0, nSys, limitRandomTokens(r, nTail)))
		if _, err := d.c.RemoveTokens(0, 0, -1); err != nil {
			b.Fatal(err)
		}
		limUnique = append(limUnique, d.prefill(b, 0, 0, limitRandomTokens(r, nSys+nTail)))
		if _, err := d.c.RemoveTokens(0, 0, -1); err != nil {
			b.Fatal(err)
		}
		d.prefill(b, 0, 0, sys)
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
// BatchSize 2048 (the default) and 512.
func BenchmarkLimitPrefillGap(b *testing.B) {
	const nStreams, nPrompt = 7, 4000
	path := limitModel125M(b)
	for _, batch := range []int{2048, 512} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			url := limitServer(b, path, nStreams+1, 4608, batch)
			d := newLimitDecoder(b, path, nStreams+1, (nStreams+1)*4608, batch)
			r := rand.New(rand.NewPCG(3, 4))
			var worst, median, lim []time.Duration
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
							"ignore_eos": true, "cache_prompt": false, "stream": true, "seed": i},
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
				var before []time.Duration
				var w time.Duration
				for _, s := range streams {
					if s == nil {
						b.Fatal("a stream failed")
					}
					for j := 1; j < len(s.times); j++ {
						g := s.times[j].Sub(s.times[j-1])
						if s.times[j].Before(prefilled) {
							before = append(before, g)
						} else if !s.times[j-1].After(prefillEnd) {
							w = max(w, g)
						}
					}
				}
				worst = append(worst, w)
				median = append(median, limitQuantile(before, 0.5))
				// the limit: the largest step, a full batch of prompt and stream tokens
				if err := d.c.ClearMemory(); err != nil {
					b.Fatal(err)
				}
				d.batch.Clear()
				for s := range nStreams {
					_ = d.batch.Add(llama.Token(100+s), 0, s, true)
				}
				for i, t := range limitRandomTokens(r, batch-nStreams) {
					_ = d.batch.Add(t, i, nStreams, false)
				}
				start := time.Now()
				if err := d.c.Decode(context.Background(), d.batch); err != nil {
					b.Fatal(err)
				}
				lim = append(lim, time.Since(start))
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			wm, mm, lm := limitQuantile(worst, 0.5), limitQuantile(median, 0.5), limitQuantile(lim, 0.5)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(wm), "worst-gap-ms")
			b.ReportMetric(ms(mm), "median-gap-ms")
			b.ReportMetric(ms(lm), "limit-step-ms")
			b.ReportMetric(float64(wm)/float64(mm), "worst/median")
			b.ReportMetric(float64(lm)/float64(wm), "ratio")
		})
	}
}

// BenchmarkLimitEngine is BenchmarkLimitThroughput without HTTP: the
// engine's Submit directly (8 and 16 clients, 128 tokens each, slots
// max(8, clients)) against the same bare decode, on the 125M model. The
// gap between its ratio and 1 is the engine's time between decodes
// (sampling, bookkeeping); the gap between it and the HTTP ratio is the
// server's.
func BenchmarkLimitEngine(b *testing.B) {
	const nGen = 128
	path := limitModel125M(b)
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	for _, clients := range []int{8, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			parallel := max(8, clients)
			e, err := NewEngine(m, EngineOptions{Parallel: parallel, CtxSize: parallel * 512,
				Threads: limitThreads(), ThreadsBatch: limitThreads()})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			d := newLimitDecoder(b, path, parallel, 512*parallel, 2048)
			prompt := engTokenize(b, m, "Once upon a time", true)
			var srvTok, limTok int
			var srvTime, limTime time.Duration
			for b.Loop() {
				start := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				for range clients {
					wg.Go(func() {
						p := DefaultSamplingParams()
						p.Seed = 42
						p.IgnoreEOS = true
						ch, err := e.Submit(context.Background(), &Task{Kind: TaskCompletion, Prompt: prompt, Params: p, NPredict: nGen, SlotID: -1})
						if err != nil {
							b.Error(err)
							return
						}
						for ev := range ch {
							if ev.Err != nil {
								b.Error(ev.Err)
							}
							if ev.Done {
								mu.Lock()
								srvTok += ev.Generated
								mu.Unlock()
							}
						}
					})
				}
				wg.Wait()
				srvTime += time.Since(start)
				n, spent := d.steps(b, clients, nGen)
				limTok += n
				limTime += spent
			}
			if srvTok != b.N*clients*nGen {
				b.Fatalf("generated %d tokens, want %d", srvTok, b.N*clients*nGen)
			}
			srv, lim := float64(srvTok)/srvTime.Seconds(), float64(limTok)/limTime.Seconds()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(srv, "tok/s")
			b.ReportMetric(lim, "limit-tok/s")
			b.ReportMetric(srv/lim, "ratio")
		})
	}
}

// BenchmarkLimitSampling splits one continuous-batching step of 8 slots on
// the 125M model into its two parts: the decode of the 8-token batch and
// the sampling of the 8 rows one after another with the server's default
// chain (32k-vocabulary candidate lists: top-k, typical, top-p, min-p,
// temperature, dist), each slot with its own chain, as the engine does. It
// reports both per step and the share of sampling, the most that sampling
// the slots in parallel could win.
func BenchmarkLimitSampling(b *testing.B) {
	const n = 8
	d := newLimitDecoder(b, limitModel125M(b), n, n*512, 2048)
	eng, err := NewEngine(d.m, EngineOptions{Parallel: 1, CtxSize: 512, Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	chains := make([]*llama.SamplerChain, n)
	for i := range chains {
		p := DefaultSamplingParams()
		p.Seed = uint32(i)
		c, _, _, err := eng.(*engine).newSampler(&p)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		chains[i] = c
	}
	var dec, smp time.Duration
	pos := 0
	for b.Loop() {
		if pos == 0 {
			if err := d.c.ClearMemory(); err != nil {
				b.Fatal(err)
			}
		}
		d.batch.Clear()
		for s := range n {
			_ = d.batch.Add(llama.Token(100+s+pos), pos, s, true)
		}
		start := time.Now()
		if err := d.c.Decode(context.Background(), d.batch); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		for s, c := range chains {
			if _, err := c.Sample(d.c, s); err != nil {
				b.Fatal(err)
			}
		}
		smp += time.Since(mid)
		dec += mid.Sub(start)
		pos = (pos + 1) % 128
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(dec)/float64(b.N)/1e6, "decode-ms/step")
	b.ReportMetric(float64(smp)/float64(b.N)/1e6, "sample-ms/step")
	b.ReportMetric(float64(smp)/float64(dec+smp), "sample-share")
}
