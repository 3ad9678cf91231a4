//go:build linux

package server

// Issue 22's findings against the agent tools, each performed through the
// HTTP handler: devices and FIFOs (M2), a glob of millions of stars (M3),
// escapes from the tools root, client headers, inherited secrets and
// setsid'd children (M4), and the unbounded answers and MCP queue (low).
// Linux only: /proc, /dev, FIFOs and setsid are what the attacks use.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/server/internal/tools"
)

// toolHangBound is how long callToolNoHang waits before it calls an
// answer hung. It guards against a tool that blocks for good (a FIFO, a
// child that holds the pipe for minutes), never measures speed, so it is
// far above any answer's time on a loaded machine.
const toolHangBound = time.Minute

// callToolNoHang is callTool, failing the test when no answer comes
// within toolHangBound.
func callToolNoHang(t *testing.T, url, tool string, params map[string]any, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	start := time.Now()
	code, out := callTool(t, url, tool, params, hdr)
	require.Less(t, time.Since(start), toolHangBound, "%s hung", tool)
	return code, out
}

// fdsOpenOn counts this process's descriptors open on path.
func fdsOpenOn(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			n++
		}
	}
	return n
}

// M2: read_file (and the other file tools) on a device or a FIFO. Before,
// /dev/zero was read until memory ran out and each FIFO read left a
// thread blocked for good. Root "/" is the widest root a server may
// choose: devices are refused even then.
func TestSecurityToolsDeviceAndFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("fine\n"), 0o644))
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}, Root: "/"}})
	base64 := map[string]string{"X-Resp-Type": "base64"}
	for _, tc := range []struct {
		name   string
		tool   string
		params map[string]any
		hdr    map[string]string
		want   string
	}{
		{"read /dev/zero", "read_file", map[string]any{"path": "/dev/zero"}, nil, "not a regular file: /dev/zero"},
		{"read /dev/zero with end_line", "read_file", map[string]any{"path": "/dev/zero", "end_line": 1 << 30}, nil, "not a regular file"},
		{"read /dev/urandom as base64", "read_file", map[string]any{"path": "/dev/urandom"}, base64, "not a regular file"},
		{"read a FIFO", "read_file", map[string]any{"path": fifo}, nil, "not a regular file"},
		{"read a FIFO with end_line", "read_file", map[string]any{"path": fifo, "end_line": 3}, nil, "not a regular file"},
		{"write a FIFO", "write_file", map[string]any{"path": fifo, "content": "x"}, nil, "not a regular file"},
		{"edit a FIFO", "edit_file", map[string]any{"path": fifo, "edits": []any{map[string]any{"old_text": "a", "new_text": "b"}}}, nil, "not a regular file"},
		{"write /dev/null", "write_file", map[string]any{"path": "/dev/null", "content": "x"}, nil, "not a regular file"},
		{"grep a FIFO", "grep_search", map[string]any{"path": fifo, "pattern": "x"}, nil, "path does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := callToolNoHang(t, ts.URL, tc.tool, tc.params, tc.hdr)
			require.Equal(t, 200, code, "%v", out)
			assert.Contains(t, out["error"], tc.want)
			assert.NotContains(t, out, "base64")
			assert.NotContains(t, out, "plain_text_response")
		})
	}
	t.Run("grep a folder holding a FIFO", func(t *testing.T) {
		code, out := callToolNoHang(t, ts.URL, "grep_search", map[string]any{"path": dir, "pattern": "fine"}, nil)
		require.Equal(t, 200, code, "%v", out)
		assert.Contains(t, out["plain_text_response"], "ok.txt:fine")
		assert.Contains(t, out["plain_text_response"], "Total matches: 1")
	})
	assert.Zero(t, fdsOpenOn(t, fifo), "a descriptor is left open on the FIFO")
}

// M3: a glob of 8M "**" used to overflow the goroutine stack of the
// recursive matcher and crash the process. Patterns over 4 KiB are now
// refused, and the matcher has no recursion at all.
func TestSecurityToolsGlobStarFlood(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "b.go"), []byte("package b\n"), 0o644))
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"file_glob_search", "grep_search"}, Root: dir}})
	flood := strings.Repeat("**", 1<<20) // 512 times the cap
	for _, tc := range []struct {
		name   string
		tool   string
		params map[string]any
		want   string // error, or else text in the answer
		err    bool
	}{
		{"glob include", "file_glob_search", map[string]any{"path": ".", "include": flood}, "include pattern too long", true},
		{"glob exclude", "file_glob_search", map[string]any{"path": ".", "exclude": flood}, "exclude pattern too long", true},
		{"grep include", "grep_search", map[string]any{"path": ".", "pattern": "package", "include": flood}, "include pattern too long", true},
		{"grep exclude", "grep_search", map[string]any{"path": ".", "pattern": "package", "exclude": "/" + flood}, "exclude pattern too long", true},
		{"4 KiB of **/", "file_glob_search", map[string]any{"path": ".", "include": strings.Repeat("**/", 1300) + "*.go"}, "Total matches: 2", false},
		{"4 KiB of *a", "file_glob_search", map[string]any{"path": ".", "include": strings.Repeat("*a", 2000) + "z"}, "Total matches: 0", false},
		{"4 KiB of [a-z]*", "grep_search", map[string]any{"path": ".", "pattern": "package", "include": strings.Repeat("[a-z]*", 680)}, "Total matches: 0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := callToolNoHang(t, ts.URL, tc.tool, tc.params, nil)
			require.Equal(t, 200, code, "%v", out)
			if tc.err {
				assert.Contains(t, out["error"], tc.want)
				return
			}
			assert.Contains(t, out["plain_text_response"], tc.want)
		})
	}
	// The matcher itself, past the cap, is tested in internal/tools
	// (TestGlobMatchFlood).
}

// M4: the file tools were not confined. /proc/self/environ (the server's
// API keys) was readable with the read-only set; absolute paths, ".."
// and symbolic links reached anything.
func TestSecurityToolsConfinement(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "in.txt"), []byte("inside\n"), 0o644))
	outside := filepath.Join(parent, "outside.txt")
	require.NoError(t, os.WriteFile(outside, []byte("PATH=outside secret\n"), 0o644))
	for link, target := range map[string]string{
		"abs-env": "/proc/self/environ",
		"rel-env": "../../../../../../../../proc/self/environ",
		"etc":     "/etc",
		"up":      "..",
		"sibling": "../outside.txt",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
	}
	_, ro := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"read_file", "file_glob_search", "grep_search"}, Root: dir}})
	_, rw := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}, Root: dir}})
	edit := []any{map[string]any{"old_text": "outside", "new_text": "pwned"}}
	for _, tc := range []struct {
		name   string
		url    string
		tool   string
		params map[string]any
		want   string
	}{
		{"absolute /proc/self/environ", ro.URL, "read_file", map[string]any{"path": "/proc/self/environ"}, "outside the tools root"},
		{"dot-dot to environ", ro.URL, "read_file", map[string]any{"path": "../../../../../../../../proc/self/environ"}, "outside the tools root"},
		{"dot-dot inside a path", ro.URL, "read_file", map[string]any{"path": "sub/../../outside.txt"}, "outside the tools root"},
		{"absolute sibling", ro.URL, "read_file", map[string]any{"path": outside}, "outside the tools root"},
		{"absolute link to environ", ro.URL, "read_file", map[string]any{"path": "abs-env"}, "cannot stat file"},
		{"relative link to environ", ro.URL, "read_file", map[string]any{"path": "rel-env"}, "cannot stat file"},
		{"link to a sibling", ro.URL, "read_file", map[string]any{"path": "sibling"}, "cannot stat file"},
		{"through a folder link", ro.URL, "read_file", map[string]any{"path": "etc/passwd"}, "cannot stat file"},
		{"through an up link", ro.URL, "read_file", map[string]any{"path": "up/outside.txt"}, "cannot stat file"},
		{"home", ro.URL, "read_file", map[string]any{"path": "~/.bashrc"}, "outside the tools root"},
		{"grep /proc/self", ro.URL, "grep_search", map[string]any{"path": "/proc/self", "pattern": "PATH"}, "outside the tools root"},
		{"grep the parent", ro.URL, "grep_search", map[string]any{"path": "..", "pattern": "secret"}, "outside the tools root"},
		{"grep an up link", ro.URL, "grep_search", map[string]any{"path": "up", "pattern": "secret"}, "path does not exist"},
		{"glob /", ro.URL, "file_glob_search", map[string]any{"path": "/"}, "outside the tools root"},
		{"glob an up link", ro.URL, "file_glob_search", map[string]any{"path": "up"}, "path does not exist or is not a directory"},
		{"write the parent", rw.URL, "write_file", map[string]any{"path": "../escaped.txt", "content": "x"}, "outside the tools root"},
		{"write through an up link", rw.URL, "write_file", map[string]any{"path": "up/escaped.txt", "content": "x"}, "failed to write file"},
		{"write through a link", rw.URL, "write_file", map[string]any{"path": "sibling", "content": "x"}, "failed to write file"},
		{"write /tmp", rw.URL, "write_file", map[string]any{"path": filepath.Join(os.TempDir(), "escaped.txt"), "content": "x"}, "outside the tools root"},
		{"edit a sibling", rw.URL, "edit_file", map[string]any{"path": outside, "edits": edit}, "outside the tools root"},
		{"edit through a link", rw.URL, "edit_file", map[string]any{"path": "sibling", "edits": edit}, "failed to open file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := callTool(t, tc.url, tc.tool, tc.params, nil)
			require.Equal(t, 200, code, "%v", out)
			assert.Contains(t, out["error"], tc.want)
			assert.NotContains(t, fmt.Sprint(out), "PATH=")
		})
	}
	t.Run("walks skip what leads out", func(t *testing.T) {
		_, out := callTool(t, ro.URL, "grep_search", map[string]any{"path": ".", "pattern": "PATH=|root:|secret"}, nil)
		assert.Contains(t, out["plain_text_response"], "Total matches: 0")
		_, out = callTool(t, ro.URL, "file_glob_search", map[string]any{"path": ".", "type": "all"}, nil)
		text := out["plain_text_response"].(string)
		assert.Contains(t, text, "sub/in.txt")
		assert.NotContains(t, text, "passwd")
		assert.NotContains(t, text, "outside")
	})
	t.Run("inside, absolute or relative", func(t *testing.T) {
		for _, p := range []string{filepath.Join(dir, "sub", "in.txt"), "sub/in.txt", "./sub/../sub/in.txt"} {
			_, out := callTool(t, ro.URL, "read_file", map[string]any{"path": p}, nil)
			assert.Equal(t, "inside\n", out["plain_text_response"], p)
		}
	})
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, "PATH=outside secret\n", string(b))
	assert.NoFileExists(t, filepath.Join(parent, "escaped.txt"))
	assert.NoFileExists(t, filepath.Join(os.TempDir(), "escaped.txt"))

	// The root is the server's choice: "/" opens everything again, keys
	// included, which is why it is not the default. Only the process's
	// being undumpable (issue 36 item 6) still keeps its own environ from
	// a server that is not root's; KeepDumpable, on a dumpable process,
	// gives that up too.
	t.Run("root / reaches environ", func(t *testing.T) {
		_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0)
		require.Zero(t, errno)
		_, all := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"read_file"}, Root: "/", KeepDumpable: true}})
		_, out := callTool(t, all.URL, "read_file", map[string]any{"path": "/proc/self/environ"}, map[string]string{"X-Resp-Type": "base64"})
		assert.Contains(t, out, "base64")
	})
	t.Run("root / on an undumpable server", func(t *testing.T) {
		_, all := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"read_file"}, Root: "/"}})
		_, out := callTool(t, all.URL, "read_file", map[string]any{"path": "/proc/self/environ"}, map[string]string{"X-Resp-Type": "base64"})
		if os.Geteuid() == 0 {
			assert.Contains(t, out, "base64", "root reads any process's environ")
		} else {
			assert.NotContains(t, out, "base64")
		}
	})
}

// M4: any client's x-tool-runtime header overrode --tools-runtime (any
// container, any ssh host), and x-tool-cwd moved the tools anywhere.
// Both are refused unless the server allows them; an allowed cwd stays
// inside the root.
func TestSecurityToolsClientHeaders(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "x.txt"), []byte("in sub\n"), 0o644))
	marker := filepath.Join(dir, "pwned")
	_, closed := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}, Root: dir}})
	_, open := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}, Root: dir, AllowClientCwd: true}})
	touch := map[string]any{"command": "touch " + marker}
	for _, tc := range []struct {
		name   string
		url    string
		tool   string
		params map[string]any
		hdr    map[string]string
		status int
		want   string
	}{
		{"runtime: a container", closed.URL, "exec_shell_command", touch, map[string]string{"X-Tool-Runtime": "docker-container:victim"}, 403, "x-tool-runtime is not allowed"},
		{"runtime: an ssh host", closed.URL, "read_file", map[string]any{"path": "x"}, map[string]string{"X-Tool-Runtime": "ssh:admin@prod"}, 403, "x-tool-runtime is not allowed"},
		{"runtime refused even with cwd allowed", open.URL, "exec_shell_command", touch, map[string]string{"X-Tool-Runtime": "podman-container:victim"}, 403, "x-tool-runtime is not allowed"},
		{"cwd refused", closed.URL, "exec_shell_command", touch, map[string]string{"X-Tool-Cwd": "/"}, 403, "x-tool-cwd is not allowed"},
		{"cwd refused for files", closed.URL, "read_file", map[string]any{"path": "passwd"}, map[string]string{"X-Tool-Cwd": "/etc"}, 403, "x-tool-cwd is not allowed"},
		{"allowed cwd outside the root", open.URL, "read_file", map[string]any{"path": "passwd"}, map[string]string{"X-Tool-Cwd": "/etc"}, 403, "outside the tools root"},
		{"allowed cwd climbing out", open.URL, "exec_shell_command", touch, map[string]string{"X-Tool-Cwd": "sub/../.."}, 403, "outside the tools root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "POST", tc.url+"/tools", map[string]any{"tool": tc.tool, "params": tc.params}, tc.hdr)
			assert.Equal(t, tc.status, code, "%s", data)
			var e errorDetail
			require.NoError(t, json.Unmarshal(data, &e), "%s", data)
			assert.Equal(t, errPermission, e.Type)
			assert.Contains(t, e.Message, tc.want)
		})
	}
	assert.NoFileExists(t, marker)
	t.Run("allowed cwd inside the root", func(t *testing.T) {
		hdr := map[string]string{"X-Tool-Cwd": filepath.Join(dir, "sub")}
		_, out := callTool(t, open.URL, "read_file", map[string]any{"path": "x.txt"}, hdr)
		assert.Equal(t, "in sub\n", out["plain_text_response"])
		_, out = callTool(t, open.URL, "read_file", map[string]any{"path": "../../x.txt"}, hdr)
		assert.Contains(t, out["error"], "outside the tools root")
		_, out = callTool(t, open.URL, "exec_shell_command", map[string]any{"command": "pwd"}, map[string]string{"X-Tool-Cwd": "sub"})
		assert.Equal(t, filepath.Join(dir, "sub")+"\n\n[exit code: 0]", out["plain_text_response"])
	})
}

// M4: exec_shell_command and MCP servers inherited the whole environment:
// LLAMA_API_KEY, HF_TOKEN, LLAMA_ARG_* and the like.
func TestSecurityToolsEnvScrub(t *testing.T) {
	secrets := map[string]string{
		"LLAMA_API_KEY":     "SECRET_MARK_1",
		"HF_TOKEN":          "SECRET_MARK_2",
		"LLAMA_ARG_API_KEY": "SECRET_MARK_3",
		"LLAMA_ARG_HF_REPO": "SECRET_MARK_4",
		"OPENAI_API_KEY":    "SECRET_MARK_5",
		"GITHUB_TOKEN":      "SECRET_MARK_6",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("GO_LLAMA_TEST_VISIBLE", "visible-value")
	exe, err := os.Executable()
	require.NoError(t, err)
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"env": map[string]any{
		"command": exe, "args": []string{"-test.run=^$"},
		"env": fixtureEnvWith("normal", "SERVICE_TOKEN", "given"),
	}}})
	require.NoError(t, err)
	// GO_LLAMA_TEST_VISIBLE passes because Env names it: by default
	// nothing but the allow-list does (TestSecurityToolsEnvAllowList).
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"exec_shell_command"}, Root: t.TempDir(), MCPServersJSON: string(cfg),
		Env: []string{"GO_LLAMA_TEST_VISIBLE"}}})

	t.Run("exec_shell_command", func(t *testing.T) {
		_, out := callTool(t, ts.URL, "exec_shell_command", map[string]any{"command": "env | grep -E 'SECRET_MARK|visible-value'"}, nil)
		text := out["plain_text_response"].(string)
		assert.NotContains(t, text, "SECRET_MARK")
		assert.Contains(t, text, "GO_LLAMA_TEST_VISIBLE=visible-value")
	})
	for _, tc := range []struct{ name, want string }{
		{"LLAMA_API_KEY", "false:"},
		{"HF_TOKEN", "false:"},
		{"LLAMA_ARG_API_KEY", "false:"},
		{"LLAMA_ARG_HF_REPO", "false:"},
		{"OPENAI_API_KEY", "false:"},
		{"GITHUB_TOKEN", "false:"},
		{"GO_LLAMA_TEST_VISIBLE", "true:visible-value"},
		{"SERVICE_TOKEN", "true:given"}, // given by the configuration
	} {
		t.Run("mcp "+tc.name, func(t *testing.T) {
			_, out := callTool(t, ts.URL, "env_getenv", map[string]any{"name": tc.name}, nil)
			assert.Equal(t, tc.want, out["plain_text_response"])
		})
	}
}

// procAlive reports whether pid runs (a zombie does not).
func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...; comm may hold spaces and ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// M4: a command's children that called setsid left its process group and
// outlived the timeout. They are found by the run tag in their
// environment (and their parentage) and killed with the rest.
func TestSecurityToolsSetsidKilled(t *testing.T) {
	dir := t.TempDir()
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"exec_shell_command"}, Root: dir}})
	for _, tc := range []struct{ name, command string }{
		{"setsid child", `setsid sh -c 'echo $$ > pid; exec sleep 300' & sleep 30`},
		{"setsid grandchild, parent gone", `(setsid sh -c 'sh -c "echo \$\$ > pid; exec sleep 300" &' &) ; sleep 30`},
		{"own process group", `sh -c 'set -m; sh -c "echo \$\$ > pid; exec sleep 300" & wait' & sleep 30`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(dir, "pid")
			_ = os.Remove(pidFile)
			code, out := callToolNoHang(t, ts.URL, "exec_shell_command", map[string]any{"command": tc.command, "timeout": 1}, nil)
			require.Equal(t, 200, code, "%v", out)
			assert.Contains(t, out["plain_text_response"], "[exit due to timed out]")
			b, err := os.ReadFile(pidFile)
			require.NoError(t, err)
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			assert.Eventually(t, func() bool { return !procAlive(pid) }, 30*time.Second, 20*time.Millisecond, "pid %d outlived the timeout", pid)
		})
	}
}

// Low: grep_search's context_lines had no bound (a 389 KB file gave a
// 94 MB answer) and read_file with end_line read a file of any size.
func TestSecurityToolsBounds(t *testing.T) {
	dir := t.TempDir()
	var big strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&big, "match %05d %s\n", i, strings.Repeat("x", 85))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big.String()), 0o644))
	var ctxFile strings.Builder
	for i := range 200 {
		if i == 100 {
			ctxFile.WriteString("NEEDLE\n")
			continue
		}
		fmt.Fprintf(&ctxFile, "line %d\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ctx.txt"), []byte(ctxFile.String()), 0o644))
	// A sparse file of 1 GiB whose first lines are text.
	f, err := os.Create(filepath.Join(dir, "huge.log"))
	require.NoError(t, err)
	_, err = f.WriteString("line1\nline2\nline3\n")
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30))
	require.NoError(t, f.Close())
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}, Root: dir}})

	t.Run("context_lines on a 389 KB file", func(t *testing.T) {
		_, out := callToolNoHang(t, ts.URL, "grep_search", map[string]any{"path": "big.txt", "pattern": "match", "context_lines": 1 << 30}, nil)
		text := out["plain_text_response"].(string)
		assert.LessOrEqual(t, len(text), 256<<10+1024) // grep_search's output cap
		assert.Contains(t, text, "output limit of 262144 bytes reached")
	})
	t.Run("context_lines capped at 50", func(t *testing.T) {
		_, out := callTool(t, ts.URL, "grep_search", map[string]any{"path": "ctx.txt", "pattern": "NEEDLE", "context_lines": 1000}, nil)
		text := out["plain_text_response"].(string)
		assert.Equal(t, 2*50, strings.Count(text, "ctx.txt-")) // context_lines is capped at 50
		assert.Contains(t, text, "ctx.txt:101:NEEDLE")
	})
	for _, tc := range []struct {
		name   string
		tool   string
		params map[string]any
		key    string
		want   string
	}{
		{"end_line on 1 GiB", "read_file", map[string]any{"path": "huge.log", "end_line": 2}, "plain_text_response", "line1\nline2\n"},
		{"end_line past the scan", "read_file", map[string]any{"path": "huge.log", "start_line": 2, "end_line": 1 << 30}, "plain_text_response", "line2\nline3\n[read stopped after the first 8388608 bytes of the file]"},
		{"no end_line", "read_file", map[string]any{"path": "huge.log"}, "error", "file too large (1073741824 bytes, max 16384). Use start_line/end_line to read a portion."},
		{"edit 1 GiB", "edit_file", map[string]any{"path": "huge.log", "edits": []any{map[string]any{"old_text": "line1", "new_text": "x"}}}, "error", "file too large to edit (more than 8388608 bytes): huge.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out := callToolNoHang(t, ts.URL, tc.tool, tc.params, nil)
			assert.Equal(t, tc.want, out[tc.key])
		})
	}
	t.Run("grep skips 1 GiB", func(t *testing.T) {
		_, out := callToolNoHang(t, ts.URL, "grep_search", map[string]any{"path": ".", "pattern": "line1"}, nil)
		text := out["plain_text_response"].(string)
		assert.Contains(t, text, "Total matches: 0")
		assert.Contains(t, text, "[1 files larger than 8388608 bytes not searched]")
	})
}

// Low: an MCP server's unread messages were queued up to 4,096 lines of
// 8 MiB each, and a call waiting for another's lock could not be
// cancelled.
func TestSecurityToolsMCPQueueAndLock(t *testing.T) {
	s, ts := newTestServer(t, Options{Tools: ToolsOptions{MCPServersJSON: mcpConfig(t, map[string]string{"fl": "normal"}, 0)}})
	stats := func() tools.MCPStats { return s.tools.MCPStats("fl") }
	t.Run("queue bounded in bytes", func(t *testing.T) {
		_, out := callTool(t, ts.URL, "fl_flood", map[string]any{"count": 48, "size": 1 << 20}, nil)
		require.Equal(t, "flooding", out["plain_text_response"])
		require.Eventually(t, func() bool { return stats().QueuedBytes >= tools.MCPQueueBytes-(2<<20) }, time.Minute, 10*time.Millisecond)
		time.Sleep(300 * time.Millisecond) // the subject: the bound holds while the rest of the flood is read and dropped (nothing to wait for)
		assert.LessOrEqual(t, stats().QueuedBytes, int64(tools.MCPQueueBytes))
		assert.LessOrEqual(t, stats().QueuedMsgs, tools.MCPQueueBytes>>20)
		_, out = callTool(t, ts.URL, "fl_echo", map[string]any{"message": "after"}, nil)
		assert.Equal(t, "echo: after", out["plain_text_response"])
		assert.Zero(t, stats().QueuedBytes)
	})
	t.Run("queue bounded in count", func(t *testing.T) {
		_, out := callTool(t, ts.URL, "fl_flood", map[string]any{"count": 5000, "size": 8}, nil)
		require.Equal(t, "flooding", out["plain_text_response"])
		// A hang guard, not a timing: a loaded machine reads the flood slowly.
		require.Eventually(t, func() bool { return stats().QueuedMsgs == tools.MCPQueue }, time.Minute, 10*time.Millisecond)
		time.Sleep(300 * time.Millisecond) // the subject: the count stays bounded as more of the flood arrives
		assert.Equal(t, tools.MCPQueue, stats().QueuedMsgs)
		_, out = callTool(t, ts.URL, "fl_echo", map[string]any{"message": "after"}, nil)
		assert.Equal(t, "echo: after", out["plain_text_response"])
	})
	t.Run("a call waiting for the lock gives way to its client", func(t *testing.T) {
		held := make(chan map[string]any, 1)
		go func() {
			_, out := callTool(t, ts.URL, "fl_sleep", map[string]any{"seconds": 3}, nil)
			held <- out
		}()
		require.Eventually(t, func() bool { return stats().CallsHeld == 1 }, 5*time.Second, 5*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest("POST", "/tools", strings.NewReader(`{"tool":"fl_echo","params":{"message":"waiting"}}`)).WithContext(ctx)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		start := time.Now()
		s.Handler().ServeHTTP(rec, req)
		assert.Less(t, time.Since(start), time.Second, "the waiting call held on to the lock queue")
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Contains(t, rec.Body.String(), `"error":"cancelled"`)
		assert.Equal(t, map[string]any{"plain_text_response": "slept"}, <-held)
	})
}
