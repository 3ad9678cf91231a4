package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCORSProxy(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Access-Control-Allow-Origin", "https://target.example")
			w.Header().Set("X-Target", "yes")
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"method": r.Method, "body": string(body), "query": r.URL.RawQuery,
				"auth": r.Header.Get("Authorization"), "secret": r.Header.Get("X-Secret"),
			})
		case "/nothing":
			w.WriteHeader(http.StatusNoContent)
		case "/moved":
			http.Redirect(w, r, "/echo?from=moved", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer target.Close()
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{CORSProxy: true, CORSProxyAllowPrivate: true}})

	for _, tc := range []struct {
		name   string
		method string
		url    string
		body   string
		hdr    map[string]string
		status int
		check  func(t *testing.T, resp *http.Response, body []byte)
	}{
		{"GET with query", "GET", target.URL + "/echo?a=1", "", nil, 200, func(t *testing.T, resp *http.Response, body []byte) {
			assert.JSONEq(t, `{"method":"GET","body":"","query":"a=1","auth":"","secret":""}`, string(body))
			assert.Equal(t, "yes", resp.Header.Get("X-Target"))
			assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "the target's CORS headers are dropped")
		}},
		{"POST body and only prefixed headers", "POST", target.URL + "/echo", `{"x":1}`, map[string]string{
			"Authorization": "Bearer for-llama-server", "X-Secret": "not forwarded",
			"X-Llama-Server-Proxy-Header-Authorization": "Bearer for-target",
		}, 200, func(t *testing.T, resp *http.Response, body []byte) {
			assert.JSONEq(t, `{"method":"POST","body":"{\"x\":1}","query":"","auth":"Bearer for-target","secret":""}`, string(body))
		}},
		{"no content", "POST", target.URL + "/nothing", "{}", nil, 204, func(t *testing.T, resp *http.Response, body []byte) {
			assert.Empty(t, body)
		}},
		{"redirect followed", "GET", target.URL + "/moved", "", nil, 200, func(t *testing.T, resp *http.Response, body []byte) {
			assert.Contains(t, string(body), `"query":"from=moved"`)
		}},
		{"target status kept", "GET", target.URL + "/missing", "", nil, 404, nil},
		{"unreachable", "GET", "http://127.0.0.1:1/", "", nil, 500, func(t *testing.T, resp *http.Response, body []byte) {
			assert.True(t, strings.HasPrefix(string(body), "proxy error: "), "%s", body)
		}},
		{"no scheme", "GET", "file:///etc/passwd", "", nil, 500, func(t *testing.T, resp *http.Response, body []byte) {
			assert.Contains(t, string(body), "missing host")
		}},
		{"bad scheme", "GET", "ftp://127.0.0.1/x", "", nil, 500, func(t *testing.T, resp *http.Response, body []byte) {
			assert.Contains(t, string(body), "unsupported URL scheme in target URL: ftp")
		}},
		{"credentials", "GET", "http://user:pw@127.0.0.1:1/", "", nil, 500, func(t *testing.T, resp *http.Response, body []byte) {
			assert.Contains(t, string(body), "authentication in target URL is not supported")
		}},
		{"no url", "GET", "", "", nil, 500, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rd io.Reader
			if tc.body != "" {
				rd = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, ts.URL+"/cors-proxy?url="+url.QueryEscape(tc.url), rd)
			require.NoError(t, err)
			if rd != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode, "%s", body)
			if tc.check != nil {
				tc.check(t, resp, body)
			}
		})
	}
}

func TestGCPPredict(t *testing.T) {
	_, off := newTestServer(t, Options{})
	code, _ := call(t, "POST", off.URL+"/predict", map[string]any{"instances": []any{}}, nil)
	assert.Equal(t, 404, code, "no predict route unless enabled")

	_, ts := newTestServer(t, Options{GCP: GCPOptions{Enabled: true, HealthRoute: "ping"}, APIKeys: []string{"k"}})
	auth := map[string]string{"Authorization": "Bearer k"}
	code, _ = call(t, "GET", ts.URL+"/ping", nil, nil)
	assert.Equal(t, 200, code)

	code, data := call(t, "POST", ts.URL+"/predict", map[string]any{"instances": []any{}}, nil)
	assert.Equal(t, 401, code, "%s", data)

	code, data = call(t, "POST", ts.URL+"/predict", map[string]any{"instances": []any{
		map[string]any{"@requestFormat": "chatCompletions", "max_tokens": 4, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "Hi"}}},
		map[string]any{"@requestFormat": "tokenize", "content": "Hello"},
		map[string]any{"@requestFormat": "/detokenize", "tokens": []int{}},
		map[string]any{"@requestFormat": "noSuchThing"},
		map[string]any{"content": "no format"},
		"not an object",
	}}, auth)
	require.Equal(t, 200, code, "%s", data)
	var out struct {
		Predictions []map[string]any `json:"predictions"`
	}
	require.NoError(t, json.Unmarshal(data, &out), "%s", data)
	require.Len(t, out.Predictions, 6)
	assert.Equal(t, "chat.completion", out.Predictions[0]["object"])
	assert.NotEmpty(t, out.Predictions[1]["tokens"])
	_, direct := call(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "Hello"}, auth)
	var tokenized map[string]any
	require.NoError(t, json.Unmarshal(direct, &tokenized))
	assert.Equal(t, tokenized, out.Predictions[1], "a prediction is the route's answer")
	assert.Equal(t, "", out.Predictions[2]["content"])
	for i, msg := range map[int]string{3: "no handler registered for @requestFormat: noSuchThing", 4: "string @requestFormat", 5: "must be a JSON object"} {
		e := out.Predictions[i]["error"].(map[string]any)
		assert.Contains(t, e["message"], msg)
		assert.Equal(t, "invalid_request_error", e["type"])
	}

	for _, tc := range []struct {
		name string
		body any
		msg  string
	}{
		{"not an object", "[1]", "must be a JSON object"},
		{"no instances", map[string]any{"x": 1}, "array field named instances"},
		{"too many", map[string]any{"instances": make([]int, 129)}, "maximum size of 128"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "POST", ts.URL+"/predict", tc.body, auth)
			assert.Equal(t, 400, code)
			assert.Contains(t, errOf(t, data)["message"], tc.msg)
		})
	}
	assert.Equal(t, "chatCompletions", gcpAlias("/v1/chat/completions"))
	assert.Equal(t, "applyTemplate", gcpAlias("/apply-template"))
	assert.Equal(t, "slots", gcpAlias("/slots/{id}"))
}
