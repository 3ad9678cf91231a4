package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// webRequest sends one request as a browser (or curl) would: the body
// as is, with the given headers (Host among them).
func webRequest(t *testing.T, method, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

// shellMarker is an exec_shell_command call that creates a file, and
// the file: the proof that the command ran.
func shellMarker(t *testing.T) (body, marker string) {
	marker = filepath.Join(t.TempDir(), "pwned")
	b, err := json.Marshal(map[string]any{"tool": "exec_shell_command", "params": map[string]any{"command": "touch " + marker}})
	require.NoError(t, err)
	return string(b), marker
}

// TestWebCrossSiteTools performs finding H1: a page of another site posts
// a text/plain body in no-cors mode (no preflight) to /tools of an agent
// server without API key. Every browser-marked variant is refused and
// runs nothing; the server's own page and curl still work.
func TestWebCrossSiteTools(t *testing.T) {
	// CORS as the command line sets it with --tools or -ag: localhost.
	_, agent := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}}, CORSOrigins: []string{"localhost"}})
	// A library user's zero value: no CORS at all.
	_, bare := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}}})
	// Every origin allowed, as the user may choose: then pages may call.
	_, open := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}}, CORSOrigins: []string{"*"}})
	host := strings.TrimPrefix(agent.URL, "http://")
	for _, tc := range []struct {
		name   string
		ts     *httptest.Server
		hdr    map[string]string
		status int
		ran    bool
		msg    string
	}{
		{"no-cors text/plain from another site", agent, map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, 403, false, "cross-site request refused"},
		{"Origin of another site alone", agent, map[string]string{"Content-Type": "text/plain", "Origin": "https://attacker.example"}, 403, false, `"https://attacker.example" refused`},
		{"Sec-Fetch-Site cross-site alone", agent, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403, false, "Sec-Fetch-Site: cross-site"},
		{"JSON from another site", agent, map[string]string{"Content-Type": "application/json", "Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, 403, false, "cross-site"},
		{"sandboxed page (Origin null)", agent, map[string]string{"Content-Type": "text/plain", "Origin": "null", "Sec-Fetch-Site": "cross-site"}, 403, false, "cross-site"},
		{"localhost lookalike", agent, map[string]string{"Content-Type": "text/plain", "Origin": "http://localhost.attacker.example"}, 403, false, "refused"},
		{"no CORS configured", bare, map[string]string{"Content-Type": "text/plain", "Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, 403, false, "cross-site"},
		{"text/plain from no site (curl -d)", agent, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, false, "Content-Type must be application/json"},
		{"same-origin web page", agent, map[string]string{"Content-Type": "application/json", "Origin": agent.URL, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}, 200, true, ""},
		{"same-origin, Host in other case", agent, map[string]string{"Content-Type": "application/json", "Origin": "http://" + strings.ToUpper(host)}, 200, true, ""},
		{"allowed localhost origin", agent, map[string]string{"Content-Type": "application/json", "Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, 200, true, ""},
		{"curl with JSON", agent, map[string]string{"Content-Type": "application/json"}, 200, true, ""},
		{"any origin when CORS is *", open, map[string]string{"Content-Type": "application/json", "Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}, 200, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, marker := shellMarker(t)
			resp, data := webRequest(t, "POST", tc.ts.URL+"/tools", body, tc.hdr)
			assert.Equal(t, tc.status, resp.StatusCode, "%s", data)
			_, err := os.Stat(marker)
			assert.Equal(t, tc.ran, err == nil, "the command ran: %v", err == nil)
			if tc.msg != "" {
				var e map[string]any
				require.NoError(t, json.Unmarshal(data, &e), "%s", data)
				assert.Contains(t, e["message"], tc.msg, "POST /tools errors are unwrapped")
			}
		})
	}
}

// TestWebCrossSiteGeneration checks the same rule on the generation
// routes, in their own error dialects, and that curl -d (a form body, no
// Origin) keeps working as with llama-server.
func TestWebCrossSiteGeneration(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	prompt := `{"prompt":"Once","n_predict":2}`
	for _, tc := range []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		check            func(t *testing.T, data []byte)
	}{
		{"curl -d", "/completion", prompt, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 200, nil},
		{"same-origin fetch", "/completion", prompt, map[string]string{"Content-Type": "application/json", "Origin": ts.URL, "Sec-Fetch-Site": "same-origin"}, 200, nil},
		{"form post from another site", "/completion", prompt, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, 403, func(t *testing.T, data []byte) {
			e := errOf(t, data)
			assert.Equal(t, "permission_error", e["type"])
			assert.EqualValues(t, 403, e["code"])
		}},
		{"Anthropic shape", "/v1/messages", `{"model":"x","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`, map[string]string{"Content-Type": "text/plain", "Origin": "https://attacker.example"}, 403, func(t *testing.T, data []byte) {
			var e anthErrorBody
			require.NoError(t, json.Unmarshal(data, &e), "%s", data)
			assert.Equal(t, "error", e.Type)
			assert.Equal(t, "permission_error", e.Error.Type)
		}},
		{"DELETE from another site", "/models?model=x", "", map[string]string{"Origin": "https://attacker.example"}, 403, nil},
		{"GET from another site is read-only", "/health", "", map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}, 200, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			switch {
			case strings.HasPrefix(tc.name, "DELETE"):
				method = "DELETE"
			case strings.HasPrefix(tc.name, "GET"):
				method = "GET"
			}
			resp, data := webRequest(t, method, ts.URL+tc.path, tc.body, tc.hdr)
			assert.Equal(t, tc.status, resp.StatusCode, "%s", data)
			if tc.check != nil {
				tc.check(t, data)
			}
		})
	}
}

// TestWebDNSRebinding performs the DNS rebinding attack: attacker.example
// resolves to 127.0.0.1, so its page is same-origin with the server and
// sends Host: attacker.example. Over a loopback connection only loopback
// names are answered, unless AllowedHosts lists the name.
func TestWebDNSRebinding(t *testing.T) {
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}}, CORSOrigins: []string{"localhost"}})
	_, allowed := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}}, CORSOrigins: []string{"localhost"},
		AllowedHosts: []string{"attacker.example", "*.lan.example"}})
	port := ts.URL[strings.LastIndexByte(ts.URL, ':')+1:]
	aport := allowed.URL[strings.LastIndexByte(allowed.URL, ':')+1:]
	for _, tc := range []struct {
		name   string
		ts     *httptest.Server
		host   string
		status int
	}{
		{"attacker name", ts, "attacker.example:" + port, 403},
		{"attacker name, no port", ts, "attacker.example", 403},
		{"name under localhost of another domain", ts, "localhost.attacker.example:" + port, 403},
		{"LAN address over loopback", ts, "192.168.1.5:" + port, 403},
		{"localhost", ts, "localhost:" + port, 200},
		{"localhost with a final dot", ts, "localhost.:" + port, 200},
		{"name under .localhost", ts, "app.localhost:" + port, 200},
		{"127.0.0.1", ts, "127.0.0.1:" + port, 200},
		{"other 127/8 address", ts, "127.1.2.3:" + port, 200},
		{"IPv6 loopback", ts, "[::1]:" + port, 200},
		{"allowed with AllowedHosts", allowed, "attacker.example:" + aport, 200},
		{"allowed by a wildcard", allowed, "box.lan.example:" + aport, 200},
		{"wildcard is not the domain itself", allowed, "lan.example:" + aport, 403},
		{"other names still refused", allowed, "evil.example:" + aport, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := "http://" + tc.host
			body, marker := shellMarker(t)
			hdr := map[string]string{"Host": tc.host, "Origin": origin, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
			resp, data := webRequest(t, "POST", tc.ts.URL+"/tools", body, hdr)
			assert.Equal(t, tc.status, resp.StatusCode, "%s", data)
			_, err := os.Stat(marker)
			assert.Equal(t, tc.status == 200, err == nil, "the command ran")
			// Reads too: the page would read /props, the conversations'
			// web page and the slots.
			for _, path := range []string{"/props", "/", "/slots"} {
				resp, data := webRequest(t, "GET", tc.ts.URL+path, "", map[string]string{"Host": tc.host})
				assert.Equal(t, tc.status, resp.StatusCode, "GET %s: %s", path, data)
				if tc.status == 403 {
					assert.Contains(t, string(data), "--allowed-hosts")
				}
			}
		})
	}
}

// TestWebHostCheckRule tables the Host rule against the connection's
// local address (no traffic: the address is only put in the context).
func TestWebHostCheckRule(t *testing.T) {
	lo := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	lo6 := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 8080}
	lan := &net.TCPAddr{IP: net.ParseIP("192.168.1.5"), Port: 8080}
	for _, tc := range []struct {
		name    string
		local   net.Addr
		host    string
		allowed []string
		ok      bool
	}{
		{"loopback, other name", lo, "attacker.example:8080", nil, false},
		{"loopback v6, other name", lo6, "attacker.example", nil, false},
		{"loopback, localhost", lo, "LOCALHOST:8080", nil, true},
		{"loopback, no Host (HTTP/1.0)", lo, "", nil, true},
		{"LAN, any name without AllowedHosts", lan, "box.example:8080", nil, true},
		{"LAN, name not allowed", lan, "evil.example:8080", []string{"box.example"}, false},
		{"LAN, allowed name", lan, "Box.Example:8080", []string{"box.example"}, true},
		{"LAN, IP address with AllowedHosts", lan, "192.168.1.5:8080", []string{"box.example"}, true},
		{"LAN, localhost with AllowedHosts", lan, "localhost", []string{"box.example"}, true},
		{"loopback, * allows any", lo, "attacker.example", []string{"*"}, true},
		{"Unix socket", &net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"}, "attacker.example", nil, true},
		{"no local address", nil, "attacker.example", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.Host = tc.host
			if tc.local != nil {
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			}
			err := hostError(r, newHostPolicy(tc.allowed))
			assert.Equal(t, tc.ok, err == nil, "%v", err)
		})
	}
}
