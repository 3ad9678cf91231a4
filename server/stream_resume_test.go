package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func streamRequest(t *testing.T, url, conv string, body map[string]any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", url, strings.NewReader(string(b)))
	require.NoError(t, err)
	if conv != "" {
		req.Header.Set("X-Conversation-Id", conv)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

func lookupStreams(t *testing.T, url string, ids ...string) []map[string]any {
	t.Helper()
	code, data := call(t, "POST", url+"/v1/streams/lookup", map[string]any{"conversation_ids": ids}, nil)
	require.Equal(t, 200, code, "%s", data)
	var out []map[string]any
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

func TestResumableStream(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	chat := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Once upon a time"}},
		"stream": true, "max_tokens": 24, "temperature": 0}

	resp := streamRequest(t, ts.URL+"/v1/chat/completions", "conv-1", chat)
	full, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, "%s", full)
	require.True(t, strings.HasSuffix(string(full), "data: [DONE]\n\n"), "%s", full)

	for _, tc := range []struct {
		name string
		url  string
		code int
		body string
	}{
		{"replay", "/v1/stream?conv_id=conv-1", 200, string(full)},
		{"replay from an offset", "/v1/stream?conv_id=conv-1&from=10", 200, string(full[10:])},
		{"offset past the end", "/v1/stream?conv_id=conv-1&from=99999999", 200, ""},
		{"no id", "/v1/stream", 400, ""},
		{"unknown id", "/v1/stream?conv_id=nope", 404, ""},
		{"bad offset", "/v1/stream?conv_id=conv-1&from=-3", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "GET", ts.URL+tc.url, nil, nil)
			assert.Equal(t, tc.code, code, "%s", data)
			if tc.code == 200 {
				assert.Equal(t, tc.body, string(data))
			}
		})
	}

	info := lookupStreams(t, ts.URL, "conv-1", "other")
	require.Len(t, info, 1)
	assert.Equal(t, "conv-1", info[0]["conversation_id"])
	assert.Equal(t, true, info[0]["is_done"])
	assert.EqualValues(t, len(full), info[0]["total_bytes"])
	assert.NotZero(t, info[0]["completed_at"])
	assert.Empty(t, lookupStreams(t, ts.URL))

	code, data := call(t, "POST", ts.URL+"/v1/streams/lookup", "{", nil)
	assert.Equal(t, 400, code, "%s", data)

	code, _ = call(t, "DELETE", ts.URL+"/v1/stream?conv_id=conv-1", nil, nil)
	assert.Equal(t, 204, code)
	code, _ = call(t, "DELETE", ts.URL+"/v1/stream?conv_id=conv-1", nil, nil)
	assert.Equal(t, 204, code, "idempotent")
	code, _ = call(t, "GET", ts.URL+"/v1/stream?conv_id=conv-1", nil, nil)
	assert.Equal(t, 404, code)

	// A request that fails before streaming leaves no session.
	resp = streamRequest(t, ts.URL+"/v1/chat/completions", "conv-bad", map[string]any{"messages": "not a list", "stream": true})
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode)
	assert.Empty(t, lookupStreams(t, ts.URL, "conv-bad"))

	// Without the header nothing is kept.
	resp = streamRequest(t, ts.URL+"/completion", "", map[string]any{"prompt": "Hi", "stream": true, "n_predict": 4})
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Empty(t, lookupStreams(t, ts.URL, ""))
}

func TestResumableStreamSurvivesDisconnect(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	resp := streamRequest(t, ts.URL+"/completion", "conv-2", map[string]any{
		"prompt": "Once upon a time", "stream": true, "n_predict": 64, "temperature": 0, "ignore_eos": true})
	require.Equal(t, 200, resp.StatusCode)
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, "data: "), first)
	resp.Body.Close() // the client goes away after the first event

	// The generation goes on: the replay ends with the last event.
	code, data := call(t, "GET", ts.URL+"/v1/stream?conv_id=conv-2", nil, nil)
	require.Equal(t, 200, code)
	var last map[string]any
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if payload, ok := strings.CutPrefix(line, "data: "); ok {
			require.NoError(t, json.Unmarshal([]byte(payload), &last))
			n++
		}
	}
	assert.Equal(t, true, last["stop"])
	assert.EqualValues(t, 64, last["tokens_predicted"])
	assert.Greater(t, n, 60)

	// A newer request of the same conversation replaces the session.
	resp = streamRequest(t, ts.URL+"/completion", "conv-2", map[string]any{"prompt": "Hi", "stream": true, "n_predict": 2})
	again, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	code, data = call(t, "GET", ts.URL+"/v1/stream?conv_id=conv-2", nil, nil)
	require.Equal(t, 200, code)
	assert.Equal(t, string(again), string(data))
}

func TestResumableStreamStop(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	resp := streamRequest(t, ts.URL+"/completion", "conv-3", map[string]any{
		"prompt": "Once upon a time", "stream": true, "n_predict": 100000, "ignore_eos": true})
	require.Equal(t, 200, resp.StatusCode)
	_, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	resp.Body.Close()
	ss := s.streams.get(streamKey{id: "conv-3"})
	require.NotNil(t, ss)

	code, _ := call(t, "DELETE", ts.URL+"/v1/stream?conv_id=conv-3", nil, nil)
	assert.Equal(t, 204, code)
	assert.Empty(t, lookupStreams(t, ts.URL, "conv-3"))
	_, done, _, _ := ss.read(0)
	assert.True(t, done, "the stopped session is finished (and its generation's context cancelled)")
}
