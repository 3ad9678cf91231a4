package server

// Attack tests of issue 36 (items 2, 3, 4, 5, 7, 8 and 10): each
// performs the attack against the real handler on a real model and
// fails on the code before the fix. All traffic goes to 127.0.0.1, in a
// bounded number of requests; waits are bounded by deadlines far above
// what the answers take (no timing is asserted).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawRequest opens a connection to ts, sends head (the request line and
// headers, without the blank line) and then body, and returns the
// connection, its reader, and a read deadline far in the future.
func rawRequest(t *testing.T, ts *httptest.Server, head, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n"+body)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	return c, bufio.NewReader(c)
}

// stalledBody is a request head announcing n bytes of body to path.
func stalledBody(path string, n int, extra ...string) string {
	h := fmt.Sprintf("POST %s HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\nContent-Length: %d", path, n)
	for _, e := range extra {
		h += "\n" + e
	}
	return h
}

// TestSecurityBodyBufferGrowsWithData performs item 2 on the body
// reader: a body announcing 64 MiB that sends 120 bytes must not cost 64
// MiB (before the fix the buffer was allocated from Content-Length), and
// an honest body still ends in one buffer of its own size.
// llama-server v0.4.0 (cpp-httplib) reads bodies as they come.
func TestSecurityBodyBufferGrowsWithData(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announced int64
		sent      int
		honest    bool
		maxCap    int
	}{
		{"64 MiB announced, 120 bytes sent", 64 << 20, 120, false, 64 << 10},
		{"1 MiB announced, 100 KiB sent", 1 << 20, 100 << 10, false, 256 << 10},
		{"honest 100,000 bytes", 100000, 100000, true, 100001},
		{"honest 10 bytes", 10, 10, true, 11},
		{"unknown length", -1, 50000, true, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := strings.Repeat("x", tc.sent)
			var r io.Reader = strings.NewReader(data)
			if !tc.honest {
				r = io.MultiReader(r, errReader{})
			}
			buf, err := readAllSized(r, tc.announced)
			if tc.honest {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			assert.Equal(t, data, string(buf))
			assert.LessOrEqual(t, cap(buf), tc.maxCap, "the buffer grows with the data, not the announcement")
		})
	}
}

// errReader fails every read, as a connection that went away.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestSecurityBodyAnnouncedMemory performs item 2 over HTTP: 8 requests
// announcing 64 MiB each and sending 120 bytes, held open while their
// handlers read. Before the fix the heap grew by 512 MiB.
func TestSecurityBodyAnnouncedMemory(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n, sent = 8, 120
	for range n {
		rawRequest(t, ts, stalledBody("/completion", 64<<20), `{"prompt":"`+strings.Repeat("a", sent-12)+`"`)
	}
	require.Eventually(t, func() bool { return s.bodies.inUse() == n*sent }, 30*time.Second, 10*time.Millisecond,
		"every handler reads its 120 bytes")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(64<<20), "8 stalled 64 MiB announcements cost far less than one")
}

// TestSecurityBodyBudget performs item 2's other half: bodies in flight
// are bounded across requests. One client holds almost the whole budget
// with a body it does not finish; another's body then waits briefly and
// gets a 503 (and its connection closes), and once the first goes, the
// same request is served.
func TestSecurityBodyBudget(t *testing.T) {
	s, ts := newTestServer(t, Options{MaxBodyBytes: 1 << 20, BodyBytesInFlight: 1 << 20})
	hold := (1 << 20) - 100
	c, _ := rawRequest(t, ts, stalledBody("/completion", 1<<20), `{"prompt":"`+strings.Repeat("a", hold-11))
	require.Eventually(t, func() bool { return s.bodies.inUse() == int64(hold) }, 30*time.Second, 10*time.Millisecond)

	body := `{"prompt":"Once","n_predict":1}` + strings.Repeat(" ", 400)
	resp, data := webRequest(t, "POST", ts.URL+"/completion", body, map[string]string{"Content-Type": "application/json"})
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", data)
	assert.Contains(t, errOf(t, data)["message"], "too many request bodies")

	c.Close()
	require.Eventually(t, func() bool { return s.bodies.inUse() == 0 }, 30*time.Second, 10*time.Millisecond)
	resp, data = webRequest(t, "POST", ts.URL+"/completion", body, map[string]string{"Content-Type": "application/json"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
}

// TestSecurityErrorClosesUnreadBody performs item 4: a client without
// the key announces a body and sends one byte. Before the fix net/http
// drained the body before sending the 401, so the connection was held
// until the read timeout (here: none, so for ever). Now the error comes
// at once with Connection: close and the connection ends. The same holds
// for a cross-site 403 and the 415 of /tools. llama-server v0.4.0
// answers the 401 at once too (cpp-httplib reads the body only for the
// handler), but keeps its threads on slow bodies.
func TestSecurityErrorClosesUnreadBody(t *testing.T) {
	_, keyed := newTestServer(t, Options{APIKeys: []string{"k"}})
	_, open := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"get_info"}}})
	for _, tc := range []struct {
		name   string
		ts     *httptest.Server
		head   string
		status string
	}{
		{"401 without a key", keyed, stalledBody("/completion", 200000), "401"},
		{"401 with a wrong key", keyed, stalledBody("/v1/chat/completions", 200000, "Authorization: Bearer nope"), "401"},
		{"403 cross-site form", open, strings.Replace(stalledBody("/completion", 200000, "Origin: https://attacker.example"), "application/json", "text/plain", 1), "403"},
		{"415 on /tools", open, strings.Replace(stalledBody("/tools", 200000), "application/json", "text/plain", 1), "415"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rd := rawRequest(t, tc.ts, tc.head, "{")
			resp, err := http.ReadResponse(rd, nil)
			require.NoError(t, err, "the answer comes before the body")
			assert.Contains(t, resp.Status, tc.status)
			assert.True(t, resp.Close, "Connection: close")
			_, _ = io.Copy(io.Discard, resp.Body)
			_, err = rd.ReadByte()
			assert.ErrorIs(t, err, io.EOF, "the server closes the connection")
		})
	}
}

// TestSecurityBodyReadTimeout performs item 4's slow body with a valid
// key: it announces 1,000 bytes and sends 10. The handler's read gives up
// after the body read timeout and the connection is closed (before: held
// until the server's read timeout, 3,600 s by default, as llama-server's).
func TestSecurityBodyReadTimeout(t *testing.T) {
	_, ts := newTestServer(t, Options{APIKeys: []string{"k"}, BodyReadTimeout: 300 * time.Millisecond})
	_, rd := rawRequest(t, ts, stalledBody("/completion", 1000, "Authorization: Bearer k"), `{"prompt":`)
	resp, err := http.ReadResponse(rd, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	_, _ = io.Copy(io.Discard, resp.Body)
	_, err = rd.ReadByte()
	assert.Error(t, err, "the connection is closed")
}

// TestSecurityCORSDefaults performs item 3: a web page of another site
// drives the API of a server without a key. The command line's default
// is now "localhost" (llama-server: "*", which this test shows opting in
// to); whatever the setting, a cross-origin POST with a simple body
// (no preflight) is refused. Browsers' real clients keep working: the
// server's own page, llama.cpp's web UI (same origin), and the OpenAI
// and Anthropic SDKs, which send JSON (Anthropic's with its
// direct-browser header) and get through a preflight when their origin
// is allowed.
func TestSecurityCORSDefaults(t *testing.T) {
	_, def := newTestServer(t, Options{CORSOrigins: []string{"localhost"}})
	_, star := newTestServer(t, Options{CORSOrigins: []string{"*"}})
	dir := t.TempDir()
	slotServer := func(origins []string) *httptest.Server {
		_, ts := newTestServer(t, Options{CORSOrigins: origins, SlotSavePath: dir})
		return ts
	}
	defSlots, starSlots := slotServer([]string{"localhost"}), slotServer([]string{"*"})
	completion := `{"prompt":"Once","n_predict":1}`
	evil := "https://attacker.example"
	for _, tc := range []struct {
		name      string
		ts        *httptest.Server
		path      string
		body      string
		hdr       map[string]string
		status    int
		reflected bool
	}{
		{"default: text/plain from another site", def, "/completion", completion, map[string]string{"Content-Type": "text/plain", "Origin": evil}, 403, false},
		{"default: JSON from another site", def, "/completion", completion, map[string]string{"Content-Type": "application/json", "Origin": evil, "Sec-Fetch-Site": "cross-site"}, 403, false},
		{"default: slot save from another site", defSlots, "/slots/0?action=save", `{"filename":"x.bin"}`, map[string]string{"Content-Type": "text/plain", "Origin": evil}, 403, false},
		{"default: loopback origin", def, "/completion", completion, map[string]string{"Content-Type": "application/json", "Origin": "http://localhost:5173", "Sec-Fetch-Site": "same-site"}, 200, true},
		{"default: same origin", def, "/completion", completion, map[string]string{"Content-Type": "application/json", "Origin": def.URL, "Sec-Fetch-Site": "same-origin"}, 200, true},
		{"default: same-origin page, any body type", def, "/completion", completion, map[string]string{"Content-Type": "text/plain", "Origin": def.URL, "Sec-Fetch-Site": "same-origin"}, 200, true},
		{"default: curl -d", def, "/completion", completion, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 200, false},
		{"default: OpenAI SDK (no Origin)", def, "/v1/chat/completions", `{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer sk-x"}, 200, false},
		{"default: Anthropic SDK in a loopback page", def, "/v1/messages", `{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`, map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:3000", "anthropic-dangerous-direct-browser-access": "true", "anthropic-version": "2023-06-01"}, 200, true},
		{"*: text/plain from another site (llama-server: 200)", star, "/completion", completion, map[string]string{"Content-Type": "text/plain", "Origin": evil}, 403, true},
		{"*: form from another site", star, "/completion", completion, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": evil, "Sec-Fetch-Site": "cross-site"}, 403, true},
		{"*: no type from another site", star, "/completion", completion, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, false},
		{"*: slot save, text/plain (llama-server: saved)", starSlots, "/slots/0?action=save", `{"filename":"x.bin"}`, map[string]string{"Content-Type": "text/plain", "Origin": evil}, 403, true},
		{"*: JSON from another site, opted in", star, "/completion", completion, map[string]string{"Content-Type": "application/json", "Origin": evil, "Sec-Fetch-Site": "cross-site"}, 200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := webRequest(t, "POST", tc.ts.URL+tc.path, tc.body, tc.hdr)
			assert.Equal(t, tc.status, resp.StatusCode, "%s", data)
			if tc.status == 403 {
				assert.Equal(t, "permission_error", errOf(t, data)["type"])
			}
			assert.Equal(t, tc.reflected, resp.Header.Get("Access-Control-Allow-Origin") != "", "Access-Control-Allow-Origin")
		})
	}
	_, err := os.Stat(filepath.Join(dir, "x.bin"))
	assert.True(t, os.IsNotExist(err), "no slot was saved")

	// The preflight of a foreign page gets no CORS headers by default.
	req, err := http.NewRequest(http.MethodOptions, def.URL+"/completion", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", evil)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

// TestSecurityHostBeyondLoopback performs item 5: the server listens on
// a LAN address, and a page of evil.example, rebound to that address,
// sends Host and Origin evil.example to /tools. Before the fix the Host
// was checked on loopback connections only, and the command ran (as
// with llama-server v0.4.0, which checks no Host). The connection's
// address is put in the request context: nothing leaves the process.
func TestSecurityHostBeyondLoopback(t *testing.T) {
	s, _ := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}}, CORSOrigins: []string{"localhost"}})
	lan := &net.TCPAddr{IP: net.ParseIP("192.168.1.5"), Port: 8080}
	own, err := os.Hostname()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		host string
		ran  bool
	}{
		{"rebound name", "evil.example:8080", false},
		{"rebound name without port", "evil.example", false},
		{"the LAN address", "192.168.1.5:8080", true},
		{"localhost", "localhost:8080", true},
		{"this machine's name", own + ":8080", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, marker := shellMarker(t)
			r := httptest.NewRequest(http.MethodPost, "/tools", strings.NewReader(body))
			r.Host = tc.host
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Origin", "http://"+tc.host)
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, lan))
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			_, err := os.Stat(marker)
			assert.Equal(t, tc.ran, err == nil, "the command ran: %s", w.Body)
			if !tc.ran {
				assert.Equal(t, http.StatusForbidden, w.Code)
				assert.Contains(t, w.Body.String(), "--allowed-hosts")
			}
		})
	}
}

// TestSecurityStreamSessionsCapped performs item 7: fire-and-forget
// generations with distinct X-Conversation-Id each left a session of up
// to 4 MiB for 300 s, without a cap (llama-server has none). Now a key
// keeps at most streamSessionsPerKey, the oldest finished ones dropped.
func TestSecurityStreamSessionsCapped(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	const n = streamSessionsPerKey + 8
	for i := range n {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/completion", strings.NewReader(`{"prompt":"Once","n_predict":2,"stream":true}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Conversation-Id", fmt.Sprintf("conv-%d", i))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	s.streams.mu.Lock()
	kept := len(s.streams.sessions)
	_, newest := s.streams.sessions[streamKey{id: fmt.Sprintf("conv-%d", n-1)}]
	s.streams.mu.Unlock()
	assert.Equal(t, streamSessionsPerKey, kept)
	assert.True(t, newest, "the newest session is kept")

	// The rule, table-driven on the store: per key, in all, and live
	// sessions never dropped.
	for _, tc := range []struct {
		name       string
		scopes     int
		per        int
		finished   bool
		wantTotal  int
		refusedAny bool
	}{
		{"one key, finished", 1, 40, true, streamSessionsPerKey, false},
		{"many keys, finished", 10, 10, true, streamSessionsMax, false},
		{"one key, all generating", 1, 40, false, streamSessionsPerKey, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st streamStore
			refused := false
			for sc := range tc.scopes {
				for i := range tc.per {
					ss := newStreamSession(streamKey{scope: fmt.Sprint(sc), id: fmt.Sprint(i)}, func() {})
					if !st.replace(ss) {
						refused = true
						continue
					}
					if tc.finished {
						ss.finish()
					}
				}
			}
			assert.Len(t, st.sessions, tc.wantTotal)
			assert.Equal(t, tc.refusedAny, refused)
			st.closeAll()
		})
	}
}

// TestSecurityFIFOUnderPaths performs item 8: a FIFO in --path or
// --media-path blocked the request's thread in open(2) for as long as no
// one wrote to it (llama-server v0.4.0 blocks the same way under
// --path). Now it is opened without blocking and refused.
func TestSecurityFIFOUnderPaths(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "x.js"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>hi</p>"), 0o600))
	_, ts := newTestServer(t, Options{UIPath: dir})
	client := &http.Client{Timeout: 20 * time.Second}
	for _, tc := range []struct {
		path   string
		status int
	}{{"/x.js", 404}, {"/", 200}} {
		resp, err := client.Get(ts.URL + tc.path)
		require.NoError(t, err, "GET %s answers", tc.path)
		resp.Body.Close()
		assert.Equal(t, tc.status, resp.StatusCode, tc.path)
	}

	inst := &instance{Opts: Options{MediaPath: dir}}
	done := make(chan error, 1)
	go func() {
		_, err := inst.readMediaFile("x.js")
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "not a regular file")
	case <-time.After(20 * time.Second):
		t.Fatal("reading a FIFO under the media path blocks")
	}
}

// TestSecurityErrorCodes checks item 10: an error body's "code" is its
// HTTP status, the 415 of POST /tools included (it said 400), and the 404
// of an unknown tool (llama-server's says 400 there).
func TestSecurityErrorCodes(t *testing.T) {
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"get_info"}}})
	resp, data := webRequest(t, "POST", ts.URL+"/tools", `{"tool":"get_info","params":{}}`, map[string]string{"Content-Type": "text/plain"})
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s", data)
	var e errorDetail
	require.NoError(t, json.Unmarshal(data, &e), "%s", data)
	assert.Equal(t, http.StatusUnsupportedMediaType, e.Code)

	for _, tc := range []struct {
		err  *httpError
		code int
	}{
		{&httpError{Status: 415, Type: errInvalidRequest, Msg: "x"}, 415},
		{&httpError{Status: 413, Type: errInvalidRequest, Msg: "x"}, 413},
		{apiError(errPermission, "x"), 403},
		{&httpError{Status: 404, Type: errInvalidRequest, Msg: "unknown tool"}, 404},
	} {
		for _, d := range []dialect{llamaErrors, toolErrors} {
			status, body := d.render(tc.err)
			b, err := json.Marshal(body)
			require.NoError(t, err)
			var got struct {
				Code  int `json:"code"`
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(b, &got))
			code := got.Code + got.Error.Code
			if d == llamaErrors {
				assert.Equal(t, status, code, "%s", b)
			} else {
				assert.Equal(t, tc.code, code, "%s", b)
			}
		}
	}
}

// TestSecurityWriteTimeout performs a client that asks for a large answer
// and stops reading: the response's writes give up after the write
// timeout and the connection is closed, where before nothing bounded them
// under server.Handler (and examples/server's whole-response timeout cut
// healthy streams instead). The answer: /tokenize of 250,000 tokens with
// their pieces, about 6 MB, to a client whose socket takes 4 KiB.
func TestSecurityWriteTimeout(t *testing.T) {
	_, ts := newTestServer(t, Options{WriteTimeout: 300 * time.Millisecond})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	body := `{"with_pieces":true,"content":"` + strings.Repeat("a ", 250_000) + `"}`
	_, err = fmt.Fprintf(c, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	time.Sleep(2 * time.Second) // the client takes nothing
	n, err := io.Copy(io.Discard, resp.Body)
	require.Error(t, err, "the answer is cut (%d bytes read)", n)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the server closed the connection")
}

// TestWriteDeadlines checks the rule of the write timeout: it bounds each
// write, not the response. A handler that writes, waits three timeouts,
// and writes again reaches a client that reads as it comes; so does a
// body ten times writeChunk in one write. A 1 ns timeout (every write
// late) shows that Handler applies Options.WriteTimeout.
func TestWriteDeadlines(t *testing.T) {
	const d = 100 * time.Millisecond
	big := strings.Repeat("x", 10*writeChunk)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"a pause between writes", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "a")
			require.NoError(t, http.NewResponseController(w).Flush())
			time.Sleep(3 * d)
			_, _ = io.WriteString(w, "b")
		}, "ab"},
		{"a pause before the first write", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(3 * d)
			_, _ = io.WriteString(w, "a")
		}, "a"},
		{"one large write", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, big)
		}, big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(writeDeadlines(d)(tc.handler))
			defer ts.Close()
			for range 2 { // the second on the same connection
				resp, err := ts.Client().Get(ts.URL)
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(b))
			}
		})
	}

	_, late := newTestServer(t, Options{WriteTimeout: time.Nanosecond})
	_, err := late.Client().Get(late.URL + "/health")
	assert.Error(t, err, "every write is past its deadline")
	_, none := newTestServer(t, Options{WriteTimeout: -1})
	resp, err := none.Client().Get(none.URL + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// BenchmarkWriteDeadlines measures a streamed event (a write and a flush)
// through writeDeadlines against the same without a bound: the deadline
// costs a timer update when it moves.
func BenchmarkWriteDeadlines(b *testing.B) {
	for _, d := range []time.Duration{0, time.Minute} {
		b.Run(fmt.Sprintf("timeout=%v", d), func(b *testing.B) {
			msg := []byte(`data: {"content":" token","stop":false}` + "\n\n")
			ts := httptest.NewServer(writeDeadlines(d)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				for range b.N {
					_, _ = w.Write(msg)
					_ = rc.Flush()
				}
			})))
			defer ts.Close()
			b.ResetTimer()
			resp, err := ts.Client().Get(ts.URL)
			require.NoError(b, err)
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(b, int64(b.N*len(msg)), n)
		})
	}
}

// TestSecurityDecodedBudget: a body's share of the budget counts what
// decoding it builds, not only its bytes: a megabyte budget takes a
// chat whose chat_template_kwargs holds a thousand empty objects, and
// refuses one holding ten thousand (160 bytes each once decoded, though
// 3 bytes sent) with a 413; pairs of logit_bias the same.
func TestSecurityDecodedBudget(t *testing.T) {
	s, ts := newTestServer(t, Options{MaxBodyBytes: 1 << 20, BodyBytesInFlight: 1 << 20})
	objects := func(n int) string { return "[" + strings.Repeat("{},", n-1) + "{}]" }
	pairs := func(n int) string { return "[" + strings.Repeat("[1,0],", n-1) + "[1,0]]" }
	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"kwargs, 1,000 objects", "/v1/chat/completions", `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":` + objects(1000) + `}}`, http.StatusOK},
		{"kwargs, 10,000 objects", "/v1/chat/completions", `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":` + objects(10000) + `}}`, http.StatusRequestEntityTooLarge},
		{"logit_bias, 1,000 pairs", "/completion", `{"prompt":"x","n_predict":1,"logit_bias":` + pairs(1000) + `}`, http.StatusOK},
		{"logit_bias, 10,000 pairs", "/completion", `{"prompt":"x","n_predict":1,"logit_bias":` + pairs(10000) + `}`, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := webRequest(t, "POST", ts.URL+tc.path, tc.body, map[string]string{"Content-Type": "application/json"})
			require.Equal(t, tc.status, resp.StatusCode, "%s", data)
			if tc.status != http.StatusOK {
				assert.Contains(t, errOf(t, data)["message"], "decoded")
			}
			require.Eventually(t, func() bool { return s.bodies.inUse() == 0 }, 10*time.Second, 10*time.Millisecond, "the request's share is given back")
		})
	}
	// The routes that read their bodies themselves count the same.
	_, tools := newTestServer(t, Options{MaxBodyBytes: 1 << 20, BodyBytesInFlight: 1 << 20, Tools: ToolsOptions{Enabled: []string{"get_info"}}})
	resp, data := webRequest(t, "POST", tools.URL+"/tools", `{"tool":"nope","params":{"a":`+objects(10000)+`}}`, map[string]string{"Content-Type": "application/json"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", data)
	resp, data = webRequest(t, "POST", ts.URL+"/v1/chat/completions/control", `{"id":`+objects(10000)+`}`, map[string]string{"Content-Type": "application/json"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", data)
}
