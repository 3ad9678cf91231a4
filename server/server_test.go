package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x/llama"
	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server/internal/router"
)

// call sends a request with an optional JSON body and headers and returns
// the status and the body.
func call(t testing.TB, method, url string, body any, hdr map[string]string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// callJSON is call decoding a JSON response into a map (or a slice).
func callJSON(t testing.TB, method, url string, body any) (int, map[string]any) {
	t.Helper()
	code, data := call(t, method, url, body, nil)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "body: %s", data)
	return code, out
}

// errOf returns the error object of a response body.
func errOf(t testing.TB, data []byte) map[string]any {
	t.Helper()
	var out struct {
		Error map[string]any `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &out), "body: %s", data)
	require.NotNil(t, out.Error, "no error in %s", data)
	return out.Error
}

func TestServerHealthPropsModels(t *testing.T) {
	s, ts := newTestServer(t, Options{})

	code, body := callJSON(t, "GET", ts.URL+"/health", nil)
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok", body["status"])

	code, props := callJSON(t, "GET", ts.URL+"/props", nil)
	require.Equal(t, 200, code)
	assert.Equal(t, float64(2), props["total_slots"])
	assert.Equal(t, s.Options().Model, props["model_path"])
	assert.Equal(t, mustBuiltinJinja(t, "chatml"), props["chat_template"])
	assert.Equal(t, false, props["is_sleeping"])
	assert.Equal(t, buildInfo, props["build_info"])
	assert.Contains(t, props, "modalities")
	dgs := props["default_generation_settings"].(map[string]any)
	assert.Equal(t, float64(512), dgs["n_ctx"])
	params := dgs["params"].(map[string]any)
	assert.Equal(t, float64(40), params["top_k"])
	assert.Equal(t, float64(-1), params["n_predict"])

	code, out := callJSON(t, "POST", ts.URL+"/props", map[string]any{})
	assert.Equal(t, 501, code)
	assert.Equal(t, "not_supported_error", out["error"].(map[string]any)["type"])

	for _, path := range []string{"/v1/models", "/models"} {
		code, list := callJSON(t, "GET", ts.URL+path, nil)
		require.Equal(t, 200, code, path)
		assert.Equal(t, "list", list["object"])
		data := list["data"].([]any)
		require.Len(t, data, 1)
		m := data[0].(map[string]any)
		assert.Equal(t, s.Options().Model, m["id"])
		assert.Equal(t, "llamacpp", m["owned_by"])
		meta := m["meta"].(map[string]any)
		assert.Equal(t, float64(512), meta["n_vocab"])
		assert.Equal(t, true, meta["vocab_type"]) // spm: llama-server writes a boolean
	}

	// Unknown paths answer with a JSON 404.
	code, data := call(t, "GET", ts.URL+"/no/such/endpoint", nil, nil)
	assert.Equal(t, 404, code)
	assert.Equal(t, "not_found_error", errOf(t, data)["type"])
}

func TestServerAlias(t *testing.T) {
	_, ts := newTestServer(t, Options{Alias: "tiny"})
	_, list := callJSON(t, "GET", ts.URL+"/v1/models", nil)
	assert.Equal(t, "tiny", list["data"].([]any)[0].(map[string]any)["id"])
}

func TestServerTokenize(t *testing.T) {
	_, ts := newTestServer(t, Options{})

	code, out := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "Once upon a time"})
	require.Equal(t, 200, code)
	toks := out["tokens"].([]any)
	require.NotEmpty(t, toks)

	// add_special prepends BOS (1 in stories260K).
	_, out2 := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "Once upon a time", "add_special": true})
	toks2 := out2["tokens"].([]any)
	assert.Equal(t, float64(1), toks2[0])
	assert.Equal(t, toks, toks2[1:])

	// Pieces: invalid UTF-8 pieces come as byte arrays (llama.cpp's README example).
	_, out3 := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "á", "with_pieces": true})
	// (stories260K's SPM vocabulary first adds a space token.)
	pieces := out3["tokens"].([]any)
	require.GreaterOrEqual(t, len(pieces), 2)
	assert.Equal(t, []any{
		map[string]any{"id": float64(198), "piece": []any{float64(195)}},
		map[string]any{"id": float64(164), "piece": []any{float64(161)}},
	}, pieces[len(pieces)-2:])
	_, out4 := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "Once", "with_pieces": true})
	p := out4["tokens"].([]any)
	require.NotEmpty(t, p)
	assert.IsType(t, "", p[0].(map[string]any)["piece"])

	// Round trip through /detokenize.
	code, det := callJSON(t, "POST", ts.URL+"/detokenize", map[string]any{"tokens": toks})
	require.Equal(t, 200, code)
	assert.Equal(t, "Once upon a time", strings.TrimSpace(det["content"].(string)))

	// Empty content and empty tokens.
	_, e1 := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{})
	assert.Equal(t, []any{}, e1["tokens"])
	_, e2 := callJSON(t, "POST", ts.URL+"/detokenize", map[string]any{"tokens": []int{}})
	assert.Equal(t, "", e2["content"])

	bad := []struct {
		name, path string
		body       any
	}{
		{"detokenize out of range", "/detokenize", map[string]any{"tokens": []int{1, 512}}},
		{"detokenize negative", "/detokenize", map[string]any{"tokens": []int{-1}}},
		{"detokenize huge", "/detokenize", `{"tokens":[1e30]}`},
		{"detokenize strings", "/detokenize", `{"tokens":["a"]}`},
		{"tokenize mixed out of range", "/tokenize", map[string]any{"content": []any{"a", 100000}}},
		{"tokenize object", "/tokenize", map[string]any{"content": map[string]any{"a": 1}}},
		{"not JSON", "/tokenize", "{"},
		{"empty body", "/tokenize", ""},
		{"trailing", "/detokenize", `{"tokens":[1]} x`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "POST", ts.URL+tc.path, tc.body, nil)
			assert.Equal(t, 400, code, "%s", data)
			e := errOf(t, data)
			assert.Equal(t, "invalid_request_error", e["type"])
			assert.Equal(t, float64(400), e["code"])
		})
	}

	// A mixed array: strings tokenized, ids kept.
	_, mixed := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": []any{"Once", 13, " upon"}})
	mt := mixed["tokens"].([]any)
	assert.Contains(t, mt, float64(13))
}

func TestServerApplyTemplate(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	code, out := callJSON(t, "POST", ts.URL+"/apply-template", map[string]any{
		"messages": []map[string]any{
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": []map[string]any{{"type": "text", "text": "Hi"}}},
		},
	})
	require.Equal(t, 200, code, "%v", out)
	assert.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out["prompt"])

	code, data := call(t, "POST", ts.URL+"/apply-template", map[string]any{"messages": "nope"}, nil)
	assert.Equal(t, 400, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/apply-template", map[string]any{}, nil)
	assert.Equal(t, 400, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/apply-template", map[string]any{"messages": []map[string]any{{"content": "x"}}}, nil)
	assert.Equal(t, 400, code, "%s", data)
}

func TestServerMetricsSlotsLoRA(t *testing.T) {
	_, ts := newTestServer(t, Options{})

	code, data := call(t, "GET", ts.URL+"/metrics", nil, nil)
	require.Equal(t, 200, code)
	text := string(data)
	for _, name := range []string{
		"prompt_tokens_total", "tokens_predicted_total", "prompt_seconds_total", "tokens_predicted_seconds_total",
		"n_decode_total", "n_busy_slots_per_decode", "prompt_tokens_seconds", "predicted_tokens_seconds",
		"requests_processing", "requests_deferred",
	} {
		assert.Contains(t, text, "# HELP llamacpp:"+name+" ", name)
		assert.Contains(t, text, "# TYPE llamacpp:"+name+" ", name)
		assert.Regexp(t, `(?m)^llamacpp:`+name+` [0-9.e+-]+$`, text)
	}
	assert.Contains(t, text, "# TYPE llamacpp:prompt_tokens_total counter")
	assert.Contains(t, text, "# TYPE llamacpp:requests_processing gauge")

	code, data = call(t, "GET", ts.URL+"/slots", nil, nil)
	require.Equal(t, 200, code)
	var slots []map[string]any
	require.NoError(t, json.Unmarshal(data, &slots))
	require.Len(t, slots, 2)
	assert.Equal(t, float64(0), slots[0]["id"])
	assert.Equal(t, float64(1), slots[1]["id"])
	assert.Equal(t, float64(512), slots[0]["n_ctx"])
	assert.Equal(t, false, slots[0]["is_processing"])

	code, data = call(t, "GET", ts.URL+"/lora-adapters", nil, nil)
	require.Equal(t, 200, code)
	assert.JSONEq(t, "[]", string(data))
	code, _ = call(t, "POST", ts.URL+"/lora-adapters", []any{}, nil)
	assert.Equal(t, 200, code)
	code, data = call(t, "POST", ts.URL+"/lora-adapters", []map[string]any{{"id": 0, "scale": 0.5}}, nil)
	assert.Equal(t, 400, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/lora-adapters", map[string]any{"id": 0}, nil)
	assert.Equal(t, 400, code, "%s", data)
}

func TestServerDisabledEndpoints(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	// Same model with /metrics and /slots off.
	o := s.Options()
	o.Metrics, o.Slots = false, false
	s2, err := New(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	ts2 := httptest.NewServer(s2.Handler())
	t.Cleanup(ts2.Close)

	for _, tc := range []struct{ method, url string }{
		{"GET", ts2.URL + "/metrics"},
		{"GET", ts2.URL + "/slots"},
		{"POST", ts.URL + "/slots/0?action=erase"}, // no SlotSavePath
	} {
		code, data := call(t, tc.method, tc.url, nil, nil)
		assert.Equal(t, 501, code, tc.url)
		assert.Equal(t, "not_supported_error", errOf(t, data)["type"])
	}
}

func TestServerSlotActions(t *testing.T) {
	dir := t.TempDir()
	_, ts := newTestServer(t, Options{SlotSavePath: dir})

	for _, name := range []string{"../x.bin", "a/b.bin", "/etc/passwd", "..", "", "a\\b", "x\x00y"} {
		code, data := call(t, "POST", ts.URL+"/slots/0?action=save", map[string]any{"filename": name}, nil)
		assert.Equal(t, 400, code, "filename %q: %s", name, data)
	}
	code, data := call(t, "POST", ts.URL+"/slots/zero?action=save", map[string]any{"filename": "a.bin"}, nil)
	assert.Equal(t, 400, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/slots/0?action=dance", map[string]any{"filename": "a.bin"}, nil)
	assert.Equal(t, 400, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/slots/7?action=erase", nil, nil)
	assert.Equal(t, 400, code, "%s", data)

	code, out := callJSON(t, "POST", ts.URL+"/slots/0?action=save", map[string]any{"filename": "slot0.bin"})
	require.Equal(t, 200, code, "%v", out)
	assert.Equal(t, float64(0), out["id_slot"])
	assert.Equal(t, "slot0.bin", out["filename"])
	assert.Contains(t, out, "n_saved")
	assert.Contains(t, out, "n_written")
	assert.Contains(t, out["timings"], "save_ms")
	_, err := os.Stat(filepath.Join(dir, "slot0.bin"))
	assert.NoError(t, err)

	code, out = callJSON(t, "POST", ts.URL+"/slots/1?action=restore", map[string]any{"filename": "slot0.bin"})
	require.Equal(t, 200, code, "%v", out)
	assert.Equal(t, float64(1), out["id_slot"])
	assert.Contains(t, out, "n_restored")
	assert.Contains(t, out, "n_read")
	assert.Contains(t, out["timings"], "restore_ms")

	code, out = callJSON(t, "POST", ts.URL+"/slots/1?action=erase", nil)
	require.Equal(t, 200, code, "%v", out)
	assert.Equal(t, float64(1), out["id_slot"])
	assert.Contains(t, out, "n_erased")
}

func TestServerAuth(t *testing.T) {
	_, ts := newTestServer(t, Options{APIKeys: []string{"k1", "secret-2"}})
	tok := map[string]any{"content": "hi"}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"none", nil, 401},
		{"wrong bearer", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"key without bearer", map[string]string{"Authorization": "k1"}, 200},
		{"bearer", map[string]string{"Authorization": "Bearer secret-2"}, 200},
		{"x-api-key", map[string]string{"x-api-key": "k1"}, 200},
		{"wrong x-api-key", map[string]string{"x-api-key": "k2"}, 401},
		{"prefix of a key", map[string]string{"x-api-key": "secret"}, 401},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "POST", ts.URL+"/tokenize", tok, tc.hdr)
			assert.Equal(t, tc.want, code, "%s", data)
			if tc.want == 401 {
				e := errOf(t, data)
				assert.Equal(t, "authentication_error", e["type"])
				assert.Equal(t, "Invalid API Key", e["message"])
			}
		})
	}
	// As llama-server's: only liveness is public; the model lists too
	// need the key.
	for _, path := range []string{"/health", "/v1/health"} {
		code, _ := call(t, "GET", ts.URL+path, nil, nil)
		assert.Equal(t, 200, code, path)
	}
	for _, path := range []string{"/props", "/metrics", "/slots", "/lora-adapters", "/v1/models", "/models", "/models?reload=1"} {
		code, _ := call(t, "GET", ts.URL+path, nil, nil)
		assert.Equal(t, 401, code, path)
	}
}

func TestServerCORS(t *testing.T) {
	_, off := newTestServer(t, Options{})
	_, on := newTestServer(t, Options{CORSOrigins: []string{"https://app.example"}, APIKeys: []string{"k"}})
	_, any := newTestServer(t, Options{CORSOrigins: []string{"*"}})
	_, local := newTestServer(t, Options{CORSOrigins: []string{"localhost"}})

	do := func(method, url, origin string) *http.Response {
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("Origin", origin)
		if method == "OPTIONS" {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, method, url, origin string
		status                    int
		allowOrigin               string
	}{
		{"off", "GET", off.URL + "/health", "https://app.example", 200, ""},
		{"listed", "GET", on.URL + "/health", "https://app.example", 200, "https://app.example"},
		{"not listed", "GET", on.URL + "/health", "https://evil.example", 200, ""},
		{"any", "GET", any.URL + "/health", "https://evil.example", 200, "https://evil.example"},
		{"localhost", "GET", local.URL + "/health", "http://localhost:3000", 200, "http://localhost:3000"},
		{"localhost v6", "GET", local.URL + "/health", "http://[::1]:3000", 200, "http://[::1]:3000"},
		{"not localhost", "GET", local.URL + "/health", "http://localhost.evil.com", 200, ""},
		// Preflights on any route, before the API key check.
		{"preflight listed", "OPTIONS", on.URL + "/tokenize", "https://app.example", 200, "https://app.example"},
		{"preflight not listed", "OPTIONS", on.URL + "/tokenize", "https://evil.example", 200, ""},
		{"preflight tools", "OPTIONS", on.URL + "/tools", "https://app.example", 200, "https://app.example"},
		{"preflight unknown path", "OPTIONS", any.URL + "/no/such/route", "https://x.example", 200, "https://x.example"},
		{"preflight off", "OPTIONS", off.URL + "/tokenize", "https://app.example", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(tc.method, tc.url, tc.origin)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.allowOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
			if tc.method == "OPTIONS" && tc.status == 200 {
				assert.Equal(t, "GET, POST, DELETE, OPTIONS", resp.Header.Get("Access-Control-Allow-Methods"))
				assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Headers"))
				assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
			}
		})
	}
}

func TestServerBodyLimit(t *testing.T) {
	_, ts := newTestServer(t, Options{MaxBodyBytes: 1024})
	big := map[string]any{"content": strings.Repeat("a", 4096)}
	code, data := call(t, "POST", ts.URL+"/tokenize", big, nil)
	assert.Equal(t, 413, code, "%s", data)
	assert.Equal(t, "invalid_request_error", errOf(t, data)["type"])

	// Without a Content-Length (chunked) the reader stops at the limit too.
	req, _ := http.NewRequest("POST", ts.URL+"/tokenize", io.MultiReader(strings.NewReader(`{"content":"`), strings.NewReader(strings.Repeat("a", 4096)), strings.NewReader(`"}`)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 413, resp.StatusCode)

	code, _ = call(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "small"}, nil)
	assert.Equal(t, 200, code)
}

func TestServerPanicRecovered(t *testing.T) {
	h := chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("a bug in a handler")
	}), recoverPanics(testLogger(t)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, 500, rec.Code)
	e := errOf(t, rec.Body.Bytes())
	assert.Equal(t, "server_error", e["type"])
	assert.Equal(t, float64(500), e["code"])
}

func TestServerStripPrefix(t *testing.T) {
	s, _ := newTestServer(t, Options{APIKeys: []string{"k"}})
	mux := http.NewServeMux()
	mux.Handle("/llm/", http.StripPrefix("/llm", s.Handler()))
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	code, _ := call(t, "GET", ts.URL+"/llm/health", nil, nil)
	assert.Equal(t, 200, code)
	code, _ = call(t, "GET", ts.URL+"/llm/v1/models", nil, nil)
	assert.Equal(t, 401, code, "model lists need the key, as llama-server's")
	code, _ = call(t, "GET", ts.URL+"/llm/v1/models", nil, map[string]string{"Authorization": "Bearer k"})
	assert.Equal(t, 200, code)
	code, _ = call(t, "POST", ts.URL+"/llm/tokenize", map[string]any{"content": "hi"}, nil)
	assert.Equal(t, 401, code)
	code, data := call(t, "POST", ts.URL+"/llm/tokenize", map[string]any{"content": "hi"}, map[string]string{"Authorization": "Bearer k"})
	assert.Equal(t, 200, code, "%s", data)
	code, data = call(t, "GET", ts.URL+"/other", nil, nil)
	assert.Equal(t, 200, code)
	assert.Equal(t, "other", string(data))
}

func TestServerNewErrors(t *testing.T) {
	_, err := New(context.Background(), Options{Model: "/no/such/model.gguf"})
	assert.Error(t, err)
	_, err = New(context.Background(), Options{Model: "x.gguf", ModelsDir: t.TempDir()})
	assert.Error(t, err)
	var nilCtx context.Context
	require.NotPanics(t, func() { _, err = New(nilCtx, Options{Model: testenv.Model(t, "stories260K.gguf")}) })
	assert.ErrorContains(t, err, "nil context")
}

// TestServerStartsAsLlamaServer checks the startups llama-server allows:
// no model at all (a router with no models, as an empty models folder),
// and text that is no template (Jinja source that renders as itself); and
// the one it refuses: a chat template that does not parse.
func TestServerStartsAsLlamaServer(t *testing.T) {
	for _, o := range []Options{{}, {ModelsDir: t.TempDir()}} {
		s, err := New(context.Background(), o)
		require.NoError(t, err)
		ts := httptest.NewServer(s.Handler())
		code, data := call(t, "GET", ts.URL+"/models", nil, nil)
		assert.Equal(t, 200, code)
		assert.JSONEq(t, `{"object":"list","data":[]}`, string(data))
		code, _ = call(t, "GET", ts.URL+"/props", nil, nil)
		assert.Equal(t, 200, code)
		code, _ = call(t, "POST", ts.URL+"/completion", map[string]any{"model": "none", "prompt": "x"}, nil)
		assert.Equal(t, 400, code)
		ts.Close()
		require.NoError(t, s.Close())
	}
	for _, jinja := range []bool{false, true} {
		s, err := New(context.Background(), Options{Model: testenv.Model(t, "stories260K.gguf"), ChatTemplate: "This is not a chat template, it is", Jinja: jinja})
		if !jinja {
			require.Error(t, err, "without --jinja, text that is no built-in name")
			continue
		}
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	for _, tmpl := range []string{"{% if %}", "{{ messages[0].content ", "{# a comment"} {
		_, err := New(context.Background(), Options{Model: testenv.Model(t, "stories260K.gguf"), ChatTemplate: tmpl, Jinja: true})
		assert.ErrorContains(t, err, "chat template", tmpl)
	}
}

func TestValidSlotFilename(t *testing.T) {
	for name, want := range map[string]bool{
		"a.bin": true, "slot-0_x.bin": true, "..": false, "../a": false, "a/..": false, "/abs": false,
		"a\\b": false, "": false, ".": false, "a..b": false, "c:x": false, "new\nline": false,
		strings.Repeat("x", 256): false, "\xff": false,
	} {
		assert.Equal(t, want, validSlotFilename(name), "%q", name)
	}
}

// readSSE reads "data:" events from an SSE stream into ch until it ends.
func readSSE(r io.Reader, ch chan<- router.Event) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev router.Event
			if json.Unmarshal([]byte(data), &ev) == nil {
				ch <- ev
			}
		}
	}
	close(ch)
}

// modelStatuses returns each model's status value from GET /models.
func modelStatuses(t testing.TB, url string) map[string]string {
	t.Helper()
	code, list := callJSON(t, "GET", url+"/models", nil)
	require.Equal(t, 200, code)
	out := map[string]string{}
	for _, d := range list["data"].([]any) {
		m := d.(map[string]any)
		out[m["id"].(string)] = m["status"].(map[string]any)["value"].(string)
	}
	return out
}

func TestServerRouterMode(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		require.NoError(t, os.Symlink(testenv.Model(t, n), filepath.Join(dir, n)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a model"), 0o644))
	_, ts := newTestServer(t, Options{ModelsDir: dir, ModelsMax: 1, ChatTemplate: "chatml",
		Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 256}, Parallel: 1}})

	// Listen to status events from the start.
	req, _ := http.NewRequest("GET", ts.URL+"/models/sse", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := make(chan router.Event, 100)
	go readSSE(resp.Body, events)
	defer resp.Body.Close()

	assert.Equal(t, map[string]string{"stories260K": "unloaded", "llama-2-tiny-random": "unloaded"}, modelStatuses(t, ts.URL))

	// A request without a model is refused; an unknown one too.
	code, data := call(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "hi"}, nil)
	assert.Equal(t, 400, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "hi", "model": "gpt-9"}, nil)
	assert.Equal(t, 400, code, "%s", data)
	assert.Contains(t, errOf(t, data)["message"], "not found")

	// Routing by "model" loads on demand; the two vocabularies differ.
	tokens := func(model string) []any {
		code, out := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "Hello world", "model": model})
		require.Equal(t, 200, code, "%v", out)
		return out["tokens"].([]any)
	}
	a := tokens("stories260K")
	assert.Equal(t, map[string]string{"stories260K": "loaded", "llama-2-tiny-random": "unloaded"}, modelStatuses(t, ts.URL))
	b := tokens("llama-2-tiny-random")
	assert.NotEqual(t, a, b)
	// ModelsMax 1: loading the second unloaded the least recently used first.
	assert.Equal(t, map[string]string{"stories260K": "unloaded", "llama-2-tiny-random": "loaded"}, modelStatuses(t, ts.URL))
	assert.Equal(t, a, tokens("stories260K"))

	// OpenAI's retrieval names the model in the path, and loads nothing.
	code, card := callJSON(t, "GET", ts.URL+"/v1/models/llama-2-tiny-random", nil)
	require.Equal(t, 200, code, "%v", card)
	assert.Equal(t, "llama-2-tiny-random", card["id"])
	assert.Equal(t, "unloaded", card["status"].(map[string]any)["value"])
	code, card = callJSON(t, "GET", ts.URL+"/v1/models/stories260K", nil)
	require.Equal(t, 200, code, "%v", card)
	assert.Equal(t, "loaded", card["status"].(map[string]any)["value"])
	code, data = call(t, "GET", ts.URL+"/v1/models/gpt-9", nil, nil)
	assert.Equal(t, 404, code, "%s", data)
	assert.Equal(t, "model 'gpt-9' not found", errOf(t, data)["message"])

	// GET endpoints take the model from the query.
	code, props := callJSON(t, "GET", ts.URL+"/props?model=stories260K", nil)
	require.Equal(t, 200, code)
	assert.Equal(t, filepath.Join(dir, "stories260K.gguf"), props["model_path"])
	code, _ = callJSON(t, "GET", ts.URL+"/props?model=nope", nil)
	assert.Equal(t, 400, code)

	// Explicit unload and load.
	code, out := callJSON(t, "POST", ts.URL+"/models/unload", map[string]any{"model": "stories260K"})
	require.Equal(t, 200, code, "%v", out)
	assert.Equal(t, true, out["success"])
	code, _ = callJSON(t, "POST", ts.URL+"/models/unload", map[string]any{"model": "stories260K"})
	assert.Equal(t, 400, code)
	assert.Equal(t, map[string]string{"stories260K": "unloaded", "llama-2-tiny-random": "unloaded"}, modelStatuses(t, ts.URL))
	code, out = callJSON(t, "POST", ts.URL+"/models/load", map[string]any{"model": "llama-2-tiny-random"})
	require.Equal(t, 200, code, "%v", out)
	assert.Equal(t, map[string]string{"stories260K": "unloaded", "llama-2-tiny-random": "loaded"}, modelStatuses(t, ts.URL))
	code, _ = callJSON(t, "POST", ts.URL+"/models/load", map[string]any{"model": "nope"})
	assert.Equal(t, 400, code)
	code, _ = callJSON(t, "POST", ts.URL+"/models/load", map[string]any{})
	assert.Equal(t, 400, code)

	// The events seen: each load went loading → loaded, each unload → unloaded.
	want := []string{
		"stories260K:loading", "stories260K:loaded",
		"stories260K:unloaded", "llama-2-tiny-random:loading", "llama-2-tiny-random:loaded",
		"llama-2-tiny-random:unloaded", "stories260K:loading", "stories260K:loaded",
		"stories260K:unloaded",
		"llama-2-tiny-random:loading", "llama-2-tiny-random:loaded",
	}
	var got []string
	for len(got) < len(want) {
		ev := <-events
		assert.Equal(t, "model_status", ev.Event)
		st := ev.Data.(map[string]any)["status"].(string)
		got = append(got, ev.Model+":"+st)
	}
	assert.Equal(t, want, got)
}

func TestServerRouterPreset(t *testing.T) {
	dir := t.TempDir()
	ini := filepath.Join(dir, "models.ini")
	require.NoError(t, os.WriteFile(ini, []byte(`version = 1
[*]
c = 256

[tiny]
model = `+testenv.Model(t, "stories260K.gguf")+`
chat-template = llama3
load-on-startup = true
`), 0o644))
	s, ts := newTestServer(t, Options{ModelsPreset: ini})
	waitModelState(t, s, "tiny", router.Loaded)
	assert.Equal(t, "loaded", modelStatuses(t, ts.URL)["tiny"])
	code, props := callJSON(t, "GET", ts.URL+"/props?model=tiny", nil)
	require.Equal(t, 200, code)
	assert.Equal(t, mustBuiltinJinja(t, "llama3"), props["chat_template"])
	assert.Equal(t, float64(256), props["default_generation_settings"].(map[string]any)["n_ctx"])
	// The only model is the default.
	code, _ = callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "hi"})
	assert.Equal(t, 200, code)
}

func TestServerSleepOnIdle(t *testing.T) {
	s, ts := newTestServer(t, Options{SleepIdleSeconds: 1})
	tok := func() []any {
		code, out := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "Once upon a time"})
		require.Equal(t, 200, code, "%v", out)
		return out["tokens"].([]any)
	}
	first := tok()
	sleeping := func() bool {
		_, p := callJSON(t, "GET", ts.URL+"/props", nil)
		return p["is_sleeping"] == true
	}
	assert.False(t, sleeping())
	waitModelState(t, s, "", router.Sleeping)
	assert.True(t, sleeping())

	// Sleeping: the model is freed, /health and /props still answer.
	e, _ := s.models.Lookup("")
	assert.Nil(t, s.models.View(e).Inst)
	code, _ := callJSON(t, "GET", ts.URL+"/health", nil)
	assert.Equal(t, 200, code)
	_, p := callJSON(t, "GET", ts.URL+"/props", nil)
	assert.Equal(t, mustBuiltinJinja(t, "chatml"), p["chat_template"])
	code, _ = call(t, "GET", ts.URL+"/metrics", nil, nil)
	assert.Equal(t, 200, code)
	assert.True(t, sleeping(), "GET /props, /health and /metrics do not wake the model")

	// The next request reloads transparently.
	assert.Equal(t, first, tok())
	assert.False(t, sleeping())
}

func testLogger(testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestServerConcurrentWake(t *testing.T) {
	s, ts := newTestServer(t, Options{SleepIdleSeconds: 1})
	waitModelState(t, s, "", router.Sleeping)

	// Several requests arrive together: one load serves them all.
	events, cancel := s.models.Subscribe()
	defer cancel()
	const n = 6
	codes := make(chan int, n)
	for range n {
		go func() {
			code, _ := call(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "hi"}, nil)
			codes <- code
		}()
	}
	for range n {
		assert.Equal(t, 200, <-codes)
	}
	loads := 0
	for done := false; !done; {
		select {
		case ev := <-events:
			if ev.Data.(map[string]any)["status"] == "loading" {
				loads++
			}
		default:
			done = true
		}
	}
	assert.Equal(t, 1, loads)
}

// TestServerMalformedBodies sends broken bodies to every POST endpoint
// registered (this file's and the other features'): each must answer with a
// 4xx JSON error, never a 5xx or a dropped connection.
func TestServerMalformedBodies(t *testing.T) {
	s, ts := newTestServer(t, Options{SlotSavePath: t.TempDir()})
	var posts []string
	ollamaShape := map[string]bool{} // {"error": "message"}
	for _, rt := range s.routes() {
		if path, ok := strings.CutPrefix(rt.Pattern, "POST "); ok {
			posts = append(posts, strings.ReplaceAll(path, "{id}", "0"))
			ollamaShape[path] = rt.Errors == ollamaErrors
		}
	}
	bodies := []string{"", "{", "[", "null", "42", `"x"`, `{"model": 7}`, `{"messages": 3, "prompt": {}, "content": true, "input": null}`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), "\xff\xfe"}
	for _, path := range posts {
		for _, body := range bodies {
			if strings.HasPrefix(path, "/slots/") {
				path += "?action=save"
			}
			code, data := call(t, "POST", ts.URL+path, body, nil)
			if code == 200 && (path == "/props" || path == "/lora-adapters" || path == "/detokenize" && strings.HasPrefix(body, "{")) {
				continue // bodies those endpoints accept (as llama.cpp, /detokenize takes a missing "tokens" as none)
			}
			if code == 200 && path == "/v1/streams/lookup" && json.Valid([]byte(body)) {
				continue // as llama.cpp: any JSON without "conversation_ids" asks for nothing and gets []
			}
			if assert.True(t, code >= 400 && code < 500 || code == 501, "POST %s %.40q: %d %s", path, body, code, data) {
				if ollamaShape[path] {
					var e struct{ Error string }
					require.NoError(t, json.Unmarshal(data, &e))
					assert.NotEmpty(t, e.Error, "POST %s", path)
					continue
				}
				assert.NotNil(t, errOf(t, data)["message"], "POST %s", path)
			}
		}
	}
}

func TestServerRouterSleepAndMetrics(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink(testenv.Model(t, "stories260K.gguf"), filepath.Join(dir, "a.gguf")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "b"), 0o755))
	require.NoError(t, os.Symlink(testenv.Model(t, "llama-2-tiny-random.gguf"), filepath.Join(dir, "b", "model.gguf")))
	s, ts := newTestServer(t, Options{ModelsDir: dir, SleepIdleSeconds: 1, Metrics: true, ChatTemplate: "chatml",
		Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 256}, Parallel: 1}})

	assert.Equal(t, map[string]string{"a": "unloaded", "b": "unloaded"}, modelStatuses(t, ts.URL))
	code, _ := callJSON(t, "GET", ts.URL+"/health", nil)
	assert.Equal(t, 200, code)
	code, data := call(t, "GET", ts.URL+"/metrics", nil, nil)
	assert.Equal(t, 400, code, "%s", data)
	assert.Equal(t, "model name is missing from the request", errOf(t, data)["message"])

	code, _ = callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "hi", "model": "b"})
	require.Equal(t, 200, code)
	assert.Equal(t, "loaded", modelStatuses(t, ts.URL)["b"])
	code, data = call(t, "GET", ts.URL+"/metrics?model=b", nil, nil)
	assert.Equal(t, 200, code)
	assert.Contains(t, string(data), "llamacpp:prompt_tokens_total")

	// autoload=false refuses a model that is not loaded.
	code, data = call(t, "POST", ts.URL+"/tokenize?autoload=false", map[string]any{"content": "hi", "model": "a"}, nil)
	assert.Equal(t, 400, code, "%s", data)

	waitModelState(t, s, "b", router.Sleeping)
	assert.Equal(t, "sleeping", modelStatuses(t, ts.URL)["b"])
	_, p := callJSON(t, "GET", ts.URL+"/props?model=b", nil)
	assert.Equal(t, true, p["is_sleeping"])
	code, _ = callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "hi", "model": "b"})
	require.Equal(t, 200, code)
	assert.Equal(t, map[string]string{"a": "unloaded", "b": "loaded"}, modelStatuses(t, ts.URL))
}

// POST /props changes global properties only with PropsEndpoint (--props);
// llama.cpp accepts any object there and changes nothing.
func TestServerPostProps(t *testing.T) {
	_, off := newTestServer(t, Options{})
	_, on := newTestServer(t, Options{PropsEndpoint: true})
	for _, tc := range []struct {
		name string
		url  string
		body any
		code int
	}{
		{"disabled", off.URL, map[string]any{}, 501},
		{"disabled, any body", off.URL, "not an object", 501},
		{"empty object", on.URL, map[string]any{}, 200},
		{"unknown property", on.URL, map[string]any{"n_ctx": 8}, 200},
		{"not an object", on.URL, []int{1}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "POST", tc.url+"/props", tc.body, nil)
			require.Equal(t, tc.code, code, "%s", data)
			switch code {
			case 200:
				assert.JSONEq(t, `{"success": true}`, string(data))
			case 501:
				e := errOf(t, data)
				assert.Equal(t, "not_supported_error", e["type"])
				assert.Contains(t, e["message"], "--props")
			}
		})
	}
	// GET /props is unaffected.
	code, _ := callJSON(t, "GET", on.URL+"/props", nil)
	assert.Equal(t, 200, code)
}

// TestRouterReloadPreset checks GET /models?reload=1: the preset is read
// again, models are added and dropped; a preset model from Hugging Face is
// listed and fails clearly to load.
func TestRouterReloadPreset(t *testing.T) {
	dir := t.TempDir()
	preset := filepath.Join(dir, "models.ini")
	model := testenv.Model(t, "stories260K.gguf")
	write := func(body string) { require.NoError(t, os.WriteFile(preset, []byte(body), 0o600)) }
	write("[a]\nmodel = " + model + "\n\n[b]\nhf-repo = org/b\n")
	// Offline and with an empty hub cache, the pull of b fails at once,
	// without any network.
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	s, err := New(context.Background(), Options{ModelsPreset: preset, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	ids := func(reload bool) []string {
		u := ts.URL + "/models"
		if reload {
			u += "?reload=1"
		}
		code, data := call(t, "GET", u, nil, nil)
		require.Equal(t, 200, code, "%s", data)
		var l struct {
			Data []struct{ ID string } `json:"data"`
		}
		require.NoError(t, json.Unmarshal(data, &l))
		var out []string
		for _, d := range l.Data {
			out = append(out, d.ID)
		}
		return out
	}
	assert.Equal(t, []string{"a", "b"}, ids(false))
	code, data := call(t, "POST", ts.URL+"/completion", map[string]any{"model": "b", "prompt": "x"}, nil)
	assert.Equal(t, 500, code)
	assert.Contains(t, string(data), "offline")

	write("[b]\nhf-repo = org/b\n\n[c]\nmodel = " + model + "\n")
	assert.Equal(t, []string{"a", "b"}, ids(false), "read again only when asked")
	assert.Equal(t, []string{"b", "c"}, ids(true))
	code, data = call(t, "POST", ts.URL+"/completion", map[string]any{"model": "c", "prompt": "Once", "n_predict": 2}, nil)
	assert.Equal(t, 200, code, "%s", data)
}
