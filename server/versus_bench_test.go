package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/testenv"
)

// BenchmarkVersusLlamaServer holds this repository's server
// (examples/server, built once per run) against llama.cpp's llama-server
// built from the pinned source, side by side in one run, and both against
// the bare decode limit: each round runs the clients on one server, then
// on the other, then the limit's steps, in an order that turns every
// round, with the compute threads settled between the parts. Both servers
// run as processes of their own with the same flags (-t and -tb
// benchlimit.Threads, -np max(8, clients), 512 positions a slot) and the
// same load: every client streams one /completion of 128 tokens at once
// (and at one client, also without streaming: stream=false), with
// llama-server's default sampling (top-k 40, top-p 0.95, min-p 0.05,
// temperature 0.8), ignore_eos, a seed per client. The model is
// $LLAMA_BENCH_MODEL (benchlimit.Model), Gemma 3 270M by default;
// $LLAMA_BENCH_ARGS adds flags to both servers' command lines and
// $LLAMA_BENCH_OURS_ARGS to ours (space-separated), $LLAMA_BENCH_OURS is
// a prebuilt binary. MTP speculative decoding, for instance:
//
//	LLAMA_BENCH_MODEL=glm-mtp LLAMA_BENCH_ARGS="--spec-type draft-mtp --spec-draft-n-max 4" \
//	LLAMA_BENCH_OURS_ARGS=--no-spec-adapt go test -run '^$' -bench VersusLlamaServer ./server/
//
// Reported per server: tokens/s (all clients' tokens over the round's
// wall time), time to first token p50 and p99 over every streaming
// request, peak RSS of the process; then ours/llama-server of tokens/s,
// and the limit: bare decode steps of one token for each of n sequences
// (limit-tok/s).
//
//	go test -run '^$' -bench VersusLlamaServer -benchtime 4x -timeout 60m ./server/
func BenchmarkVersusLlamaServer(b *testing.B) {
	const nGen = 128
	name, path := benchlimit.Model(b, "gemma3-270m")
	ours := versusOurs(b)
	ref := testenv.LlamaServer(b)
	both := strings.Fields(os.Getenv("LLAMA_BENCH_ARGS"))
	oursArgs := append(slices.Clip(both), strings.Fields(os.Getenv("LLAMA_BENCH_OURS_ARGS"))...)
	for _, c := range []struct {
		clients int
		stream  bool
	}{{1, true}, {1, false}, {8, true}, {16, true}} {
		clients, stream := c.clients, c.stream
		sub := fmt.Sprintf("model=%s/clients=%d", name, clients)
		if !stream {
			sub += "/stream=false"
		}
		b.Run(sub, func(b *testing.B) {
			parallel := max(8, clients)
			sides := []*versusSide{{name: "ours", bin: ours, args: oursArgs}, {name: "llama-server", bin: ref, args: both}}
			for _, s := range sides {
				url, pid, stop, err := benchlimit.StartServerArgs(s.bin, path, parallel, s.args...)
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				b.Cleanup(stop)
				s.url, s.pid = url, pid
			}
			d := benchlimit.NewDecoder(b, path, parallel, 512*parallel, 2048)
			var limTok int
			var limTook time.Duration
			limit := func() {
				n, spent := d.Steps(b, clients, nGen)
				limTok += n
				limTook += spent
				d.Idle(b)
			}
			// One uncounted round of each: the first requests pay for what
			// later ones find ready.
			for _, s := range sides {
				s.round(b, clients, nGen, stream, false)
				time.Sleep(benchlimit.Settle) // a benchmark's rest between sides, not a wait
			}
			limit()
			rounds := 0
			for b.Loop() {
				parts := []func(){
					func() { sides[0].round(b, clients, nGen, stream, true) },
					func() { sides[1].round(b, clients, nGen, stream, true) },
					limit,
				}
				// rounds turn the order: ours first, llama-server first,
				// the limit first, ...
				for k := range parts {
					parts[(k+rounds)%len(parts)]()
					time.Sleep(benchlimit.Settle) // as above
				}
				rounds++
			}
			b.ReportMetric(0, "ns/op")
			for _, s := range sides {
				s.report(b)
			}
			b.ReportMetric(sides[0].tokS()/sides[1].tokS(), "ours/llama-server")
			b.ReportMetric(float64(limTok)/limTook.Seconds(), "limit-tok/s")
		})
	}
}

// versusSide is one server of BenchmarkVersusLlamaServer and its figures.
type versusSide struct {
	name, bin, url string
	args           []string
	pid            int
	tok            int
	took           time.Duration
	ttft           []time.Duration
	rounds         []float64 // tok/s of each round
}

// round runs clients requests at once, streaming or not; count says
// whether its figures count.
func (s *versusSide) round(b *testing.B, clients, nGen int, stream, count bool) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	tok := 0
	var ttft []time.Duration
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			body := map[string]any{"prompt": "Once upon a time", "n_predict": nGen, "ignore_eos": true,
				"seed": limitSeed() + i, "cache_prompt": false, "stream": stream}
			if !stream {
				n, ok := s.postWhole(b, body)
				if !ok {
					return
				}
				mu.Lock()
				tok += n
				mu.Unlock()
				return
			}
			st, err := limitPost(context.Background(), s.url, body, nil)
			if err != nil {
				b.Errorf("%s: %v", s.name, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			tok += st.predicted
			if len(st.times) > 0 {
				ttft = append(ttft, st.times[0].Sub(st.start))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if tok != clients*nGen {
		b.Fatalf("%s: generated %d tokens, want %d", s.name, tok, clients*nGen)
	}
	if !count {
		return
	}
	s.tok += tok
	s.took += took
	s.ttft = append(s.ttft, ttft...)
	s.rounds = append(s.rounds, float64(tok)/took.Seconds())
}

// versusPostWhole posts a non-streaming /completion and returns the
// tokens it generated.
func versusPostWhole(url string, body any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	resp, err := http.Post(url+"/completion", "application/json", bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		TokensPredicted int `json:"tokens_predicted"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	return out.TokensPredicted, nil
}

// postWhole posts a non-streaming /completion to the side and returns the
// tokens it generated; a failure is the benchmark's error.
func (s *versusSide) postWhole(b *testing.B, body any) (int, bool) {
	n, err := versusPostWhole(s.url, body)
	if err != nil {
		b.Errorf("%s: %v", s.name, err)
	}
	return n, err == nil
}

func (s *versusSide) tokS() float64 { return float64(s.tok) / s.took.Seconds() }

// report reports the side's figures, named after it.
func (s *versusSide) report(b *testing.B) {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(s.tokS(), s.name+"-tok/s")
	b.ReportMetric(ms(limitQuantile(s.ttft, 0.5)), s.name+"-ttft-p50-ms")
	b.ReportMetric(ms(limitQuantile(s.ttft, 0.99)), s.name+"-ttft-p99-ms")
	b.ReportMetric(versusPeakRSS(b, s.pid), s.name+"-rss-MB")
	lo, hi := s.rounds[0], s.rounds[0]
	for _, r := range s.rounds {
		lo, hi = min(lo, r), max(hi, r)
	}
	b.ReportMetric(lo, s.name+"-min-tok/s")
	b.ReportMetric(hi, s.name+"-max-tok/s")
}

// versusPeakRSS returns the peak resident set of process pid in MB
// (VmHWM).
func versusPeakRSS(b *testing.B, pid int) float64 { return versusStatusMB(b, pid, "VmHWM") }

// versusStatusMB returns the field (in kB) of /proc/pid/status in MB.
func versusStatusMB(b *testing.B, pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no " + field)
	return 0
}

var versusBuild struct {
	once sync.Once
	path string
	err  error
}

// versusOurs returns $LLAMA_BENCH_OURS, or examples/server built once for
// the run into the user cache (go-llama/bench/server).
func versusOurs(b *testing.B) string {
	if p := os.Getenv("LLAMA_BENCH_OURS"); p != "" {
		return p
	}
	versusBuild.once.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			versusBuild.err = err
			return
		}
		versusBuild.path = filepath.Join(dir, "go-llama", "bench", "server")
		out, err := exec.Command("go", "build", "-o", versusBuild.path, "../examples/server").CombinedOutput()
		if err != nil {
			versusBuild.err = fmt.Errorf("go build examples/server: %v\n%s", err, out)
		}
	})
	if versusBuild.err != nil {
		b.Fatal(versusBuild.err)
	}
	return versusBuild.path
}
