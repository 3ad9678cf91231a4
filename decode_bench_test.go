package llama_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// benchThreads is the compute threads of the benchmarks: never more than
// the cores (ggml's threads spin).
func benchThreads() int { return min(2, runtime.NumCPU()) }

// BenchmarkDecodeLimit is the hardware limit the server's throughput is held
// against: bare Context.Decode of n-token batches (one token for each of n
// sequences, as a continuous-batching step of n slots), no sampling, on the
// random 125M-parameter llama (Q8_0, 32k vocabulary), in tokens per second.
func BenchmarkDecodeLimit(b *testing.B) {
	for _, typ := range []gguf.TensorType{gguf.Q8_0, gguf.Q4_0} {
		path, err := gguf.BenchModelFile(testenv.Model(b, "llama-2-tiny-random.gguf"), "llama-125m", gguf.BenchModel125M, typ)
		if err != nil {
			b.Fatal(err)
		}
		m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 8, 16} {
			b.Run(typ.String()+"/n="+itoa(n), func(b *testing.B) {
				c, err := m.NewContext(llama.ContextOptions{ContextSize: 512 * n, Sequences: n, KVUnified: true,
					Threads: benchThreads(), ThreadsBatch: benchThreads()})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx := context.Background()
				batch := llama.NewBatch(n, 1)
				pos := 0
				var tokens int
				var spent time.Duration
				for b.Loop() {
					if pos >= 256 { // keep the attention span of a short conversation
						if err := c.Memory().Clear(); err != nil {
							b.Fatal(err)
						}
						pos = 0
					}
					batch.Clear()
					for s := range n {
						_ = batch.Add(llama.Token(100+s+pos), pos, s, true)
					}
					start := time.Now()
					if err := c.Decode(ctx, batch); err != nil {
						b.Fatal(err)
					}
					spent += time.Since(start)
					tokens += n
					pos++
				}
				b.ReportMetric(float64(tokens)/spent.Seconds(), "tok/s")
			})
		}
		m.Close()
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
