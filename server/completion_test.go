package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// postJSON posts body and returns the status and decoded JSON answer.
func postJSON(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	code, raw := postRaw(t, url, body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body: %s", raw)
	return code, out
}

func postRaw(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	resp, err := http.Post(url, "application/json", rd)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// sseEvents posts body and returns the "data:" payloads of the stream.
func sseEvents(t *testing.T, url string, body any) []string {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, p)
		} else if strings.HasPrefix(line, "error: ") {
			t.Fatalf("stream error: %s", line)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func TestCompletionGreedyStory(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{
		"prompt": "Once upon a time", "temperature": 0, "n_predict": 32,
	})
	require.Equal(t, http.StatusOK, code, "%v", out)
	content, _ := out["content"].(string)
	assert.True(t, strings.HasPrefix(content, ", there was a little girl named Lily"), "content %q", content)
	assert.Equal(t, float64(32), out["tokens_predicted"])
	assert.Equal(t, "limit", out["stop_type"])
	assert.Equal(t, false, out["truncated"])
	assert.Contains(t, out, "timings")
	assert.Contains(t, out, "generation_settings")
}
