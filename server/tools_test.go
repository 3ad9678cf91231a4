package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callTool posts a /tools call and decodes the JSON answer.
func callTool(t *testing.T, url string, tool string, params map[string]any, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	code, data := call(t, "POST", url+"/tools", map[string]any{"tool": tool, "params": params}, hdr)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "body: %s", data)
	return code, out
}

func TestToolsDisabled(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for _, tc := range []struct{ method, path string }{
		{"GET", "/tools"},
		{"POST", "/tools"},
		{"GET", "/cors-proxy?url=http://127.0.0.1:1/"},
		{"POST", "/cors-proxy?url=http://127.0.0.1:1/"},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			code, data := call(t, tc.method, ts.URL+tc.path, map[string]any{"tool": "read_file", "params": map[string]any{"path": "/etc/passwd"}}, nil)
			assert.Equal(t, 403, code)
			e := errOf(t, data)
			assert.Equal(t, "feature_disabled", e["type"])
			assert.Equal(t, "this feature is disabled", e["message"])
		})
	}
}

func TestToolsList(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled []string
		want    []string
	}{
		{"all", []string{"all"}, []string{"read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file", "edit_file", "get_info"}},
		{"some", []string{"get_info", "read_file"}, []string{"read_file", "get_info"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: tc.enabled}})
			code, data := call(t, "GET", ts.URL+"/tools", nil, nil)
			require.Equal(t, 200, code, "%s", data)
			var tools []map[string]any
			require.NoError(t, json.Unmarshal(data, &tools))
			var names []string
			for _, tl := range tools {
				names = append(names, tl["tool"].(string))
				assert.Equal(t, "server", tl["type"])
				assert.Equal(t, true, tl["uses_cwd"])
				def := tl["definition"].(map[string]any)
				assert.Equal(t, "function", def["type"])
				assert.Equal(t, tl["tool"], def["function"].(map[string]any)["name"])
			}
			assert.Equal(t, tc.want, names)
		})
	}
	_, err := New(context.Background(), Options{Tools: ToolsOptions{Enabled: []string{"web_search"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown tool "web_search"`)
}

func TestToolsBuiltin(t *testing.T) {
	dir := t.TempDir()
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}, Root: dir, AllowClientCwd: true}})
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("notes.txt", "alpha\nbeta\ngamma\n")
	write("dup.txt", "dup\ndup\n")
	write("quotes.txt", "say \u201chello\u201d   \nend\n")
	write("src/main.go", "package main\n// MARKER here\n")
	write("src/deep/x.go", "package deep\n")
	write("build/junk.txt", "MARKER in junk\n")
	cwd := map[string]string{"X-Tool-Cwd": dir}

	for _, tc := range []struct {
		name   string
		tool   string
		params map[string]any
		hdr    map[string]string
		check  func(t *testing.T, out map[string]any)
	}{
		{"read_file", "read_file", map[string]any{"path": filepath.Join(dir, "notes.txt")}, nil, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "alpha\nbeta\ngamma\n", out["plain_text_response"])
		}},
		{"read_file range with numbers", "read_file", map[string]any{"path": "notes.txt", "start_line": 2, "end_line": 2, "append_loc": true}, cwd, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "2\u2192beta\n", out["plain_text_response"])
		}},
		{"read_file base64", "read_file", map[string]any{"path": "notes.txt"}, map[string]string{"X-Tool-Cwd": dir, "X-Resp-Type": "base64"}, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "YWxwaGEKYmV0YQpnYW1tYQo=", out["base64"])
			assert.EqualValues(t, 17, out["size_bytes"])
		}},
		{"read_file missing", "read_file", map[string]any{"path": "nope.txt"}, cwd, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "cannot stat file: nope.txt", out["error"])
		}},
		{"model cwd ignored", "read_file", map[string]any{"path": "notes.txt", "cwd": "/definitely/not/here"}, cwd, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["plain_text_response"], "beta")
		}},
		{"model runtime ignored", "read_file", map[string]any{"path": "notes.txt", "runtime": "fake:x"}, cwd, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["plain_text_response"], "beta")
		}},
		{"write_file relative", "write_file", map[string]any{"path": "sub/out.txt", "content": "written"}, cwd, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "file written successfully", out["result"])
			b, err := os.ReadFile(filepath.Join(dir, "sub", "out.txt"))
			require.NoError(t, err)
			assert.Equal(t, "written", string(b))
		}},
		{"edit_file not unique", "edit_file", map[string]any{"path": "dup.txt", "edits": []any{map[string]any{"old_text": "dup", "new_text": "x"}}}, cwd, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["error"], "it must be unique")
		}},
		{"edit_file overlap", "edit_file", map[string]any{"path": "notes.txt", "edits": []any{
			map[string]any{"old_text": "alpha\nbeta", "new_text": "a"}, map[string]any{"old_text": "beta", "new_text": "b"}}}, cwd, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["error"], "overlap")
		}},
		{"edit_file not found", "edit_file", map[string]any{"path": "notes.txt", "edits": []any{map[string]any{"old_text": "delta", "new_text": "x"}}}, cwd, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["error"], "could not find edits[0].old_text")
		}},
		{"edit_file fuzzy keeps other lines", "edit_file", map[string]any{"path": "quotes.txt", "edits": []any{map[string]any{"old_text": `say "hello"`, "new_text": "say hi"}}}, cwd, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "file edited successfully", out["result"])
			b, err := os.ReadFile(filepath.Join(dir, "quotes.txt"))
			require.NoError(t, err)
			assert.Equal(t, "say hi\nend\n", string(b))
		}},
		{"file_glob_search", "file_glob_search", map[string]any{"path": ".", "include": "*.go"}, cwd, func(t *testing.T, out map[string]any) {
			text := out["plain_text_response"].(string)
			assert.Contains(t, text, "src/main.go")
			assert.Contains(t, text, "src/deep/x.go")
			assert.Contains(t, text, "Total matches: 2")
			assert.Equal(t, dir, out["base"])
		}},
		{"file_glob_search dirs, junk listed not walked", "file_glob_search", map[string]any{"path": dir, "type": "all"}, nil, func(t *testing.T, out map[string]any) {
			types := map[string]string{}
			for _, e := range out["entries"].([]any) {
				m := e.(map[string]any)
				types[m["path"].(string)] = m["type"].(string)
			}
			assert.Equal(t, "dir", types["build"])
			assert.Equal(t, "dir", types["src/deep"])
			assert.Equal(t, "file", types["src/main.go"])
			assert.NotContains(t, types, "build/junk.txt")
		}},
		{"file_glob_search depth and limit", "file_glob_search", map[string]any{"path": dir, "max_depth": 1, "limit": 1}, nil, func(t *testing.T, out map[string]any) {
			assert.Len(t, out["entries"], 1)
			assert.Contains(t, out["plain_text_response"], "Total matches: 3") // dup, notes, quotes
		}},
		{"file_glob_search bad type", "file_glob_search", map[string]any{"path": dir, "type": "bogus"}, nil, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["error"], "invalid type: bogus")
		}},
		{"grep_search", "grep_search", map[string]any{"path": dir, "pattern": "marker", "ignore_case": true, "return_line_numbers": true}, nil, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "src/main.go:2:// MARKER here\n\n---\nTotal matches: 1\n", out["plain_text_response"])
		}},
		{"grep_search literal", "grep_search", map[string]any{"path": "notes.txt", "pattern": "a.", "literal": true}, cwd, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["plain_text_response"], "Total matches: 0")
		}},
		{"grep_search bad regex", "grep_search", map[string]any{"path": dir, "pattern": "("}, nil, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["error"], "invalid regex")
		}},
		{"exec_shell_command in cwd", "exec_shell_command", map[string]any{"command": "cat notes.txt; exit 3"}, cwd, func(t *testing.T, out map[string]any) {
			assert.Equal(t, "alpha\nbeta\ngamma\n\n[exit code: 3]", out["plain_text_response"])
		}},
		{"exec_shell_command timeout", "exec_shell_command", map[string]any{"command": "sleep 30", "timeout": 1}, nil, func(t *testing.T, out map[string]any) {
			assert.Contains(t, out["plain_text_response"], "[exit due to timed out]")
		}},
		{"exec_shell_command output cap", "exec_shell_command", map[string]any{"command": "yes | head -c 100000", "max_output_size": 10}, nil, func(t *testing.T, out map[string]any) {
			assert.True(t, strings.HasPrefix(out["plain_text_response"].(string), "y\ny\ny\ny\ny\n\n[output truncated]"), out["plain_text_response"])
		}},
		{"get_info", "get_info", map[string]any{}, cwd, func(t *testing.T, out map[string]any) {
			assert.Equal(t, dir, out["cwd"])
			assert.NotEqual(t, "unknown", out["os"])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := callTool(t, ts.URL, tc.tool, tc.params, tc.hdr)
			require.Equal(t, 200, code, "%v", out)
			tc.check(t, out)
		})
	}
}

func TestToolsRefused(t *testing.T) {
	dir := t.TempDir()
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"read_file", "exec_shell_command"}, Root: dir, AllowClientRuntime: true}})
	marker := filepath.Join(dir, "pwned")
	for _, tc := range []struct {
		name    string
		body    any
		hdr     map[string]string
		status  int
		errType string
		msg     string
	}{
		{"unknown runtime", map[string]any{"tool": "exec_shell_command", "params": map[string]any{"command": "touch " + marker}},
			map[string]string{"X-Tool-Runtime": "fake:does-not-exist"}, 500, "server_error", "unknown tool runtime: fake:does-not-exist"},
		{"ssh option injection", map[string]any{"tool": "exec_shell_command", "params": map[string]any{"command": "echo hi"}},
			map[string]string{"X-Tool-Runtime": "ssh:-oProxyCommand=touch " + marker}, 500, "server_error", "invalid ssh target"},
		{"ssh target with a space", map[string]any{"tool": "exec_shell_command", "params": map[string]any{"command": "echo hi"}},
			map[string]string{"X-Tool-Runtime": "ssh:host touch"}, 500, "server_error", "invalid ssh target"},
		{"docker option injection", map[string]any{"tool": "exec_shell_command", "params": map[string]any{"command": "echo hi"}},
			map[string]string{"X-Tool-Runtime": "docker-container:--privileged"}, 500, "server_error", "invalid container id: --privileged"},
		{"podman option injection", map[string]any{"tool": "read_file", "params": map[string]any{"path": "x"}},
			map[string]string{"X-Tool-Runtime": "podman-container:-it"}, 500, "server_error", "invalid container id"},
		{"container start from a header", map[string]any{"tool": "exec_shell_command", "params": map[string]any{"command": "echo hi"}},
			map[string]string{"X-Tool-Runtime": "docker:busybox"}, 500, "server_error", "must name a running container"},
		{"tool not enabled", map[string]any{"tool": "write_file", "params": map[string]any{"path": marker, "content": "x"}}, nil, 404, "invalid_request_error", `unknown tool "write_file"`},
		{"stream unsupported", map[string]any{"tool": "read_file", "params": map[string]any{"path": "x"}, "stream": true}, nil, 404, "invalid_request_error", "does not support stream"},
		{"missing parameter", map[string]any{"tool": "exec_shell_command", "params": map[string]any{}}, nil, 400, "invalid_request_error", `missing parameter "command"`},
		{"mistyped parameter", map[string]any{"tool": "read_file", "params": map[string]any{"path": 7}}, nil, 400, "invalid_request_error", `"path" must be a string`},
		{"missing tool", map[string]any{"params": map[string]any{}}, nil, 400, "invalid_request_error", `missing "tool"`},
		{"not JSON", "{", nil, 400, "invalid_request_error", "invalid JSON"},
		{"params not an object", map[string]any{"tool": "read_file", "params": []int{1}}, nil, 400, "invalid_request_error", "must be an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, "POST", ts.URL+"/tools", tc.body, tc.hdr)
			assert.Equal(t, tc.status, code, "%s", data)
			var e errorDetail
			require.NoError(t, json.Unmarshal(data, &e), "%s", data)
			assert.Equal(t, tc.errType, e.Type)
			assert.Contains(t, e.Message, tc.msg)
		})
	}
	assert.NoFileExists(t, marker)
}

func TestToolsStream(t *testing.T) {
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{Enabled: []string{"all"}, Root: t.TempDir(), AllowClientRuntime: true}})
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		chunks string
		err    string
	}{
		{"output then exit code", nil, "hello\n\n[exit code: 0]", ""},
		{"bad runtime ends with an error", map[string]string{"X-Tool-Runtime": "nope:x"}, "", "unknown tool runtime: nope:x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", ts.URL+"/tools", strings.NewReader(`{"tool":"exec_shell_command","params":{"command":"echo hello"},"stream":true}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			var events []map[string]any
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var ev map[string]any
					require.NoError(t, json.Unmarshal([]byte(data), &ev))
					events = append(events, ev)
				}
			}
			require.NotEmpty(t, events)
			last := events[len(events)-1]
			assert.Equal(t, true, last["done"])
			var chunks strings.Builder
			for _, ev := range events[:len(events)-1] {
				chunks.WriteString(ev["chunk"].(string))
			}
			assert.Equal(t, tc.chunks, chunks.String())
			if tc.err == "" {
				assert.NotContains(t, last, "error")
			} else {
				assert.Equal(t, tc.err, last["error"])
			}
		})
	}
}

func TestToolsRuntimeOption(t *testing.T) {
	for _, tc := range []struct {
		runtime string
		msg     string
	}{
		{"fake:x", "unknown tool runtime"},
		{"ssh:-oProxyCommand=x", "invalid ssh target"},
		{"docker-container:--privileged", "invalid container id"},
		{"docker:", "needs an image name"},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			_, err := New(context.Background(), Options{Tools: ToolsOptions{Enabled: []string{"all"}, Runtime: tc.runtime}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestToolsStartup(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	_, _ = newTestServer(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Tools: ToolsOptions{Enabled: []string{"read_file", "grep_search"}, Root: dir}})
	var warnings []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "agent tools") {
			warnings = append(warnings, line)
		}
	}
	require.Len(t, warnings, 1, logs.String())
	assert.Contains(t, warnings[0], "tools=read_file,grep_search")
	assert.Contains(t, warnings[0], "root="+dir)
	assert.Contains(t, warnings[0], "client_cwd=false client_runtime=false")

	_, err := New(context.Background(), Options{Tools: ToolsOptions{Enabled: []string{"read_file"}, Root: filepath.Join(dir, "missing")}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tools root")
}
