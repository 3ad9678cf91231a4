package server

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each test here performs an attack of issue 22 through the server's
// Handler and checks that it fails.

// keyHdr is the header of a request with key k ("" for none).
func keyHdr(k string) map[string]string {
	if k == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + k}
}

// TestSecurityStreamsOfOtherKeys: a request carrying a victim's
// X-Conversation-Id, without a key or with another key, can neither stop
// the victim's generation, nor read, list, delete or replace its stream.
func TestSecurityStreamsOfOtherKeys(t *testing.T) {
	const victim, attacker = "key-victim", "key-attacker"
	_, ts := newTestServer(t, Options{APIKeys: []string{victim, attacker}})
	body := `{"prompt":"Once upon a time","stream":true,"n_predict":100000,"ignore_eos":true}`
	start := func(key string) *http.Response {
		req, err := http.NewRequest("POST", ts.URL+"/completion", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-Conversation-Id", "conv-v")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp := start(victim)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	events := bufio.NewReader(resp.Body)
	_, err := events.ReadString('\n')
	require.NoError(t, err)

	lookup := func(key string) []map[string]any {
		code, data := call(t, "POST", ts.URL+"/v1/streams/lookup", map[string]any{"conversation_ids": []string{"conv-v"}}, keyHdr(key))
		if code != 200 {
			return nil
		}
		var out []map[string]any
		require.NoError(t, json.Unmarshal(data, &out))
		return out
	}
	// No key: refused, and (the finding) the victim's stream untouched.
	noKey := start("")
	noKeyBody, _ := io.ReadAll(noKey.Body)
	noKey.Body.Close()
	assert.Equal(t, 401, noKey.StatusCode, "%s", noKeyBody)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/stream?conv_id=conv-v"},
		{"DELETE", "/v1/stream?conv_id=conv-v"},
		{"POST", "/v1/streams/lookup"},
	} {
		code, _ := call(t, tc.method, ts.URL+tc.path, `{"conversation_ids":["conv-v"]}`, nil)
		assert.Equal(t, 401, code, tc.path)
	}
	// Another key: the victim's session is not its own.
	code, _ := call(t, "GET", ts.URL+"/v1/stream?conv_id=conv-v", nil, keyHdr(attacker))
	assert.Equal(t, 404, code, "another key cannot replay the stream")
	assert.Empty(t, lookup(attacker), "another key does not see the session")
	code, _ = call(t, "DELETE", ts.URL+"/v1/stream?conv_id=conv-v", nil, keyHdr(attacker))
	assert.Equal(t, 204, code)
	own := start(attacker) // the same id under another key is another session
	_, err = bufio.NewReader(own.Body).ReadString('\n')
	require.NoError(t, err)
	own.Body.Close()
	code, _ = call(t, "DELETE", ts.URL+"/v1/stream?conv_id=conv-v", nil, keyHdr(attacker))
	assert.Equal(t, 204, code)

	got := lookup(victim)
	require.Len(t, got, 1, "the victim's session survived")
	assert.Equal(t, false, got[0]["is_done"], "the victim's generation still runs")
	for range 3 { // and its events still come
		line, err := events.ReadString('\n')
		require.NoError(t, err)
		_ = line
	}
	code, _ = call(t, "DELETE", ts.URL+"/v1/stream?conv_id=conv-v", nil, keyHdr(victim))
	assert.Equal(t, 204, code)
	assert.Empty(t, lookup(victim), "the owner can stop it")
}

// TestSecurityModelListsNeedKey: with an API key, the model lists and
// their rescan (?reload=1) answer 401 without it, as llama-server v0.4.0's
// (whose only public routes are /health, /v1/health and the web page).
func TestSecurityModelListsNeedKey(t *testing.T) {
	dir := t.TempDir()
	src, err := filepath.Abs(filepath.Join("..", "..", "shared", "models", "stories260K.gguf"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(src, filepath.Join(dir, "tiny.gguf")))
	router, rts := newTestServer(t, Options{ModelsDir: dir, APIKeys: []string{"k"}})
	_ = router
	_, sts := newTestServer(t, Options{APIKeys: []string{"k"}})
	for _, base := range []string{rts.URL, sts.URL} {
		for _, path := range []string{"/v1/models", "/models", "/v1/models?reload=1", "/models?reload=1"} {
			code, data := call(t, "GET", base+path, nil, nil)
			assert.Equal(t, 401, code, "%s%s: %s", base, path, data)
			assert.NotContains(t, string(data), dir, "no model path without the key")
			code, data = call(t, "GET", base+path, nil, keyHdr("k"))
			assert.Equal(t, 200, code, "%s%s: %s", base, path, data)
		}
		for _, path := range []string{"/health", "/v1/health"} {
			code, _ := call(t, "GET", base+path, nil, nil)
			assert.Equal(t, 200, code, path)
		}
		// A path no route has: 401 without the key, as llama-server's.
		code, _ := call(t, "POST", base+"/no/such/route", `{}`, nil)
		assert.Equal(t, 401, code)
		code, _ = call(t, "POST", base+"/no/such/route", `{}`, keyHdr("k"))
		assert.Equal(t, 404, code)
	}
}

// TestSecurityStaticFiles: under --path with an API key, the page's own
// paths are public and other files need the key, as llama-server's; files
// and folders whose name starts with "." are never served.
func TestSecurityStaticFiles(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"index.html": "<p>page</p>", "app.js": "js", "notes.txt": "private notes",
		".env": "SECRET=1", ".git/config": "[core]", "sub/.htpasswd": "u:p", "sub/ok.txt": "fine",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	_, keyed := newTestServer(t, Options{UIPath: dir, APIKeys: []string{"k"}})
	_, open := newTestServer(t, Options{UIPath: dir})
	for _, tc := range []struct {
		base, path, key string
		code            int
		body            string
	}{
		{keyed.URL, "/", "", 200, "<p>page</p>"},
		{keyed.URL, "/index.html", "", 200, "<p>page</p>"},
		{keyed.URL, "/app.js", "", 200, "js"},
		{keyed.URL, "/notes.txt", "", 401, ""},
		{keyed.URL, "/sub/ok.txt", "", 401, ""},
		{keyed.URL, "/notes.txt", "k", 200, "private notes"},
		{keyed.URL, "/sub/ok.txt", "k", 200, "fine"},
		{keyed.URL, "/.env", "", 401, ""},
		{keyed.URL, "/.env", "k", 404, ""},
		{keyed.URL, "/.git/config", "k", 404, ""},
		{keyed.URL, "/sub/.htpasswd", "k", 404, ""},
		{keyed.URL, "/sub/%2e%2e/.env", "k", 404, ""},
		{open.URL, "/.env", "", 404, ""},
		{open.URL, "/.git/config", "", 404, ""},
		{open.URL, "/sub/.htpasswd", "", 404, ""},
		{open.URL, "/notes.txt", "", 200, "private notes"},
	} {
		code, _, body := get(t, tc.base+tc.path, tc.key)
		assert.Equal(t, tc.code, code, "%s key %q: %s", tc.path, tc.key, body)
		if tc.body != "" {
			assert.Equal(t, tc.body, body, tc.path)
		}
		assert.NotContains(t, body, "SECRET", tc.path)
		assert.NotContains(t, body, "u:p", tc.path)
	}
}

// TestSecuritySlotFiles: slot files are written 0600 in a folder made
// 0700; corrupt files are the client's error (400), never a 500 or a
// process killed for memory (a flipped cell count made llama.cpp fill
// gigabytes), and a corrupt position does not outlive the slot's erasure.
func TestSecuritySlotFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slots")
	_, ts := newTestServer(t, Options{SlotSavePath: dir})
	code, data := call(t, "POST", ts.URL+"/completion", `{"prompt":"Once upon a time","n_predict":4,"id_slot":0}`, nil)
	require.Equal(t, 200, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/slots/0?action=save", `{"filename":"good.bin"}`, nil)
	require.Equal(t, 200, code, "%s", data)

	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "slot folder")
	st, err = os.Stat(filepath.Join(dir, "good.bin"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "slot file")

	good, err := os.ReadFile(filepath.Join(dir, "good.bin"))
	require.NoError(t, err)
	state := 12 + 4*int(binary.LittleEndian.Uint32(good[8:])) // offset of the state
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"token count past the context", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 100000) })},
		{"first cell count huge", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[state+4:], 0xfffffff0) })},
		{"last stream's cell count huge", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[len(b)-4:], 0xffffffff) })},
		{"negative position", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[state+8:], 0xfffffffe) })},
		{"truncated", good[:len(good)-100]},
		{"zeros", append(append([]byte(nil), good[:state]...), make([]byte, 64)...)},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.bin"), tc.file, 0o600))
		code, data := call(t, "POST", ts.URL+"/slots/1?action=restore", `{"filename":"bad.bin"}`, nil)
		assert.Equal(t, 400, code, "%s: %s", tc.name, data)
		assert.Equal(t, "invalid_request_error", errOf(t, data)["type"], tc.name)
	}
	code, data = call(t, "POST", ts.URL+"/slots/1?action=restore", `{"filename":"good.bin"}`, nil)
	require.Equal(t, 200, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/slots/1?action=erase", `{}`, nil)
	require.Equal(t, 200, code, "%s", data)
	code, data = call(t, "POST", ts.URL+"/completion", `{"prompt":"Once upon a time","n_predict":4,"id_slot":1}`, nil)
	assert.Equal(t, 200, code, "the server still serves: %s", data)
}

// TestSecurityToolGrammarBound: a chat request with thousands of tools,
// or with tools whose schemas ask for a huge grammar, is answered
// (refused) within a second's work instead of tying a core up for
// seconds or minutes; the limits are of work (counts and sizes), so the
// answers do not depend on the machine's speed.
func TestSecurityToolGrammarBound(t *testing.T) {
	_, ts := newTestServer(t, Options{ChatTemplate: genericToolsTemplate})
	tools := func(n int, prop string) []any {
		var out []any
		for i := range n {
			var params map[string]any
			require.NoError(t, json.Unmarshal([]byte(`{"type":"object","properties":{"a":`+prop+`,"b":`+prop+`},"required":["a","b"]}`), &params))
			out = append(out, map[string]any{"type": "function", "function": map[string]any{"name": fmt.Sprintf("tool_%d", i), "parameters": params}})
		}
		return out
	}
	// wide is a response format whose object has more properties than
	// one may have (a schema given with tools is bounded as one alone).
	wide := map[string]any{}
	for i := range 300 {
		wide[fmt.Sprintf("p%d", i)] = map[string]any{"type": "integer"}
	}
	for _, tc := range []struct {
		name   string
		tools  []any
		schema map[string]any
		code   int
		msg    string
	}{
		{"3000 tools", tools(3000, `{"type":"string"}`), nil, 400, "at most 512"},
		{"512 tools", tools(512, `{"type":"string"}`), nil, 200, ""},
		{"integer ranges", tools(300, `{"type":"integer","minimum":-123456789,"maximum":987654321}`), nil, 400, "grammar"},
		{"too many properties", tools(300, `{"type":"object","properties":{"x":{},"y":{},"z":{},"w":{}}}`), nil, 400, "properties"},
		{"a response format with too many properties", tools(1, `{"type":"string"}`), map[string]any{"type": "object", "properties": wide}, 400, "properties"},
	} {
		body := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "tools": tc.tools, "max_tokens": 1}
		if tc.schema != nil {
			body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "out", "schema": tc.schema}}
		}
		start := time.Now()
		code, data := call(t, "POST", ts.URL+"/v1/chat/completions", body, nil)
		took := time.Since(start)
		assert.Equal(t, tc.code, code, "%s: %.300s", tc.name, data)
		if tc.msg != "" {
			assert.Contains(t, errOf(t, data)["message"], tc.msg, tc.name)
		}
		// Before the limits, 1000 tools took 9 s and 3000 two minutes.
		// This guards against that blow-up, not speed: the bound is far
		// above any answer's time on a loaded machine.
		assert.Less(t, took, time.Minute, tc.name)
		t.Logf("%s: %d in %v", tc.name, code, took)
	}
}

// TestSecurityManyMessagesMemory: a 10 MB chat request of many short
// messages grows the heap by at most 10 times its body (it peaked at 540
// MB of RSS, the template's values of every message and the prompt
// besides several copies of the text). The peak is sampled while the
// request runs; the bytes allocated, which do not depend on timing, are
// bounded too.
func TestSecurityManyMessagesMemory(t *testing.T) {
	s, _ := newTestServer(t, Options{MaxBodyBytes: 64 << 20})
	h := s.Handler()
	msg := `{"role":"user","content":"` + strings.Repeat("hello world ", 8) + `"},`
	var sb strings.Builder
	sb.WriteString(`{"max_tokens":1,"messages":[`)
	for sb.Len() < 10<<20 {
		sb.WriteString(msg)
	}
	body := []byte(strings.TrimSuffix(sb.String(), ",") + "]}")
	sb = strings.Builder{}

	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	metrics.Read(heap)
	base := heap[0].Value.Uint64()
	var peak atomic.Uint64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		sm := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(sm)
			if v := sm[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Microsecond):
			}
		}
	}()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body))))
	runtime.ReadMemStats(&m1)
	close(stop)
	<-stopped

	assert.Equal(t, 400, w.Code, "the conversation cannot fit the context: %.300s", w.Body.String())
	assert.Contains(t, w.Body.String(), "cannot fit the context")
	growth := float64(peak.Load()-min(base, peak.Load())) / float64(len(body))
	allocated := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(len(body))
	t.Logf("body %d bytes: heap peak growth %.1fx, allocated %.1fx", len(body), growth, allocated)
	assert.LessOrEqual(t, growth, 10.0, "peak heap growth per body byte")
	// The request itself holds a copy of the body in the test; the server
	// reads it once more, and its messages' text once or twice.
	assert.LessOrEqual(t, allocated, 14.0, "bytes allocated per body byte")
}
