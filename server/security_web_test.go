package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/server/internal/corsproxy"
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
		{"a page opened from a file (Origin null) says what to do", agent, map[string]string{"Content-Type": "application/json", "Origin": "null", "Sec-Fetch-Site": "cross-site"}, 403, false, "serve the page from http://localhost"},
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
		{"LAN, other name without AllowedHosts (issue 36 item 5)", lan, "box.example:8080", nil, false},
		{"LAN, IP address without AllowedHosts", lan, "192.168.1.5:8080", nil, true},
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

// proxyServer starts a server with the CORS proxy on (allowPrivate as
// given) whose dials are watched: any connection to an address that is
// not loopback fails the test before it is made.
func proxyServer(t *testing.T, o Options) (*Server, *httptest.Server) {
	t.Helper()
	o.Tools.CORSProxy = true
	s, ts := newTestServer(t, o)
	prod := s.proxy.Dialer.Control
	s.proxy.Dialer.Control = func(network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			t.Errorf("the proxy dialled %s", address)
			return errors.New("test: not loopback")
		}
		return prod(network, address, c)
	}
	return s, ts
}

// countingTarget is a target server counting its requests.
func countingTarget(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &n
}

func proxyURL(ts *httptest.Server, target string) string {
	return ts.URL + "/cors-proxy?url=" + url.QueryEscape(target)
}

// TestWebCORSProxyAddresses performs the open-relay attacks of finding
// H2: the proxy reaching loopback, private and cloud metadata addresses,
// given as addresses or as names resolving to them. They are refused
// unless CORSProxyAllowPrivate, and nothing connects.
func TestWebCORSProxyAddresses(t *testing.T) {
	target, hits := countingTarget(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secret") })
	s, ts := proxyServer(t, Options{})
	var lookups atomic.Int32
	s.proxy.Lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		names := map[string]string{
			"localhost": "127.0.0.1", "metadata.test": "169.254.169.254", "intranet.test": "10.1.2.3", "home.test": "192.168.0.1",
			"ula.test": "fd00::1", "aws6.test": "fd00:ec2::254", "self.test": "127.0.0.1", "mapped.test": "::ffff:127.0.0.1",
			"nat64.test": "64:ff9b::a9fe:a9fe", "cgnat.test": "100.100.100.200", "zero.test": "0.0.0.0",
			"multicast.test": "224.0.0.1", "sixtofour.test": "2002:a00:1::1",
		}
		a, ok := names[host]
		if !ok {
			return nil, fmt.Errorf("test: no such host %s", host)
		}
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	port := target.URL[strings.LastIndexByte(target.URL, ':')+1:]
	for _, u := range []string{
		target.URL + "/", "http://localhost:" + port + "/", "http://[::1]:" + port + "/", "http://0.0.0.0:" + port + "/",
		"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://10.0.0.1/", "http://[::ffff:127.0.0.1]:" + port + "/",
		"http://metadata.test/computeMetadata/v1/", "http://intranet.test/", "http://home.test/", "http://ula.test/",
		"http://aws6.test/", "http://self.test:" + port + "/", "http://mapped.test:" + port + "/", "http://nat64.test/",
		"http://cgnat.test/", "http://zero.test/", "http://multicast.test/", "http://sixtofour.test/",
	} {
		t.Run(u, func(t *testing.T) {
			for _, method := range []string{"GET", "POST"} {
				resp, data := webRequest(t, method, proxyURL(ts, u), "{}", map[string]string{"Content-Type": "application/json"})
				assert.Equal(t, 403, resp.StatusCode, "%s", data)
				e := errOf(t, data)
				assert.Equal(t, "permission_error", e["type"])
				assert.Contains(t, e["message"], "--cors-proxy-allow-private")
			}
		})
	}
	assert.Zero(t, hits.Load(), "the target was reached")
	assert.Positive(t, lookups.Load(), "names are resolved by the proxy, then checked")

	// With the flag the local target is reachable: the refusal above is
	// the address rule, not a broken proxy.
	_, open := proxyServer(t, Options{Tools: ToolsOptions{CORSProxyAllowPrivate: true}})
	resp, data := webRequest(t, "GET", proxyURL(open, target.URL+"/"), "", nil)
	assert.Equal(t, 200, resp.StatusCode, "%s", data)
	assert.Equal(t, "secret", string(data))
	assert.EqualValues(t, 1, hits.Load())
}

// TestWebCORSProxyAddrRule tables the address rule (no traffic).
func TestWebCORSProxyAddrRule(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "127.9.9.9": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.0.0.1": "private", "172.16.0.1": "private", "192.168.1.1": "private", "fc00::1": "private", "fd00:ec2::254": "private",
		"169.254.169.254": "link-local", "fe80::1": "link-local",
		"224.0.0.1": "multicast", "ff02::1": "multicast", "0.0.0.0": "unspecified", "::": "unspecified",
		"100.100.100.200": "reserved", "0.1.2.3": "reserved", "255.255.255.255": "reserved", "198.18.0.1": "reserved",
		"64:ff9b::a9fe:a9fe": "link-local (NAT64)", "2002:7f00:1::1": "loopback (6to4)",
		"8.8.8.8": "", "1.1.1.1": "", "2606:4700::1111": "", "64:ff9b::808:808": "",
	} {
		assert.Equal(t, want, corsproxy.AddrRefused(netip.MustParseAddr(addr)), addr)
	}
}

// TestWebCORSProxyRedirects: a target on an allowed address redirecting
// into loopback is refused at the redirect's connection; redirects stop
// after 5. Two local servers: 127.0.0.2 stands in for a public address.
func TestWebCORSProxyRedirects(t *testing.T) {
	inner, innerHits := countingTarget(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "internal") })
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("this test needs 127.0.0.2 (Linux routes 127/8 to loopback): %v", err)
	}
	outer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/", http.StatusFound)
	}))
	outer.Listener.Close()
	outer.Listener = ln
	outer.Start()
	defer outer.Close()

	s, ts := proxyServer(t, Options{})
	s.proxy.Refused = func(ip netip.Addr) string {
		if ip == netip.MustParseAddr("127.0.0.2") {
			return ""
		}
		return corsproxy.AddrRefused(ip)
	}
	resp, data := webRequest(t, "GET", proxyURL(ts, outer.URL+"/"), "", nil)
	assert.Equal(t, 403, resp.StatusCode, "%s", data)
	assert.Contains(t, errOf(t, data)["message"], "127.0.0.1 is loopback")
	assert.Zero(t, innerHits.Load(), "the redirect reached loopback")

	// Redirect chains between two local servers (private addresses
	// allowed): 5 redirects are followed, the 6th is not.
	var a, b *httptest.Server
	var hops atomic.Int32
	hop := func(next **httptest.Server) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			hops.Add(1)
			var left int
			_, _ = fmt.Sscan(r.URL.Query().Get("left"), &left)
			if left == 0 {
				_, _ = io.WriteString(w, "arrived")
				return
			}
			http.Redirect(w, r, fmt.Sprintf("%s/?left=%d", (*next).URL, left-1), http.StatusFound)
		}
	}
	a, _ = countingTarget(t, hop(&b))
	b, _ = countingTarget(t, hop(&a))
	_, open := proxyServer(t, Options{Tools: ToolsOptions{CORSProxyAllowPrivate: true}})
	for _, tc := range []struct {
		redirects int
		status    int
		hops      int32
	}{{5, 200, 6}, {6, 500, 6}} {
		hops.Store(0)
		resp, data := webRequest(t, "GET", proxyURL(open, fmt.Sprintf("%s/?left=%d", a.URL, tc.redirects)), "", nil)
		assert.Equal(t, tc.status, resp.StatusCode, "%d redirects: %s", tc.redirects, data)
		assert.Equal(t, tc.hops, hops.Load(), "%d redirects", tc.redirects)
		if tc.status == 500 {
			assert.Contains(t, string(data), "stopped after 5 redirects")
		}
	}
}

// TestWebCORSProxyResponse performs the "target's page runs as the
// server's page" attack: the proxied HTML comes back sandboxed, as an
// attachment, not sniffable, without the target's cookies, site-data
// wipes or CSP; a body over 32 MiB is not relayed whole.
func TestWebCORSProxyResponse(t *testing.T) {
	target, _ := countingTarget(t, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.URL.Path {
		case "/page":
			h.Set("Content-Type", "text/html")
			h.Set("Set-Cookie", "session=stolen; Path=/")
			h.Set("Clear-Site-Data", `"storage"`)
			h.Set("Content-Security-Policy", "script-src *")
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Mcp-Session-Id", "abc")
			_, _ = io.WriteString(w, `<script>fetch("/tools")</script>`)
		case "/big":
			h.Set("Content-Length", fmt.Sprint(corsproxy.MaxBody+1))
			w.WriteHeader(200)
		case "/stream":
			chunk := strings.Repeat("x", 1<<20)
			for range 40 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		}
	})
	_, ts := proxyServer(t, Options{Tools: ToolsOptions{CORSProxyAllowPrivate: true}})

	resp, data := webRequest(t, "GET", proxyURL(ts, target.URL+"/page"), "", nil)
	require.Equal(t, 200, resp.StatusCode, "%s", data)
	assert.Equal(t, "sandbox", resp.Header.Get("Content-Security-Policy"))
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, "attachment", resp.Header.Get("Content-Disposition"))
	assert.Empty(t, resp.Header.Values("Set-Cookie"))
	assert.Empty(t, resp.Header.Values("Clear-Site-Data"))
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "abc", resp.Header.Get("Mcp-Session-Id"), "MCP's own headers pass")

	resp, data = webRequest(t, "GET", proxyURL(ts, target.URL+"/big"), "", nil)
	assert.Equal(t, 502, resp.StatusCode, "%s", data)
	assert.Contains(t, errOf(t, data)["message"], "larger than the proxy's limit")

	resp2, err := http.Get(proxyURL(ts, target.URL+"/stream"))
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp2.Body)
	resp2.Body.Close()
	assert.Error(t, err, "a body over the limit ends in an error, not a shorter body")
	assert.LessOrEqual(t, n, int64(corsproxy.MaxBody))
}

// TestWebCORSProxyCallers performs the cross-site use of the proxy: with
// only --ui-mcp-proxy (CORS "*" with credentials) a page of another site
// made the server fetch for it and read the answer. Only the server's own
// page, exactly listed origins and clients without Origin are served; a
// POST must be JSON, as the web UI's MCP client sends it.
func TestWebCORSProxyCallers(t *testing.T) {
	var gotType atomic.Value
	target, hits := countingTarget(t, func(w http.ResponseWriter, r *http.Request) {
		gotType.Store(r.Header.Get("Content-Type"))
		_, _ = io.WriteString(w, "private data")
	})
	_, ts := proxyServer(t, Options{CORSOrigins: []string{"*"}, Tools: ToolsOptions{CORSProxyAllowPrivate: true}})
	_, listed := proxyServer(t, Options{CORSOrigins: []string{"https://app.example", "localhost"}, Tools: ToolsOptions{CORSProxyAllowPrivate: true}})
	for _, tc := range []struct {
		name, method, body string
		ts                 *httptest.Server
		hdr                map[string]string
		status             int
	}{
		{"cross-site fetch with credentials", "GET", "", ts, map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, 403},
		{"cross-site navigation (a link)", "GET", "", ts, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, 403},
		{"cross-site POST", "POST", "{}", ts, map[string]string{"Content-Type": "application/json", "Origin": "https://attacker.example"}, 403},
		{"localhost keyword does not count", "GET", "", listed, map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, 403},
		{"text/plain POST", "POST", "{}", ts, map[string]string{"Content-Type": "text/plain"}, 415},
		{"exactly listed origin", "GET", "", listed, map[string]string{"Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}, 200},
		{"curl", "GET", "", ts, nil, 200},
		{"typed in the address bar", "GET", "", ts, map[string]string{"Sec-Fetch-Site": "none"}, 200},
		// llama.cpp's web UI: same-origin, every target header prefixed,
		// so the body goes as text/plain with the JSON type forwarded.
		{"web UI MCP POST", "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, ts, map[string]string{
			"Origin": ts.URL, "Sec-Fetch-Site": "same-origin", "Content-Type": "text/plain;charset=UTF-8",
			"X-Llama-Server-Proxy-Header-Content-Type": "application/json", "X-Llama-Server-Proxy-Header-Accept": "application/json, text/event-stream",
		}, 200},
		{"same-origin JSON POST", "POST", "{}", ts, map[string]string{"Origin": ts.URL, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			resp, data := webRequest(t, tc.method, proxyURL(tc.ts, target.URL+"/"), tc.body, tc.hdr)
			assert.Equal(t, tc.status, resp.StatusCode, "%s", data)
			if tc.status != 200 {
				assert.Equal(t, before, hits.Load(), "the target was reached")
				assert.NotContains(t, string(data), "private data")
				assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "no reflected origin")
				return
			}
			assert.Equal(t, "private data", string(data))
			if tc.name == "web UI MCP POST" {
				assert.Equal(t, "application/json", gotType.Load())
			}
		})
	}
}

// TestWebUIFlow checks the server's own web page's calls as a browser
// sends them (same-origin, JSON) on a server with tools and the proxy.
func TestWebUIFlow(t *testing.T) {
	_, ts := proxyServer(t, Options{Tools: ToolsOptions{Enabled: []string{"get_info"}}, CORSOrigins: []string{"localhost"}})
	same := map[string]string{"Origin": ts.URL, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Content-Type": "application/json"}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/", ""},
		{"GET", "/props", ""},
		{"GET", "/v1/models", ""},
		{"GET", "/tools", ""},
		{"POST", "/tools", `{"tool":"get_info","params":{}}`},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"stream":true}`},
	} {
		resp, data := webRequest(t, tc.method, ts.URL+tc.path, tc.body, same)
		assert.Equal(t, 200, resp.StatusCode, "%s %s: %s", tc.method, tc.path, data)
	}
}
