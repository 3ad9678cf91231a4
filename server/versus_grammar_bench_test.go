package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/testenv"
)

// versusSchema is BenchmarkVersusGrammar's JSON schema: a list of objects,
// which a small model goes on filling.
var versusSchema = map[string]any{"type": "object", "properties": map[string]any{
	"items": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"}}}}}}

// BenchmarkVersusGrammar holds examples/server against llama-server
// (built from the pinned source; the same flags: -t and -tb
// benchlimit.Threads, -np 2, 512 positions a slot) on output under a
// JSON schema, where sampling is llama.cpp's grammar over the whole
// vocabulary whenever the token drawn first breaks it: in each round two
// clients send four /completion requests each, one after another, with
// versusSchema, up to 128 tokens, llama-server's default sampling and a
// seed per request (the two servers write the same text). The servers
// take turns, the order turning every round. Reported per server:
// tokens/s over the rounds, the peak resident set (VmHWM), and the
// resident set after two seconds idle (VmRSS); then ours/llama-server of
// tokens/s. The model is $LLAMA_BENCH_MODEL (benchlimit.Model), Gemma 3
// 270M by default, whose 262,144-token vocabulary makes each whole-row
// pass of the grammar tens of MB of allocations inside llama.cpp.
//
//	go test -run '^$' -bench VersusGrammar -benchtime 4x ./server/
func BenchmarkVersusGrammar(b *testing.B) {
	const nGen, clients, perClient = 128, 2, 4
	name, path := benchlimit.Model(b, "gemma3-270m")
	sides := []*versusSide{{name: "ours", bin: versusOurs(b)}, {name: "llama-server", bin: testenv.LlamaServer(b)}}
	for _, s := range sides {
		url, pid, stop, err := benchlimit.StartServerArgs(s.bin, path, clients)
		if err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
		b.Cleanup(stop)
		s.url, s.pid = url, pid
	}
	round := func(s *versusSide, count bool) {
		var wg sync.WaitGroup
		var tok atomic.Int64
		start := time.Now()
		for c := range clients {
			wg.Go(func() {
				for i := range perClient {
					n, ok := s.postWhole(b, map[string]any{"prompt": "List some items as JSON:",
						"n_predict": nGen, "seed": limitSeed() + c*perClient + i, "cache_prompt": false,
						"json_schema": versusSchema})
					if !ok {
						return
					}
					tok.Add(int64(n))
				}
			})
		}
		wg.Wait()
		if took := time.Since(start); count {
			s.tok += int(tok.Load())
			s.took += took
			s.rounds = append(s.rounds, float64(tok.Load())/took.Seconds())
		}
	}
	b.Run("model="+name, func(b *testing.B) {
		for _, s := range sides { // one uncounted round of each
			round(s, false)
		}
		rounds := 0
		for b.Loop() {
			for k := range sides {
				round(sides[(k+rounds)%len(sides)], true)
				time.Sleep(benchlimit.Settle) // a benchmark's rest between sides, not a wait
			}
			rounds++
		}
		time.Sleep(2 * time.Second) // idle, as a server between bursts
		b.ReportMetric(0, "ns/op")
		for _, s := range sides {
			b.ReportMetric(s.tokS(), s.name+"-tok/s")
			b.ReportMetric(versusPeakRSS(b, s.pid), s.name+"-rss-peak-MB")
			b.ReportMetric(versusStatusMB(b, s.pid, "VmRSS"), s.name+"-rss-idle-MB")
		}
		b.ReportMetric(sides[0].tokS()/sides[1].tokS(), "ours/llama-server")
	})
}
