package server

// The soak benchmark, run on demand (not in CI):
//
//	SOAK=1 go test -run XXX -bench Soak -benchtime 1x -timeout 30m ./server/
//
// It serves stories260K over loopback (a real net/http server on
// 127.0.0.1, -t 2 -np 8, a 4096-token context) to SOAK_CLIENTS clients
// (default 64) for SOAK_DURATION (default 3m). Each client loops over
// native and OpenAI completions and chats, streamed or not; a fifth of the
// clients stream and hang up after a few events. It reports the requests,
// the errors (any answer that is not a 2xx, or a broken response, for a
// client that did not hang up), the p50 and p99 latency of completed
// requests, the process's RSS at start, peak and end, and the slots still
// processing once every client is done, and fails unless errors and stuck
// slots are 0.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/x/llama/internal/testenv"
)

func BenchmarkSoak(b *testing.B) {
	if os.Getenv("SOAK") != "1" {
		b.Skip("the soak benchmark runs only with SOAK=1")
	}
	dur := 3 * time.Minute
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		dur = d
	}
	clients := 64
	if v := os.Getenv("SOAK_CLIENTS"); v != "" {
		if _, err := fmt.Sscan(v, &clients); err != nil {
			b.Fatal(err)
		}
	}
	s, err := New(context.Background(), Options{
		Model: testenv.Model(b, "stories260K.gguf"), ChatTemplate: "chatml", Slots: true,
		Engine: engine.Options{Parallel: 8, Context: llama.ContextOptions{ContextSize: 4096, Threads: 2, ThreadsBatch: 2}, QueueSize: 2 * clients},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String()
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: tr}

	// RSS sampling.
	rssStart := vmRSS(b)
	var rssPeak atomic.Int64
	rssPeak.Store(rssStart)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if r := vmRSS(b); r > rssPeak.Load() {
					rssPeak.Store(r)
				}
			}
		}
	}()

	var requests, errs, hangups atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	var firstErrs []string
	fail := func(msg string) {
		errs.Add(1)
		mu.Lock()
		if len(firstErrs) < 10 {
			firstErrs = append(firstErrs, msg)
		}
		mu.Unlock()
	}
	bodies := []func(stream bool) (string, any){
		func(stream bool) (string, any) {
			return "/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 48, "stream": stream}
		},
		func(stream bool) (string, any) {
			return "/v1/completions", map[string]any{"prompt": "The little dog", "max_tokens": 48, "stream": stream}
		},
		func(stream bool) (string, any) {
			return "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Tell me a story"}},
				"max_tokens": 48, "stream": stream}
		},
	}
	deadline := time.Now().Add(dur)
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			hangUp := c%5 == 0
			for time.Now().Before(deadline) {
				stream := hangUp || rng.IntN(2) == 0
				path, body := bodies[rng.IntN(len(bodies))](stream)
				data, _ := json.Marshal(body)
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(data))
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				requests.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					cancel()
					fail(fmt.Sprintf("%s: %v", path, err))
					continue
				}
				if resp.StatusCode != http.StatusOK {
					msg, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					cancel()
					fail(fmt.Sprintf("%s: status %d: %.200s", path, resp.StatusCode, msg))
					continue
				}
				if hangUp {
					// Read a few events, then hang up mid-stream.
					sc := bufio.NewScanner(resp.Body)
					for n := 1 + rng.IntN(6); n > 0 && sc.Scan(); {
						if len(sc.Bytes()) > 0 {
							n--
						}
					}
					cancel()
					resp.Body.Close()
					hangups.Add(1)
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				cancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					fail(fmt.Sprintf("%s: reading: %v", path, err))
					continue
				}
				mu.Lock()
				latencies = append(latencies, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()

	// Every slot goes idle once the clients are done (the engine notices
	// a hung-up client at its next step): wait for it, at most 10 s.
	stuck := -1
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) { // a benchmark's bounded poll of the slots, which report stuck ones
		stuck = 0
		for _, sl := range defaultSlots(s) {
			if sl.IsProcessing {
				stuck++
			}
		}
		if stuck == 0 {
			break
		}
	}
	tr.CloseIdleConnections()
	close(stopSampling)
	<-sampled
	rssEnd := vmRSS(b)

	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[int(p*float64(len(latencies)-1))]
	}
	b.ReportMetric(float64(requests.Load()), "requests")
	b.ReportMetric(float64(errs.Load()), "errors")
	b.ReportMetric(float64(pct(0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(float64(rssStart>>20), "rss-start-MB")
	b.ReportMetric(float64(rssPeak.Load()>>20), "rss-peak-MB")
	b.ReportMetric(float64(rssEnd>>20), "rss-end-MB")
	b.ReportMetric(float64(stuck), "stuck-slots")
	b.Logf("soak: %d clients for %s: %d requests (%d hung up mid-stream, %d completed), %d errors; latency p50 %s p99 %s; RSS start %d MB, peak %d MB, end %d MB; %d slots stuck",
		clients, dur, requests.Load(), hangups.Load(), len(latencies), errs.Load(), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond),
		rssStart>>20, rssPeak.Load()>>20, rssEnd>>20, stuck)
	for _, e := range firstErrs {
		b.Log("error:", e)
	}
	if errs.Load() != 0 || stuck != 0 {
		b.Fatalf("%d errors, %d stuck slots", errs.Load(), stuck)
	}
}

// defaultSlots returns the slots of s's default model.
func defaultSlots(s *Server) []engine.SlotInfo {
	e, _ := s.models.Lookup("")
	inst := s.models.View(e).Inst
	if inst == nil {
		return nil
	}
	return inst.Engine.SlotsInfo()
}
