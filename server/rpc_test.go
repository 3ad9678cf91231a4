//go:build rpc

package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestRPCServer serves stories260K split across two RPC workers on
// 127.0.0.1 (as --rpc): /props lists their devices and the greedy
// completion is the local server's. A worker killed in the middle of a
// streamed completion ends that stream with an error naming the failure;
// the server stays up, /health answers 503 saying what is wrong, requests
// fail with 503 while the worker is away, and once it is back the next
// request loads the model again and answers as before.
func TestRPCServer(t *testing.T) {
	w1, w2 := testenv.StartRPCWorker(t), testenv.StartRPCWorker(t)
	_, local := newTestServer(t, Options{})
	logs := &testenv.Buffer{}
	_, ts := newTestServer(t, Options{ModelOptions: llama.ModelOptions{RPCServers: []string{w1.Addr, w2.Addr}},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	greedy := map[string]any{"prompt": "Once upon a time", "n_predict": 24, "temperature": 0, "top_k": 1}

	code, want := postJSON(t, local.URL+"/completion", greedy)
	require.Equal(t, http.StatusOK, code, "%v", want)
	code, got := postJSON(t, ts.URL+"/completion", greedy)
	require.Equal(t, http.StatusOK, code, "%v", got)
	assert.Equal(t, want["content"], got["content"])
	require.NotEmpty(t, got["content"])

	var props struct {
		RPCDevices []struct {
			Name        string `json:"name"`
			Endpoint    string `json:"endpoint"`
			MemoryTotal uint64 `json:"memory_total"`
		} `json:"rpc_devices"`
	}
	require.Equal(t, http.StatusOK, xGet(t, ts.URL+"/props", &props))
	require.Len(t, props.RPCDevices, 2)
	assert.Equal(t, w1.Addr, props.RPCDevices[0].Endpoint)
	assert.Equal(t, w2.Addr, props.RPCDevices[1].Endpoint)
	assert.Positive(t, props.RPCDevices[0].MemoryTotal)
	for _, d := range props.RPCDevices {
		assert.Contains(t, logs.String(), "msg=\"RPC device\" model=", "the log lists the devices")
		assert.Contains(t, logs.String(), "device="+d.Name+" worker="+d.Endpoint)
	}

	// Kill a worker after the stream's fourth token.
	body, err := json.Marshal(map[string]any{"prompt": "Once upon a time", "n_predict": 400, "stream": true,
		"temperature": 0, "top_k": 1, "ignore_eos": true})
	require.NoError(t, err)
	resp, err := http.Post(ts.URL+"/completion", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	n, last := 0, ""
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") || strings.HasPrefix(l, "error: ") {
			last = l
			if n++; n == 4 {
				w2.Kill()
			}
		}
	}
	resp.Body.Close()
	assert.Contains(t, last, "RPC worker failed", "the stream ends with the failure")
	assert.Less(t, n, 400, "the stream ended early")

	var health map[string]any
	require.Equal(t, http.StatusServiceUnavailable, xGet(t, ts.URL+"/health", &health))
	assert.Contains(t, health["error"].(map[string]any)["message"], "RPC worker")

	// The worker is away: the reload fails, with the address.
	code, ans := postJSON(t, ts.URL+"/completion", greedy)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, ans["error"].(map[string]any)["message"], "cannot reach the RPC worker "+w2.Addr)
	require.Equal(t, http.StatusServiceUnavailable, xGet(t, ts.URL+"/health", &health))

	w2.Start()
	code, got = postJSON(t, ts.URL+"/completion", greedy)
	require.Equal(t, http.StatusOK, code, "%v", got)
	assert.Equal(t, want["content"], got["content"], "after the worker restarted")
	assert.Equal(t, http.StatusOK, xGet(t, ts.URL+"/health", nil))
	assert.Contains(t, logs.String(), "reloading the model after an RPC worker failed")
}
