//go:build linux

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/testenv"
)

// BenchmarkVersusLoneStream holds a lone streaming request's first token
// against llama-server's: both servers run as processes with the same
// flags (-t and -tb benchlimit.Threads, one slot), and one client posts
// a /completion of n_predict tokens (32 and 128), then reads the
// response with a blocking read on a thread of its own, as a client in
// another language would, until the first event's "data: " arrives. Each
// round sends one request to each server, in an order that turns every
// round, after one uncounted request each. The model is
// $LLAMA_BENCH_MODEL (benchlimit.Model), stories260K by default: its
// prompt decodes in well under a millisecond, so the time is the
// servers' own.
//
// Reported: the first token's time, p50 and p99, per server, and the
// p50s' ratio ours/llama-server (below 1: ours first).
//
//	go test -run '^$' -bench VersusLoneStream -benchtime 100x ./server/
func BenchmarkVersusLoneStream(b *testing.B) {
	name, path := benchlimit.Model(b, "stories260K")
	type side struct {
		name, bin, addr string
		first           []time.Duration
	}
	for _, nGen := range []int{32, 128} {
		b.Run(fmt.Sprintf("model=%s/n_predict=%d", name, nGen), func(b *testing.B) {
			sides := []*side{{name: "ours", bin: versusOurs(b)}, {name: "llama-server", bin: testenv.LlamaServer(b)}}
			for _, s := range sides {
				u, _, stop, err := benchlimit.StartServerArgs(s.bin, path, 1)
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				b.Cleanup(stop)
				pu, err := url.Parse(u)
				if err != nil {
					b.Fatal(err)
				}
				s.addr = pu.Host
				if _, err := loneStreamFirst(s.addr, nGen); err != nil { // uncounted
					b.Fatalf("%s: %v", s.name, err)
				}
			}
			rounds := 0
			for b.Loop() {
				for k := range sides {
					s := sides[(k+rounds)%len(sides)]
					d, err := loneStreamFirst(s.addr, nGen)
					if err != nil {
						b.Fatalf("%s: %v", s.name, err)
					}
					s.first = append(s.first, d)
					time.Sleep(benchlimit.Settle) // a benchmark's rest between sides, not a wait
				}
				rounds++
			}
			b.ReportMetric(0, "ns/op")
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			for _, s := range sides {
				b.ReportMetric(ms(limitQuantile(s.first, 0.5)), s.name+"-first-p50-ms")
				b.ReportMetric(ms(limitQuantile(s.first, 0.99)), s.name+"-first-p99-ms")
			}
			b.ReportMetric(ms(limitQuantile(sides[0].first, 0.5))/ms(limitQuantile(sides[1].first, 0.5)), "ours/llama-server")
		})
	}
}

// loneStreamFirst posts a streaming /completion of nGen tokens to addr
// and returns the time from sending it to reading its first event, then
// reads the rest. The reads are blocking reads of the socket on a locked
// thread, so that the client's wake-up is the kernel's alone, not Go's
// network poller's.
func loneStreamFirst(addr string, nGen int) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": nGen, "ignore_eos": true,
		"temperature": 0, "cache_prompt": false, "stream": true})
	req := fmt.Appendf(nil, "POST /completion HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", addr, len(body), body)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	f, err := c.(*net.TCPConn).File() // a blocking descriptor of its own
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fd := int(f.Fd())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	if _, err := syscall.Write(fd, req); err != nil {
		return 0, err
	}
	var first time.Duration
	var seen []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		if first == 0 {
			seen = append(seen, buf[:n]...)
			if bytes.Contains(seen, []byte("data: ")) {
				first = time.Since(t0)
			}
		}
	}
	if first == 0 {
		return 0, fmt.Errorf("no event in %q", seen)
	}
	return first, nil
}
