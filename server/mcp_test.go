package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpFixtureEnv makes the test binary act as an MCP server (see
// runMCPFixture) instead of running the tests.
const mcpFixtureEnv = "GO_LLAMA_TEST_MCP_FIXTURE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(mcpFixtureEnv); mode != "" {
		runMCPFixture(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMCPFixture is a small MCP server over stdio, for the tests. mode
// "empty" offers no tools; "notify" sends a notification and a stale
// reply before each answer; "crash" exits on tools/call of "crash";
// "dead" exits at once.
func runMCPFixture(mode string) {
	if mode == "dead" {
		os.Exit(3)
	}
	failed := false
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
	}
	tools := []map[string]any{
		{"name": "echo", "description": "Echo back the message", "inputSchema": map[string]any{
			"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}, "required": []string{"message"}}},
		{"name": "add", "description": "Add two numbers", "inputSchema": map[string]any{
			"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}}},
		{"name": "fail_once", "description": "Fails on its first call"},
		{"name": "sleep", "description": "Sleeps"},
		{"name": "bad", "description": "Returns isError"},
		{"name": "crash", "description": "Exits"},
		{"name": "getenv", "description": "Returns an environment variable"},
		{"name": "flood", "description": "Answers, then sends count notifications of size bytes"},
	}
	if mode == "empty" {
		tools = []map[string]any{}
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var req struct {
			ID     *json.RawMessage `json:"id"`
			Method string           `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		id := req.ID
		result := func(v any) { send(map[string]any{"jsonrpc": "2.0", "id": id, "result": v}) }
		text := func(s string) { result(map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}) }
		if mode == "notify" {
			send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progress": 1}})
			send(map[string]any{"jsonrpc": "2.0", "id": 987654, "result": map[string]any{}})
			out.WriteString("not json\n")
		}
		switch req.Method {
		case "initialize":
			result(map[string]any{"protocolVersion": "2024-11-05", "capabilities": map[string]any{"tools": map[string]any{}}})
		case "tools/list":
			result(map[string]any{"tools": tools})
		case "tools/call":
			a := req.Params.Arguments
			switch req.Params.Name {
			case "echo":
				text(fmt.Sprintf("echo: %v", a["message"]))
			case "add":
				text(fmt.Sprintf("%v", a["a"].(float64)+a["b"].(float64)))
			case "fail_once":
				if !failed {
					failed = true
					send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32000, "message": "transient error"}})
				} else {
					text("ok")
				}
			case "sleep":
				out.Flush()
				time.Sleep(time.Duration(a["seconds"].(float64) * float64(time.Second))) // the fixture's slow tool: the subject
				text("slept")
			case "bad":
				result(map[string]any{"content": []any{map[string]any{"type": "text", "text": "it broke"}}, "isError": true})
			case "crash":
				out.Flush()
				os.Exit(1)
			case "getenv":
				v, ok := os.LookupEnv(a["name"].(string))
				text(fmt.Sprintf("%t:%s", ok, v))
			case "flood":
				text("flooding")
				pad := strings.Repeat("x", int(a["size"].(float64)))
				for range int(a["count"].(float64)) {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"data": pad}})
				}
			default:
				send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32602, "message": "unknown tool"}})
			}
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
		out.Flush()
	}
}

// fixtureEnv is the environment of an MCP fixture server of the given mode.
// The fixture is this test binary, whose package init finds the test
// models (testenv) before it becomes an MCP server, and MCP servers get a
// minimal environment (--tools-env): it hands them the test environment's
// locations.
func fixtureEnv(mode string) map[string]string {
	env := map[string]string{mcpFixtureEnv: mode}
	for _, k := range []string{"LLAMA_TEST_MODELS", "LLAMA_CPP_SRC", "GO_LLAMA_LIB_CACHE", "LLAMA_LIB_DIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

// fixtureEnvWith is fixtureEnv with one more variable.
func fixtureEnvWith(mode, k, v string) map[string]string {
	env := fixtureEnv(mode)
	env[k] = v
	return env
}

// mcpConfig is an "mcpServers" document of fixture servers, name to mode.
func mcpConfig(t *testing.T, servers map[string]string, timeoutMS int) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	m := map[string]any{}
	for name, mode := range servers {
		env := fixtureEnv(mode)
		e := map[string]any{"command": exe, "args": []string{"-test.run=^$"}, "env": env}
		if mode == "missing" {
			e["command"] = filepath.Join(t.TempDir(), "no-such-program")
		}
		if timeoutMS > 0 {
			e["timeout_ms"] = timeoutMS
		}
		m[name] = e
	}
	b, err := json.Marshal(map[string]any{"mcpServers": m})
	require.NoError(t, err)
	return string(b)
}

func TestMCPTools(t *testing.T) {
	cfg := mcpConfig(t, map[string]string{"echo": "normal", "quiet": "empty", "gone": "missing", "noisy": "notify", "fragile": "crash"}, 0)
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{MCPServersJSON: cfg}})

	code, data := call(t, "GET", ts.URL+"/tools", nil, nil)
	require.Equal(t, 200, code, "%s", data)
	var tools []map[string]any
	require.NoError(t, json.Unmarshal(data, &tools))
	names := map[string]map[string]any{}
	for _, tl := range tools {
		names[tl["tool"].(string)] = tl
		assert.Equal(t, "mcp", tl["type"])
	}
	for _, n := range []string{"echo_echo", "echo_add", "echo_fail_once", "noisy_echo", "fragile_crash"} {
		assert.Contains(t, names, n)
	}
	for n := range names {
		assert.False(t, strings.HasPrefix(n, "quiet_") || strings.HasPrefix(n, "gone_"), n)
	}
	def := names["echo_echo"]["definition"].(map[string]any)
	assert.Equal(t, "function", def["type"])
	fn := def["function"].(map[string]any)
	assert.Equal(t, "Echo back the message", fn["description"])
	assert.Equal(t, "object", fn["parameters"].(map[string]any)["type"])
	// A tool without an input schema gets an empty object.
	assert.Equal(t, map[string]any{}, names["echo_fail_once"]["definition"].(map[string]any)["function"].(map[string]any)["parameters"])

	for _, tc := range []struct {
		name   string
		tool   string
		params map[string]any
		want   map[string]any
	}{
		{"echo", "echo_echo", map[string]any{"message": "hello"}, map[string]any{"plain_text_response": "echo: hello"}},
		{"numbers", "echo_add", map[string]any{"a": 3, "b": 5}, map[string]any{"plain_text_response": "8"}},
		{"rpc error", "echo_fail_once", map[string]any{}, map[string]any{"error": "transient error"}},
		{"same process afterwards", "echo_fail_once", map[string]any{}, map[string]any{"plain_text_response": "ok"}},
		{"isError", "echo_bad", map[string]any{}, map[string]any{"error": "it broke"}},
		{"notifications and stale replies skipped", "noisy_echo", map[string]any{"message": "hi"}, map[string]any{"plain_text_response": "echo: hi"}},
		{"server exits mid-call", "fragile_crash", map[string]any{}, map[string]any{"error": "transport closed"}},
		{"restarted after the exit", "fragile_echo", map[string]any{"message": "again"}, map[string]any{"plain_text_response": "echo: again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := callTool(t, ts.URL, tc.tool, tc.params, nil)
			require.Equal(t, 200, code, "%v", out)
			assert.Equal(t, tc.want, out)
		})
	}

	t.Run("concurrent calls", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				code, out := callTool(t, ts.URL, "echo_echo", map[string]any{"message": fmt.Sprint(i)}, nil)
				assert.Equal(t, 200, code)
				assert.Equal(t, map[string]any{"plain_text_response": fmt.Sprintf("echo: %d", i)}, out)
			})
		}
		wg.Wait()
	})
}

func TestMCPTimeout(t *testing.T) {
	_, ts := newTestServer(t, Options{Tools: ToolsOptions{MCPServersJSON: mcpConfig(t, map[string]string{"slow": "normal"}, 1000)}})
	code, out := callTool(t, ts.URL, "slow_sleep", map[string]any{"seconds": 1.2}, nil)
	require.Equal(t, 200, code)
	assert.Equal(t, map[string]any{"error": "request timed out"}, out)
	// The late reply to the call that timed out is skipped.
	_, out = callTool(t, ts.URL, "slow_echo", map[string]any{"message": "next"}, nil)
	assert.Equal(t, map[string]any{"plain_text_response": "echo: next"}, out)
}

func TestMCPAbort(t *testing.T) {
	s, ts := newTestServer(t, Options{Tools: ToolsOptions{MCPServersJSON: mcpConfig(t, map[string]string{"slow": "normal"}, 0)}})
	done := make(chan map[string]any, 1)
	go func() {
		_, out := callTool(t, ts.URL, "slow_sleep", map[string]any{"seconds": 30}, nil)
		done <- out
	}()
	require.Eventually(t, func() bool { return s.tools.MCPStats("slow").Running }, 5*time.Second, 5*time.Millisecond)
	s.AbortToolCalls()
	select {
	case out := <-done:
		assert.Contains(t, []any{"cancelled", "initialize failed: cancelled", "MCP server unavailable: slow"}, out["error"])
	case <-time.After(5 * time.Second):
		t.Fatal("the call was not cancelled")
	}
	_, out := callTool(t, ts.URL, "slow_echo", map[string]any{"message": "x"}, nil)
	assert.Equal(t, map[string]any{"error": "MCP server unavailable: slow"}, out)
	require.NoError(t, s.Close())
}

func TestMCPConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(file, []byte(mcpConfig(t, map[string]string{"fromfile": "normal"}, 0)), 0o644))
	for _, tc := range []struct {
		name, file, inline string
		err                string
		tools              []string
	}{
		{"invalid JSON", "", "not valid json", "failed to parse MCP config JSON", nil},
		{"missing file", filepath.Join(t.TempDir(), "none.json"), "", "failed to open MCP config file", nil},
		{"mistyped entry", "", `{"mcpServers": {"x": {"command": 5}}}`, "failed to parse MCP config JSON", nil},
		{"no mcpServers", "", `{"servers": {}}`, "", nil},
		{"no command", "", `{"mcpServers": {"x": {"args": ["a"]}}}`, "", nil},
		{"file and inline, duplicates skipped", file, mcpConfig(t, map[string]string{"fromfile": "empty", "inline": "empty"}, 0), "", []string{"fromfile_add", "fromfile_bad"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Tools: ToolsOptions{MCPServersConfig: tc.file, MCPServersJSON: tc.inline}}
			if tc.err != "" {
				_, err := New(context.Background(), o)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			_, ts := newTestServer(t, o)
			code, data := call(t, "GET", ts.URL+"/tools", nil, nil)
			if tc.tools == nil {
				assert.Equal(t, 403, code, "no MCP server: /tools is off")
				return
			}
			require.Equal(t, 200, code, "%s", data)
			var cards []map[string]any
			require.NoError(t, json.Unmarshal(data, &cards))
			var names []string
			for _, c := range cards {
				names = append(names, c["tool"].(string))
			}
			for _, n := range tc.tools {
				assert.Contains(t, names, n)
			}
		})
	}
}
