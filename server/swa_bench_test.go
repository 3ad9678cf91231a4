package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/testenv"
)

// BenchmarkSWAMemory starts our server (examples/server, built once) and
// llama-server, each a process of its own on the same library with the
// same flags: Gemma 3 270M (or $LLAMA_BENCH_MODEL), -c 32768, -np 1 and
// 4, benchlimit.Threads threads, plus $LLAMA_BENCH_OURS_ARGS for ours.
// After one short completion on each, it reports the peak resident set
// (VmHWM) of both in MB and ours/llama-server. With a sliding-window model
// the KV cache dominates at this context, so this is where a full-size
// window cache (--swa-full) would show.
//
//	go test -run '^$' -bench SWAMemory -benchtime 1x ./server/
func BenchmarkSWAMemory(b *testing.B) {
	name, path := benchlimit.Model(b, "gemma3-270m")
	ours, ref := versusOurs(b), testenv.LlamaServer(b)
	oursArgs := strings.Fields(os.Getenv("LLAMA_BENCH_OURS_ARGS"))
	th := strconv.Itoa(benchlimit.Threads())
	for _, np := range []int{1, 4} {
		b.Run(fmt.Sprintf("model=%s/c=32768/np=%d", name, np), func(b *testing.B) {
			for b.Loop() {
				rss := map[string]float64{}
				for _, s := range []struct {
					name string
					bin  string
					args []string
				}{{"ours", ours, oursArgs}, {"llama-server", ref, nil}} {
					args := append([]string{"-m", path, "-c", "32768", "-np", strconv.Itoa(np), "-t", th, "-tb", th}, s.args...)
					url, pid, stop, err := benchlimit.StartServerFlags(s.bin, args...)
					if err != nil {
						b.Fatalf("%s: %v", s.name, err)
					}
					if _, err := swaPost(url, "/completion", map[string]any{"prompt": "The capital of France is", "n_predict": 8}); err != nil {
						stop()
						b.Fatalf("%s: %v", s.name, err)
					}
					rss[s.name] = versusPeakRSS(b, pid)
					stop()
				}
				b.ReportMetric(rss["ours"], "ours-rss-MB")
				b.ReportMetric(rss["llama-server"], "llama-server-rss-MB")
				b.ReportMetric(rss["ours"]/rss["llama-server"], "ours/llama-server")
			}
		})
	}
}

// BenchmarkSWASecondTurn measures the second turn of a chat on our server
// (Gemma 3 270M, -c 8192 -np 1) with the window-sized cache and context
// checkpoints (the default), with --ctx-checkpoints 0 and with --swa-full,
// the three servers running at once and taking turns in every round (so
// that a machine whose speed drifts affects each alike): each round posts
// a first turn (a system prompt of about `first` tokens and a question, 16
// tokens of answer), then the second turn (that conversation, the answer
// and a new question) with max_tokens 1, and reports per mode the second
// turn's wall time (its time to first token), timings.cache_n and
// timings.prompt_n.
//
//	go test -run '^$' -bench SWASecondTurn -benchtime 4x ./server/
func BenchmarkSWASecondTurn(b *testing.B) {
	name, path := benchlimit.Model(b, "gemma3-270m")
	ours := versusOurs(b)
	th := strconv.Itoa(benchlimit.Threads())
	modes := []struct {
		name string
		args []string
	}{{"windowed+checkpoints", nil}, {"windowed,no-checkpoints", []string{"--ctx-checkpoints", "0"}}, {"swa-full", []string{"--swa-full"}}}
	for _, first := range []int{300, 1500} {
		b.Run(fmt.Sprintf("model=%s/first=%d", name, first), func(b *testing.B) {
			urls := make([]string, len(modes))
			for i, m := range modes {
				args := append([]string{"-m", path, "-c", "8192", "-np", "1", "-t", th, "-tb", th, "--cache-ram", "0"}, m.args...)
				url, _, stop, err := benchlimit.StartServerFlags(ours, args...)
				if err != nil {
					b.Fatal(err)
				}
				defer stop()
				urls[i] = url
			}
			took := make([]time.Duration, len(modes))
			cacheN, promptN := make([]int, len(modes)), make([]int, len(modes))
			rounds := 0
			for b.Loop() {
				rounds++
				for k := range modes {
					i := (k + rounds) % len(modes) // a different order each round
					// A system prompt of its own each round: nothing of an
					// earlier round is reused.
					sys := fmt.Sprintf("Round %d. ", rounds) + strings.Repeat("The farmer counts his sheep one by one in the field. ", first/12)
					msgs := []map[string]any{{"role": "system", "content": sys}, {"role": "user", "content": "What does the farmer count?"}}
					r1, err := swaPost(urls[i], "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0})
					if err != nil {
						b.Fatal(err)
					}
					answer := r1["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
					msgs = append(msgs, map[string]any{"role": "assistant", "content": answer},
						map[string]any{"role": "user", "content": "And where is he?"})
					t0 := time.Now()
					r2, err := swaPost(urls[i], "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 1, "temperature": 0})
					if err != nil {
						b.Fatal(err)
					}
					took[i] += time.Since(t0)
					if tm, ok := r2["timings"].(map[string]any); ok {
						c, _ := tm["cache_n"].(float64)
						p, _ := tm["prompt_n"].(float64)
						cacheN[i] += int(c)
						promptN[i] += int(p)
					}
				}
			}
			for i, m := range modes {
				b.ReportMetric(float64(took[i].Milliseconds())/float64(rounds), m.name+"-turn2-ms")
				b.ReportMetric(float64(cacheN[i])/float64(rounds), m.name+"-cache_n")
				b.ReportMetric(float64(promptN[i])/float64(rounds), m.name+"-prompt_n")
			}
		})
	}
}

// swaPost posts body as JSON and decodes the answer; a status other than
// 200 is an error.
func swaPost(url, path string, body any) (map[string]any, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	resp, err := http.Post(url+path, "application/json", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, raw)
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}
