package engine

// Benchmarks of the engine without HTTP, held against the bare decode of
// the same batches (internal/benchlimit) in the same run; not in CI.
//
//	go test -run '^$' -bench Limit -benchtime 1x -count 3 ./engine/

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/sampling"
)

// BenchmarkLimitEngine is BenchmarkLimitThroughput without HTTP: the
// engine's Submit directly (1, 8 and 16 clients, 128 tokens each, slots
// max(8, clients)) against the same bare decode, on the 125M model
// ($LLAMA_BENCH_MODEL: benchlimit.Model). The
// gap between its ratio and 1 is the engine's time between decodes
// (sampling, bookkeeping; loop-share measures that part alone) and what
// its clients take from the decode's cores; the gap between it and the
// HTTP ratio is the server's. On a shared machine, set
// LLAMA_BENCH_THREADS=1 and use -benchtime 3x or more: the ratio compares
// two parts run one after the other.
func BenchmarkLimitEngine(b *testing.B) {
	const nGen = 128
	name, path := benchlimit.Model(b, "125M-Q8_0")
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	for _, clients := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("model=%s/clients=%d", name, clients), func(b *testing.B) {
			parallel := max(8, clients)
			e, err := New(m, Options{Parallel: parallel, Context: llama.ContextOptions{ContextSize: parallel * 512, Threads: benchlimit.Threads(), ThreadsBatch: benchlimit.Threads()},
				SampleThreads: benchlimit.SampleThreads()})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			d := benchlimit.NewDecoder(b, path, parallel, 512*parallel, 2048)
			prompt := engTokenize(b, m, "Once upon a time", true)
			tp := benchlimit.NewThroughput(clients, nGen).WithPrompt(len(prompt))
			gen := func() int {
				p := sampling.Defaults()
				p.Seed = 42
				p.IgnoreEOS = true
				p.BackendSampling = benchlimit.BackendSampling()
				n := 0
				for ev, err := range e.Generate(context.Background(), &Request{Kind: KindCompletion, Prompt: prompt, Params: p, NPredict: nGen, SlotID: -1}) {
					if err != nil {
						b.Error(err)
					}
					if ev.Done {
						n = ev.Generated
					}
				}
				return n
			}
			tp.Warm(b, d, gen)
			var nd int
			if err := e.do(func() { e.busyTime, e.decodeTime, nd = 0, 0, -int(e.metrics.DecodeTotal) }); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				tp.Round(b, d, gen)
			}
			var busy, dec time.Duration
			if err := e.do(func() { busy, dec = e.busyTime, e.decodeTime; nd += int(e.metrics.DecodeTotal) }); err != nil {
				b.Fatal(err)
			}
			// Per decode: the engine's, and the bare step's; and the
			// decodes per round (128 would be every client starting in one
			// step, a request's first token coming from its prompt's).
			b.ReportMetric(float64(dec)/float64(nd)/1e6, "ms/decode")
			b.ReportMetric(float64(tp.LimitStep())/1e6, "limit-ms/decode")
			b.ReportMetric(float64(nd)/float64(b.N), "decodes/round")
			// The share of the loop's working time spent outside Decode
			// (sampling, events, bookkeeping), measured in the engine
			// itself: unlike the ratio, not skewed by the load changing
			// between the engine's part and the limit's.
			b.ReportMetric(1-float64(dec)/float64(busy), "loop-share")
			tp.Report(b, b.N)
		})
	}
}

// BenchmarkLimitSampling splits one continuous-batching step of 8 slots
// into its two parts: the decode of the 8-token batch and the sampling of
// the 8 rows with the server's default chain (top-k 40, top-p, min-p,
// temperature, dist), each slot with its own chain, as the engine does:
// one after another (workers=1) or through Context.SampleParallel on 2
// goroutines (workers=2, the engine's SampleThreads). It reports both per
// step, the share of sampling (the most that sampling in parallel could
// win), and the allocations of a step. On the 125M model (32k
// vocabulary), or $LLAMA_BENCH_MODEL (benchlimit.Model).
func BenchmarkLimitSampling(b *testing.B) {
	const n = 8
	name, path := benchlimit.Model(b, "125M-Q8_0")
	d := benchlimit.NewDecoder(b, path, n, n*512, 2048)
	eng, err := New(d.M, Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512, Threads: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("model=%s/workers=%d", name, workers), func(b *testing.B) {
			chains := make([]*llama.SamplerChain, n)
			jobs := make([]llama.SampleJob, n)
			for i := range chains {
				p := sampling.Defaults()
				p.Seed = uint32(i)
				c, _, _, err := eng.newSampler(context.Background(), &p, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				chains[i] = c
			}
			var dec, smp time.Duration
			pos := 0
			b.ReportAllocs()
			for b.Loop() {
				if pos == 0 {
					if err := d.C.Memory().Clear(); err != nil {
						b.Fatal(err)
					}
				}
				dec += d.Step(b, n, pos)
				mid := time.Now()
				if workers == 1 {
					for s, c := range chains {
						if _, err := c.Sample(d.C, s); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					for s, c := range chains {
						jobs[s] = llama.SampleJob{Chain: c, Index: s}
					}
					if err := d.C.SampleParallel(jobs, workers); err != nil {
						b.Fatal(err)
					}
					for _, j := range jobs {
						if j.Err != nil {
							b.Fatal(j.Err)
						}
					}
				}
				smp += time.Since(mid)
				pos = (pos + 1) % 128
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(dec)/float64(b.N)/1e6, "decode-ms/step")
			b.ReportMetric(float64(smp)/float64(b.N)/1e6, "sample-ms/step")
			b.ReportMetric(float64(smp)/float64(dec+smp), "sample-share")
		})
	}
}

// BenchmarkCopyPrefix measures the time to the first token of a request
// pinned to an empty slot whose ~400-token prompt shares all but its last
// sentence with the prompt another slot holds, on the 125M model: with the
// prefix copied from that slot (copyPrefix) and with it decoded again,
// alternating in the same run. Reported: both times and the decoded prompt
// tokens per request.
func BenchmarkCopyPrefix(b *testing.B) {
	path := benchlimit.Model125M(b)
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	e, err := New(m, Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 2 * 1024, Threads: benchlimit.Threads(), ThreadsBatch: benchlimit.Threads()}, NoPromptCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	shared := strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside. ", 20)
	pA := engTokenize(b, m, shared+"One day she saw a ball.", true)
	pB := engTokenize(b, m, shared+"Her mom said it was time to go home.", true)
	first := func(prompt []llama.Token, slot int) (time.Duration, Event) {
		p := sampling.Defaults()
		p.Temperature = 0
		start := time.Now()
		var took time.Duration
		var done Event
		for ev, err := range e.Generate(context.Background(), &Request{Kind: KindCompletion, Prompt: prompt, Params: p, NPredict: 1, SlotID: slot, CachePrompt: true}) {
			if err != nil {
				b.Fatal(err)
			}
			if took == 0 {
				took = time.Since(start)
			}
			if ev.Done {
				done = ev
			}
		}
		return took, done
	}
	first(pA, 0) // slot 0 holds pA
	var with, without time.Duration
	var decWith, decWithout int
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			copyOn := (i+k)%2 == 0
			if err := e.do(func() {
				e.canCopy = copyOn
				e.lctx.Memory().Remove(1, 0, -1)
				e.slots[1].cache = e.slots[1].cache[:0]
			}); err != nil {
				b.Fatal(err)
			}
			took, done := first(pB, 1)
			if copyOn {
				with += took
				decWith += done.PromptTokens - done.CachedTokens
			} else {
				without += took
				decWithout += done.PromptTokens - done.CachedTokens
			}
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(with)/float64(b.N)/1e6, "copy-ttft-ms")
	b.ReportMetric(float64(without)/float64(b.N)/1e6, "decode-ttft-ms")
	b.ReportMetric(float64(decWith)/float64(b.N), "copy-prompt-tokens")
	b.ReportMetric(float64(decWithout)/float64(b.N), "decode-prompt-tokens")
}
