package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
)

// TestModelsDownload: POST /models pulls a model from a (local, fake) hub
// into the cache, announces it on /models/sse, lists and serves it; DELETE
// /models removes it; offline with an empty cache the download fails and
// says so.
func TestModelsDownload(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	hub := hubtest.New(t, map[string]*hubtest.Repo{"org/tiny": {Files: map[string][]byte{"tiny-Q8_0.gguf": model}}})
	t.Setenv("MODEL_ENDPOINT", hub.URL)
	t.Setenv("LLAMA_CACHE", filepath.Join(t.TempDir(), "hub"))
	t.Setenv("HF_HUB_OFFLINE", "")

	for _, offline := range []bool{false, true} {
		if offline {
			t.Setenv("LLAMA_CACHE", filepath.Join(t.TempDir(), "empty"))
		}
		s, err := New(context.Background(), Options{Offline: offline})
		require.NoError(t, err)
		ts := httptest.NewServer(s.Handler())
		events, stop := sseModelEvents(t, ts.URL)
		code, data := call(t, "POST", ts.URL+"/models", map[string]any{"model": "org/tiny:Q8_0"}, nil)
		require.Equal(t, 200, code, "%s", data)
		assert.JSONEq(t, `{"success":true}`, string(data))
		var last map[string]any
		for ev := range events {
			if ev["event"] == "download_finished" || ev["event"] == "download_failed" {
				last = ev
				break
			}
		}
		require.NotNil(t, last)
		if offline {
			assert.Equal(t, "download_failed", last["event"], "not cached, and offline")
			code, _ = call(t, "DELETE", ts.URL+"/models?model=org/tiny:Q8_0", nil, nil)
			assert.Equal(t, 500, code, "never listed")
		} else {
			assert.Equal(t, "download_finished", last["event"])
			code, data = call(t, "POST", ts.URL+"/completion", map[string]any{"model": "org/tiny:Q8_0", "prompt": "Once upon a time", "n_predict": 4}, nil)
			require.Equal(t, 200, code, "%s", data)
			code, data = call(t, "DELETE", ts.URL+"/models?model=org/tiny:Q8_0", nil, nil)
			require.Equal(t, 200, code, "%s", data)
			code, data = call(t, "GET", ts.URL+"/models", nil, nil)
			require.Equal(t, 200, code)
			assert.NotContains(t, string(data), "org/tiny")
		}
		stop()
		ts.Close()
		require.NoError(t, s.Close())
	}
}

// sseModelEvents streams /models/sse's events until stop.
func sseModelEvents(t *testing.T, url string) (<-chan map[string]any, func()) {
	t.Helper()
	resp, err := http.Get(url + "/models/sse")
	require.NoError(t, err)
	stop := func() { resp.Body.Close() }
	t.Cleanup(stop)
	ch := make(chan map[string]any, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(io.Reader(resp.Body))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				if json.Unmarshal([]byte(d), &ev) == nil {
					ch <- ev
				}
			}
		}
	}()
	return ch, stop
}
