package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/x/llama/internal/benchlimit"
	"github.com/x/llama/internal/gguf"
)

var throughputRow = regexp.MustCompile(`^BenchmarkLimitThroughput/model=([^/]+)/clients=(\d+)$`)

// runLlamaServer measures llama-server on each throughput row of rows and
// returns its tok/s by row name.
func runLlamaServer(bin, models string, rows []*row, rounds int) (map[string]float64, error) {
	out := map[string]float64{}
	for _, r := range rows {
		m := throughputRow.FindStringSubmatch(r.name)
		if m == nil {
			continue
		}
		clients, _ := strconv.Atoi(m[2])
		var path string
		switch m[1] {
		case "125M-Q8_0":
			p, err := gguf.BenchModelFile(filepath.Join(models, "llama-2-tiny-random.gguf"), "llama-125m", gguf.BenchModel125M, gguf.Q8_0)
			if err != nil {
				return nil, err
			}
			path = p
		case "stories260K":
			path = filepath.Join(models, "stories260K.gguf")
		default:
			continue
		}
		v, err := llamaServerThroughput(bin, path, clients, rounds)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		out[r.name] = v
	}
	return out, nil
}

// llamaServerThroughput starts llama-server on model with the benchmark's
// flags and returns the median tok/s of rounds rounds of clients streaming
// requests of 128 tokens.
func llamaServerThroughput(bin, model string, clients, rounds int) (float64, error) {
	url, stop, err := benchlimit.StartServer(bin, model, max(8, clients))
	if err != nil {
		return 0, err
	}
	defer stop()
	body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": 128, "ignore_eos": true,
		"seed": 42, "cache_prompt": false, "stream": true})
	var figs []float64
	for range rounds {
		var mu sync.Mutex
		var errs []error
		tokens := 0
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Go(func() {
				n, err := streamTokens(url, body)
				mu.Lock()
				defer mu.Unlock()
				tokens += n
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return 0, errs[0]
		}
		if tokens != clients*128 {
			return 0, fmt.Errorf("generated %d tokens, want %d", tokens, clients*128)
		}
		figs = append(figs, float64(tokens)/time.Since(start).Seconds())
	}
	return median(figs), nil
}

// streamTokens posts a streaming /completion and returns tokens_predicted
// of its last event.
func streamTokens(url string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/completion", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Stop            bool `json:"stop"`
			TokensPredicted int  `json:"tokens_predicted"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return 0, err
		}
		if ev.Stop {
			return ev.TokensPredicted, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("stream ended without a last event")
}
