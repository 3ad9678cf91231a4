package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamCompletion posts a streaming /completion and returns once its first
// chunk has arrived, so that the request certainly holds a slot. The
// channel yields, when the stream ends, the last chunk's tokens_predicted.
func streamCompletion(t *testing.T, url, body string) <-chan int {
	t.Helper()
	started := make(chan error, 1)
	done := make(chan int, 1)
	go func() {
		n := 0
		defer func() { done <- n }()
		resp, err := http.Post(url+"/completion", "application/json", strings.NewReader(body))
		if err != nil {
			started <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			started <- assert.AnError
			return
		}
		sc := bufio.NewScanner(resp.Body)
		first := true
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var chunk struct {
				TokensPredicted int `json:"tokens_predicted"`
			}
			if json.Unmarshal([]byte(data), &chunk) == nil {
				n = chunk.TokensPredicted
			}
			if first {
				first = false
				started <- nil
			}
		}
		if first {
			started <- assert.AnError
		}
	}()
	require.NoError(t, <-started, "the streamed request did not start")
	return done
}

// TestCloseDrains: Close lets a request in flight finish, refuses new ones
// with 503 (and /health says 503 from its start), and then frees the model; Shutdown with an expired context
// cancels what still runs instead of waiting.
func TestCloseDrains(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	done := streamCompletion(t, ts.URL, `{"prompt":"Once upon a time","n_predict":400,"ignore_eos":true,"stream":true}`)
	require.NoError(t, s.Close())
	assert.Equal(t, 400, <-done, "the request in flight ran to completion")
	resp, err := http.Post(ts.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"x","n_predict":2}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	// A readiness check (/health) sends no more traffic to it.
	for _, path := range []string{"/health", "/v1/health"} {
		resp, err = http.Get(ts.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
	}

	// Shutdown with no grace cancels instead of waiting: the request would
	// otherwise run for 100000 tokens.
	s2, ts2 := newTestServer(t, Options{Engine: engine.Options{ContextShift: true}})
	done2 := streamCompletion(t, ts2.URL, `{"prompt":"Once upon a time","n_predict":100000,"ignore_eos":true,"stream":true}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, s2.Shutdown(ctx))
	assert.Less(t, <-done2, 100000, "the request was cancelled")
}
