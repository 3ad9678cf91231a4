//go:build rpc

package llama_test

import (
	"context"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// BenchmarkRPC measures generation over loopback: the model local (one
// thread), then split across one and two RPC workers (rpc-server -t 1 on
// 127.0.0.1), 64 greedy tokens after a short prompt per iteration, in
// tokens per second. Each decode crosses to every worker holding layers
// and back, so the gap to local is the protocol's cost per token.
// local-read loads the weights into memory as a worker holds its share,
// rather than mapping the file.
func BenchmarkRPC(b *testing.B) {
	w1, w2 := testenv.StartRPCWorker(b), testenv.StartRPCWorker(b)
	for _, model := range []struct{ name, path string }{
		{"stories260K", testenv.Model(b, "stories260K.gguf")},
		{"125M", benchModel125M(b)},
	} {
		for _, setup := range []struct {
			name string
			opts llama.ModelOptions
		}{
			{"local", llama.ModelOptions{CPUOnly: true}},
			// Read into memory, as a worker holds its layers (no mmap).
			{"local-read", llama.ModelOptions{CPUOnly: true, Load: llama.LoadRead}},
			{"1worker", llama.ModelOptions{RPCServers: []string{w1.Addr}}},
			{"2workers", llama.ModelOptions{RPCServers: []string{w1.Addr, w2.Addr}, TensorSplit: []float32{1, 1}}},
		} {
			b.Run(model.name+"/"+setup.name, func(b *testing.B) {
				m, err := llama.LoadModel(context.Background(), model.path, setup.opts)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1, ThreadsBatch: 1})
				if err != nil {
					b.Fatal(err)
				}
				defer lctx.Close()
				n := 0
				b.ResetTimer()
				for b.Loop() {
					for _, err := range lctx.Generate(context.Background(), "Once upon a time",
						llama.GenerateOptions{MaxTokens: 64, IgnoreEOG: true}).Seq() {
						if err != nil {
							b.Fatal(err)
						}
						n++
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}
