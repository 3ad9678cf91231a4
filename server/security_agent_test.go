//go:build linux

package server

// Issue 36's findings against the agent tools and the proxy, items 1, 6
// and 9, each performed as an attacker would through the HTTP API.
// Linux only: /proc, prctl and git's fsmonitor are what they use.

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/server/internal/corsproxy"
)

// Item 1: git's fsmonitor turned the file tools into command execution.
// grep_search and file_glob_search ran "git ls-files", which runs the
// command .git/config names as core.fsmonitor, and write_file and
// edit_file could write that config. llama-server v0.4.0 does both too.
func TestSecurityAgentGitFsmonitor(t *testing.T) {
	_, err := exec.LookPath("git")
	require.NoError(t, err, "the attack needs git, as the tools do")
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	hook := filepath.Join(t.TempDir(), "hook.sh")
	require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	out, err := exec.Command("git", "init", "-q", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("needle\n"), 0o644))
	require.NoError(t, os.Symlink(".git", filepath.Join(dir, "g")))
	require.NoError(t, os.Symlink("sub/../.GIT", filepath.Join(dir, "g2")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	config := "[core]\n\tfsmonitor = " + hook + "\n"
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"read_file", "write_file", "edit_file", "grep_search", "file_glob_search"}, Root: dir}})

	// The writes that planted the command, in every spelling.
	edit := []any{map[string]any{"old_text": "[core]", "new_text": "[core]\n\tfsmonitor = " + hook}}
	for _, tc := range []struct {
		name   string
		tool   string
		params map[string]any
	}{
		{"write .git/config", "write_file", map[string]any{"path": ".git/config", "content": config}},
		{"write a hook", "write_file", map[string]any{"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}},
		{"write .GIT in another case", "write_file", map[string]any{"path": ".GIT/config", "content": config}},
		{"write a nested .git", "write_file", map[string]any{"path": "vendor/x/.git/config", "content": config}},
		{"write through a link to .git", "write_file", map[string]any{"path": "g/config", "content": config}},
		{"write through a link with ..", "write_file", map[string]any{"path": "g2/config", "content": config}},
		{"write with .. into .git", "write_file", map[string]any{"path": "sub/../.git/config", "content": config}},
		{"edit .git/config", "edit_file", map[string]any{"path": ".git/config", "edits": edit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := callTool(t, ts.URL, tc.tool, tc.params, nil)
			require.Equal(t, 200, code, "%v", out)
			assert.Contains(t, out["error"], "inside a .git folder")
		})
	}
	b, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "fsmonitor")
	assert.NoFileExists(t, filepath.Join(dir, "vendor", "x", ".git", "config"))

	// A checkout that already names a command (a tarball with its .git,
	// or a write by other means): the listings must not run it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "config"), []byte(config), 0o644))
	for _, tc := range []struct {
		name   string
		tool   string
		params map[string]any
		want   string
	}{
		{"grep_search", "grep_search", map[string]any{"path": ".", "pattern": "needle"}, "a.txt:needle"},
		{"file_glob_search", "file_glob_search", map[string]any{"path": ".", "include": "*.txt"}, "a.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := callTool(t, ts.URL, tc.tool, tc.params, nil)
			require.Equal(t, 200, code, "%v", out)
			assert.Contains(t, out["plain_text_response"], tc.want)
			assert.NoFileExists(t, marker, "git ran the repository's core.fsmonitor")
		})
	}
	// Writes elsewhere still work, names that only contain .git too.
	code, res := callTool(t, ts.URL, "write_file", map[string]any{"path": "docs/.github/x.git.txt", "content": "ok"}, nil)
	require.Equal(t, 200, code)
	assert.Equal(t, "file written successfully", res["result"], "%v", res)
}

// dumpable reads the process's PR_GET_DUMPABLE.
func dumpable(t *testing.T) int {
	r, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	require.Zero(t, errno)
	return int(r)
}

// Item 6: secrets reached the tools. The shell tool read the server's
// environment from /proc/$PPID/environ, and the name filter let
// AWS_SECRET_ACCESS_KEY, DATABASE_URL, PGPASSWORD, GH_PAT and
// SSH_AUTH_SOCK through, to commands and MCP servers. llama-server
// v0.4.0 gives them its whole environment.
func TestSecurityAgentSecrets(t *testing.T) {
	secrets := map[string]string{
		"AWS_SECRET_ACCESS_KEY": "SECRET_MARK_A",
		"DATABASE_URL":          "postgres://u:SECRET_MARK_B@db/x",
		"PGPASSWORD":            "SECRET_MARK_C",
		"GH_PAT":                "SECRET_MARK_D",
		"SSH_AUTH_SOCK":         "/tmp/SECRET_MARK_E.sock",
		"LLAMA_API_KEY":         "SECRET_MARK_F",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"env": map[string]any{
		"command": exe, "args": []string{"-test.run=^$"}, "env": fixtureEnv("normal"),
	}}})
	require.NoError(t, err)
	// The server's process is made undumpable while it runs tools; set it
	// back first, as an earlier test may have made it so.
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0)
	require.Zero(t, errno)
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"exec_shell_command"}, Root: t.TempDir(), MCPServersJSON: string(cfg)}})

	t.Run("environment of a command", func(t *testing.T) {
		_, out := callTool(t, ts.URL, "exec_shell_command", map[string]any{"command": "env"}, nil)
		text := out["plain_text_response"].(string)
		assert.NotContains(t, text, "SECRET_MARK")
		assert.Contains(t, text, "PATH=", "the allow-list keeps what a shell needs")
	})
	for name := range secrets {
		t.Run("environment of an MCP server "+name, func(t *testing.T) {
			_, out := callTool(t, ts.URL, "env_getenv", map[string]any{"name": name}, nil)
			assert.Equal(t, "false:", out["plain_text_response"])
		})
	}
	t.Run("the server's /proc/PID/environ", func(t *testing.T) {
		// Undumpable: the kernel gives the server's /proc files to root
		// and asks for ptrace access, which a same-user command lacks.
		// (Root has it whatever the setting: read as root, the file stays
		// readable, so the read is asserted for other users only.)
		assert.Equal(t, 0, dumpable(t), "the server's process is still dumpable")
		_, out := callTool(t, ts.URL, "exec_shell_command", map[string]any{"command": "cat /proc/$PPID/environ /proc/" + strconv.Itoa(os.Getpid()) + "/environ"}, nil)
		if os.Geteuid() != 0 {
			assert.NotContains(t, out["plain_text_response"], "SECRET_MARK")
			assert.Contains(t, out["plain_text_response"], "Permission denied")
		}
	})
	t.Run("a name given with Env passes", func(t *testing.T) {
		_, named := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"exec_shell_command"}, Root: t.TempDir(), Env: []string{"PGPASSWORD"}}})
		_, out := callTool(t, named.URL, "exec_shell_command", map[string]any{"command": "env"}, nil)
		text := out["plain_text_response"].(string)
		assert.Contains(t, text, "PGPASSWORD=SECRET_MARK_C")
		assert.NotContains(t, text, "SECRET_MARK_A")
	})
	t.Run("Env * passes all but secret-looking names", func(t *testing.T) {
		t.Setenv("GO_LLAMA_TEST_PLAIN", "plain-value")
		_, all := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"exec_shell_command"}, Root: t.TempDir(), Env: []string{"*"}}})
		_, out := callTool(t, all.URL, "exec_shell_command", map[string]any{"command": "env"}, nil)
		text := out["plain_text_response"].(string)
		assert.Contains(t, text, "GO_LLAMA_TEST_PLAIN=plain-value")
		assert.NotContains(t, text, "SECRET_MARK")
	})
}

// Item 9: gaps in the proxy. It reached the host's own non-private
// addresses (a service bound to 0.0.0.0), did not refuse the
// documentation ranges or ::/96, and passed the target's Content-Type
// through, so that <script src="/cors-proxy?url=..."> was a script of
// the server's origin. llama-server v0.4.0's proxy refuses no address and
// passes every header.
func TestSecurityAgentProxy(t *testing.T) {
	t.Run("documentation ranges and ::/96", func(t *testing.T) {
		for addr, want := range map[string]string{
			"192.0.2.1": "documentation", "198.51.100.7": "documentation", "203.0.113.9": "documentation",
			"2001:db8::1": "documentation", "3fff::1": "documentation",
			"::7f00:1": "IPv4-compatible", "::a9fe:a9fe": "IPv4-compatible", "::808:808": "IPv4-compatible",
			"100::1": "reserved", "2001::1": "reserved",
		} {
			assert.Equal(t, want, corsproxy.AddrRefused(netip.MustParseAddr(addr)), addr)
		}
	})

	t.Run("this machine's own addresses", func(t *testing.T) {
		// A service bound to every interface, reached through an address
		// of this machine. The address rule is told that every address is
		// public, as this machine's would be on a server with one: only
		// the interface check stands.
		ln, err := net.Listen("tcp", "0.0.0.0:0")
		require.NoError(t, err)
		target := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"internal":"SECRET_MARK"}`))
		})}
		go func() { _ = target.Serve(ln) }()
		t.Cleanup(func() { _ = target.Close() })
		port := ln.Addr().(*net.TCPAddr).Port
		s, ts := proxyServer(t, Options{})
		s.proxy.Refused = func(netip.Addr) string { return "" }
		for _, host := range ownAddrs(t) {
			t.Run(host, func(t *testing.T) {
				u := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/"
				resp, data := webRequest(t, "GET", proxyURL(ts, u), "", nil)
				assert.Equal(t, 403, resp.StatusCode, "%s", data)
				assert.NotContains(t, string(data), "SECRET_MARK")
				assert.Contains(t, errOf(t, data)["message"], "an address of this machine")
			})
		}
	})

	t.Run("content types", func(t *testing.T) {
		target, _ := countingTarget(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", r.URL.Query().Get("ct"))
			_, _ = w.Write([]byte(`alert(document.domain)`))
		})
		_, ts := proxyServer(t, Options{Tools: ToolsOptions{CORSProxyAllowPrivate: true}})
		for ct, want := range map[string]string{
			"text/javascript":                   "application/octet-stream",
			"application/javascript":            "application/octet-stream",
			"text/css":                          "application/octet-stream",
			"text/html; charset=utf-8":          "application/octet-stream",
			"image/svg+xml":                     "application/octet-stream",
			"":                                  "application/octet-stream",
			"application/json":                  "application/json",
			"application/json; charset=utf-8":   "application/json; charset=utf-8",
			"application/problem+json":          "application/problem+json",
			"text/event-stream":                 "text/event-stream",
			"text/event-stream; charset=utf-8":  "text/event-stream; charset=utf-8",
			"application/x-javascript; x=+json": "application/octet-stream",
		} {
			t.Run(ct, func(t *testing.T) {
				resp, data := webRequest(t, "GET", proxyURL(ts, target.URL+"/?ct="+url.QueryEscape(ct)), "", nil)
				require.Equal(t, 200, resp.StatusCode, "%s", data)
				assert.Equal(t, want, resp.Header.Get("Content-Type"))
				assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			})
		}
	})
}

// ownAddrs lists addresses of this machine: 127.0.0.1, and its first
// non-loopback IPv4 address if it has one.
func ownAddrs(t *testing.T) []string {
	out := []string{"127.0.0.1"}
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return append(out, n.IP.String())
		}
	}
	return out
}
