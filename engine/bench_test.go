package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/sampling"
)

// BenchmarkEngineClients measures aggregate generation throughput with 1, 4
// and 8 concurrent clients on an engine with 8 slots (continuous batching):
// each client generates 512 tokens (ignoring EOS) from stories260K. It runs
// with 2 threads (llama-server's default on a 2-core machine), with 1, and with 1 for
// single-token decodes and 2 for batches (-t 1 -tb 2).
func BenchmarkEngineClients(b *testing.B) {
	const nGen = 512
	for _, th := range [][2]int{{2, 2}, {1, 1}, {1, 2}} {
		for _, clients := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("t=%d,tb=%d/clients=%d", th[0], th[1], clients), func(b *testing.B) {
				m, e := newEngTestEngine(b, Options{Parallel: 8, Context: llama.ContextOptions{ContextSize: 8 * 1024, Threads: th[0], ThreadsBatch: th[1]}})
				prompt := engTokenize(b, m, "Once upon a time", true)
				task := func() *Request {
					p := sampling.Defaults()
					p.Seed = 42
					p.IgnoreEOS = true
					return &Request{Kind: KindCompletion, Prompt: prompt, Params: p, NPredict: nGen, SlotID: -1}
				}
				var tokens int64
				var mu sync.Mutex
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					var wg sync.WaitGroup
					for c := 0; c < clients; c++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							n := 0
							for ev, err := range e.Generate(context.Background(), task()) {
								if err != nil {
									b.Error(err)
								}
								if ev.Done {
									n = ev.Generated
								}
							}
							mu.Lock()
							tokens += int64(n)
							mu.Unlock()
						}()
					}
					wg.Wait()
				}
				el := time.Since(start)
				b.StopTimer()
				if tokens != int64(b.N*clients*nGen) {
					b.Fatalf("generated %d tokens, want %d", tokens, b.N*clients*nGen)
				}
				b.ReportMetric(float64(tokens)/el.Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkLoneRequest measures a lone request's first token after an idle
// spell (50 to 250 ms, outside the timer: long enough for the engine to
// pause its compute threads) and its generation speed after it, on
// stories260K with 2 threads, with the compute threads placed by the
// kernel (none, llama-server's default), kept to CPUs 0 and 1 (mask: -C 3;
// the decode's thread is placed and restored around each decode, as
// pinned) and pinned one to a CPU (strict: -C 3 --cpu-strict 1). Each
// iteration is one request of 8 prompt and 256 generated tokens; run it
// with -benchtime 40x or more for the tail.
func BenchmarkLoneRequest(b *testing.B) {
	const nGen = 256
	for _, pin := range []string{"none", "mask", "strict"} {
		b.Run("pin="+pin, func(b *testing.B) {
			co := llama.ContextOptions{ContextSize: 2048, Threads: 2, ThreadsBatch: 2}
			if pin != "none" {
				if runtime.NumCPU() < 2 {
					b.Skip("pinning two threads needs CPUs 0 and 1")
				}
				co.ThreadPool = llama.ThreadPoolOptions{CPUs: []int{0, 1}, StrictCPU: pin == "strict"}
			}
			_, e := newEngTestEngine(b, Options{Parallel: 1, Context: co})
			var first []time.Duration
			var gen time.Duration
			tokens := 0
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				time.Sleep(time.Duration(50+i%5*50) * time.Millisecond)
				prompt := make([]llama.Token, 8)
				for k := range prompt {
					prompt[k] = llama.Token(300 + (i*7+k)%200)
				}
				req := NewRequest(prompt)
				req.NPredict, req.Params.IgnoreEOS, req.Params.Seed = nGen, true, uint32(i)
				b.StartTimer()
				start := time.Now()
				var t0 time.Time
				for ev, err := range e.Generate(context.Background(), req) {
					if err != nil {
						b.Fatal(err)
					}
					if t0.IsZero() {
						t0 = time.Now()
						first = append(first, t0.Sub(start))
					}
					if ev.Done {
						tokens += ev.Generated - 1
					}
				}
				gen += time.Since(t0)
			}
			b.StopTimer()
			q := func(p float64) float64 { return float64(benchlimit.Quantile(first, p)) / 1e6 }
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(q(0.5), "first-p50-ms")
			b.ReportMetric(q(0.9), "first-p90-ms")
			b.ReportMetric(q(1), "first-max-ms")
			slow := 0
			for _, d := range first {
				if d > 5*time.Millisecond {
					slow++
				}
			}
			b.ReportMetric(float64(slow)/float64(len(first)), "first-over-5ms")
			b.ReportMetric(float64(tokens)/gen.Seconds(), "tok/s-after-first")
		})
	}
}
