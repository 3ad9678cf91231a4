package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/x/llama"
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
