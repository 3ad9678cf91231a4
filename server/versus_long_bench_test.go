//go:build linux

package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/testenv"
)

// BenchmarkVersusLongPrompt reads long prompts on our server and on
// llama-server, each a process of its own on the same library with the
// same flags: Gemma 3 270M (or $LLAMA_BENCH_MODEL), -c 32768, one slot,
// benchlimit.Threads threads. Each round posts to each server in turn (an
// order that turns every round) one /completion of a prompt of about
// `prompt` tokens with n_predict 1 and no prompt cache, after one
// uncounted request each. Reported per server: prompt tokens per second
// of wall time (the request's, so a token's decode and the HTTP round
// trip are in it), the median over the rounds, and at the end the peak
// resident set; and ours/llama-server of both.
//
//	go test -run '^$' -bench VersusLongPrompt -benchtime 3x -timeout 60m ./server/
func BenchmarkVersusLongPrompt(b *testing.B) {
	name, path := benchlimit.Model(b, "gemma3-270m")
	th := strconv.Itoa(benchlimit.Threads())
	words := strings.Fields(strings.Repeat("the quick brown fox jumps over the lazy dog while a small bird sings in the old oak tree near the river ", 2000))
	for _, n := range []int{4096, 16384} {
		b.Run(fmt.Sprintf("model=%s/prompt=%d", name, n), func(b *testing.B) {
			type side struct {
				name, url string
				pid       int
				tps       []float64
				promptN   float64
			}
			sides := []*side{{name: "ours"}, {name: "llama-server"}}
			for i, bin := range []string{versusOurs(b), testenv.LlamaServer(b)} {
				url, pid, stop, err := benchlimit.StartServerFlags(bin, "-m", path, "-c", "32768", "-np", "1", "-t", th, "-tb", th)
				if err != nil {
					b.Fatalf("%s: %v", sides[i].name, err)
				}
				b.Cleanup(stop)
				sides[i].url, sides[i].pid = url, pid
			}
			// Words of the repeated sentence are about a token each; the
			// servers report the exact count.
			prompt := strings.Join(words[:min(n, len(words))], " ")
			read := func(s *side) float64 {
				t0 := time.Now()
				out, err := swaPost(s.url, "/completion", map[string]any{"prompt": prompt, "n_predict": 1, "cache_prompt": false})
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				tm, _ := out["timings"].(map[string]any)
				s.promptN, _ = tm["prompt_n"].(float64)
				return s.promptN / time.Since(t0).Seconds()
			}
			for _, s := range sides {
				read(s) // uncounted
			}
			rounds := 0
			for b.Loop() {
				for k := range sides {
					s := sides[(k+rounds)%len(sides)]
					s.tps = append(s.tps, read(s))
					time.Sleep(benchlimit.Settle) // a benchmark's rest between sides, not a wait
				}
				rounds++
			}
			b.ReportMetric(0, "ns/op")
			med := func(xs []float64) float64 {
				xs = slices.Sorted(slices.Values(xs))
				return xs[len(xs)/2]
			}
			rss := map[string]float64{}
			for _, s := range sides {
				b.ReportMetric(med(s.tps), s.name+"-prompt-tok/s")
				rss[s.name] = versusPeakRSS(b, s.pid)
				b.ReportMetric(rss[s.name], s.name+"-rss-MB")
			}
			b.ReportMetric(sides[0].promptN, "prompt-tokens")
			b.ReportMetric(med(sides[0].tps)/med(sides[1].tps), "ours/llama-server")
			b.ReportMetric(rss["ours"]/rss["llama-server"], "rss-ours/llama-server")
		})
	}
}
