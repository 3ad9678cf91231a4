package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseDrains: Close lets a request in flight finish, refuses new ones
// with 503, and then frees the model; Shutdown with an expired context
// cancels what still runs instead of waiting.
func TestCloseDrains(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	type result struct {
		status int
		n      int
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/completion", "application/json",
			strings.NewReader(`{"prompt":"Once upon a time","n_predict":400,"ignore_eos":true}`))
		if err != nil {
			done <- result{}
			return
		}
		defer resp.Body.Close()
		var out struct {
			TokensPredicted int `json:"tokens_predicted"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		done <- result{resp.StatusCode, out.TokensPredicted}
	}()
	// Wait until the request holds a slot.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		inst := s.models[0].inst
		s.mu.Unlock()
		if inst != nil {
			if slots := inst.Engine.SlotsInfo(); len(slots) > 0 && (slots[0].IsProcessing || slots[1].IsProcessing) {
				break
			}
		}
		require.True(t, time.Now().Before(deadline), "the request never started")
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, s.Close())
	r := <-done
	assert.Equal(t, 200, r.status)
	assert.Equal(t, 400, r.n, "the request in flight ran to completion")
	resp, err := http.Post(ts.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"x","n_predict":2}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	// Shutdown with no grace cancels instead of waiting.
	s2, ts2 := newTestServer(t, Options{Engine: EngineOptions{ContextShift: true}}) // would run for a minute
	done2 := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts2.URL+"/completion", "application/json",
			strings.NewReader(`{"prompt":"Once upon a time","n_predict":100000,"ignore_eos":true}`))
		if err == nil {
			resp.Body.Close()
			done2 <- resp.StatusCode
		} else {
			done2 <- 0
		}
	}()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	require.NoError(t, s2.Shutdown(ctx))
	assert.Less(t, time.Since(start), 5*time.Second)
	<-done2
}
