package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// ToolsOptions configure llama-server's experimental agent features: the
// built-in tools and MCP servers behind /tools, and the CORS proxy. The
// zero value disables all of them, as llama-server does by default. They
// let HTTP clients read and write files and run commands as the server's
// user: never enable them on a server reachable by untrusted clients.
//
// Where llama-server leaves the tools open, this server narrows them by
// default:
//   - The file tools (read_file, write_file, edit_file, file_glob_search,
//     grep_search) reach only what is inside Root, through an os.Root:
//     absolute paths elsewhere, ".." and symbolic links that lead out are
//     refused (so are absolute symbolic links, even to a file inside).
//     /proc/self/environ, which holds the server's API keys, is out of
//     reach unless Root is "/".
//   - They read and write regular files only (no device, FIFO or
//     socket), and read a bounded amount: read_file with end_line goes
//     through at most the first 8 MiB of a file (and says so), edit_file
//     changes files of up to 8 MiB, grep_search skips larger files (and
//     counts them). Glob patterns are at most 4 KiB and matched without
//     recursion; a listing visits at most 100,000 entries, 64 folders
//     deep; grep_search's context_lines is at most 50 and its answer at
//     most 256 KiB.
//   - Commands (exec_shell_command, get_info, git) and MCP servers get the
//     server's environment without its secrets: LLAMA_API_KEY,
//     LLAMA_ARG_*, HF_TOKEN, HUGGING_FACE_HUB_TOKEN and every name ending
//     in _API_KEY, _TOKEN, _SECRET or _PASSWORD. An MCP server's "env"
//     in the configuration is added after, so it can pass one on.
//   - A command that times out or is cancelled is killed with its
//     session: its process group and, on Linux, what left it with setsid.
//   - The x-tool-cwd and x-tool-runtime headers are refused unless
//     AllowClientCwd and AllowClientRuntime say otherwise.
//
// exec_shell_command runs a shell: Root does not confine it. Enable it
// (or "all") only where the client may run anything as the server's user.
type ToolsOptions struct {
	// Enabled lists the built-in tools served by /tools (--tools): any of
	// read_file, file_glob_search, grep_search, exec_shell_command,
	// write_file, edit_file, get_info, or "all". An unknown name makes New
	// fail.
	Enabled []string
	// Runtime runs every tool call in an isolate instead of on the host
	// (--tools-runtime): "docker:IMAGE" or "podman:IMAGE" start a
	// container used by every call and removed when the server closes;
	// "docker-container:ID", "podman-container:ID" use a running container;
	// "ssh:TARGET" runs the tools on a POSIX host over ssh (key-based
	// authentication, trusted host key). A request's x-tool-runtime header
	// overrides it where AllowClientRuntime is set.
	Runtime string
	// Root is the folder the file tools are confined to (--tools-root);
	// "" is the server's working directory when New runs. A root that
	// cannot be opened makes New fail.
	Root string
	// AllowClientCwd honours a request's x-tool-cwd header
	// (--tools-allow-cwd), the folder relative paths and commands start
	// from; it must still lie inside Root. Off: a request that sends it
	// is refused (403).
	AllowClientCwd bool
	// AllowClientRuntime honours a request's x-tool-runtime header
	// (--tools-allow-runtime), which moves the call into any running
	// container or ssh host the server's user can reach. Off: a request
	// that sends it is refused (403), and calls run where Runtime says.
	AllowClientRuntime bool
	// MCPServersConfig is a JSON file of MCP servers (--mcp-servers-config)
	// in the "mcpServers" format of Cursor and Claude Desktop:
	// {"mcpServers": {"NAME": {"command": "...", "args": [...], "env":
	// {...}, "cwd": "...", "timeout_ms": 30000}}}. Each server's tools are
	// served by /tools as NAME_TOOL. A missing or invalid file makes New
	// fail.
	MCPServersConfig string
	// MCPServersJSON is the same configuration given inline
	// (--mcp-servers-json).
	MCPServersJSON string
	// CORSProxy enables /cors-proxy?url=... (--ui-mcp-proxy), which
	// forwards a GET or POST to an http(s) URL, for the web UI's MCP
	// client. Without it /cors-proxy answers 403. It answers only the
	// server's own web page (same-origin requests), origins listed
	// exactly in Options.CORSOrigins, and clients that send no Origin;
	// a POST must be JSON (its Content-Type, or the forwarded
	// X-Llama-Server-Proxy-Header-Content-Type, application/json). It
	// does not connect to loopback, private, link-local (cloud metadata),
	// multicast or unspecified addresses, checked after DNS resolution
	// at every connection, follows at most 5 redirects, and relays at most
	// 32 MiB of a response body, sent as an attachment under
	// "Content-Security-Policy: sandbox" and without cookies.
	CORSProxy bool
	// CORSProxyAllowPrivate lets /cors-proxy connect to loopback,
	// private, link-local (cloud metadata included) and the other
	// addresses it refuses by default (--cors-proxy-allow-private), for
	// MCP servers on this machine or the local network.
	CORSProxyAllowPrivate bool
}

// toolStream receives a streaming tool's output as it comes. It returns
// false once the client has gone away.
type toolStream func(chunk string) bool

// errToolParams is a missing or mistyped parameter of a tool call (400);
// llama-server answers it with an HTTP error, while the tool's own
// failures are a 200 with an "error" field.
func errToolParams(format string, args ...any) error {
	return badRequest(format, args...)
}

// errToolRuntime is a failure of the tool machinery itself, such as an
// unknown runtime (500).
func errToolRuntime(format string, args ...any) error {
	return serverError(format, args...)
}

// tool is one entry of /tools: a built-in tool or a tool of an MCP server.
type tool struct {
	name        string
	displayName string
	kind        string // "server" (built in) or "mcp"
	write       bool   // it can change things
	stream      bool   // it supports "stream": true
	usesCwd     bool   // it resolves paths against the working directory
	definition  map[string]any
	// invoke runs the tool with its parameters. st is nil unless the
	// call streams; a streaming tool then sends its output through st and
	// returns a nil result.
	// root confines the call's files on the host.
	invoke func(ctx context.Context, root *toolsRoot, p toolParams, st toolStream) (any, error)
}

// toolCard is a tool as GET /tools lists it. Its fields are in the order
// of their names, as llama-server's JSON objects are.
type toolCard struct {
	Definition  map[string]any `json:"definition"` // OpenAI's function tool, its JSON Schema free-form
	DisplayName string         `json:"display_name"`
	Permissions struct {
		Write bool `json:"write"`
	} `json:"permissions"`
	Tool    string `json:"tool"`
	Type    string `json:"type"`
	UsesCwd bool   `json:"uses_cwd"`
}

// card is the tool as GET /tools lists it.
func (t *tool) card() toolCard {
	c := toolCard{Definition: t.definition, DisplayName: t.displayName, Tool: t.name, Type: t.kind, UsesCwd: t.usesCwd}
	c.Permissions.Write = t.write
	return c
}

// toolSet is a server's /tools: the enabled built-in tools, then the MCP
// servers' tools, and the runtime they run in.
type toolSet struct {
	tools   []*tool
	byName  map[string]*tool
	runtime toolsRuntime // nil: the host, unless a request names one
	mcp     *mcpManager  // nil without MCP servers
	root    *toolsRoot   // nil without built-in tools

	allowCwd, allowRuntime bool

	stopOnce sync.Once
	stopped  chan struct{} // closed by abort: cancels calls in flight
}

// newToolSet builds the tool set of o, or returns nil when o enables
// neither built-in tools nor MCP servers (and /tools answers 403). It
// starts the MCP servers once to list their tools.
func newToolSet(ctx context.Context, o ToolsOptions, log *slog.Logger) (*toolSet, error) {
	mcp, err := newMCPManager(ctx, o.MCPServersConfig, o.MCPServersJSON, log)
	if err != nil {
		return nil, err
	}
	if len(o.Enabled) == 0 && mcp == nil {
		return nil, nil
	}
	ts := &toolSet{byName: map[string]*tool{}, mcp: mcp, stopped: make(chan struct{}),
		allowCwd: o.AllowClientCwd, allowRuntime: o.AllowClientRuntime}
	fail := func(err error) (*toolSet, error) {
		ts.close()
		return nil, err
	}
	if len(o.Enabled) > 0 {
		root, err := openToolsRoot(o.Root)
		if err != nil {
			return fail(fmt.Errorf("server: tools root: %w", err))
		}
		ts.root = root
	}
	if o.Runtime != "" {
		rt, err := newToolsRuntime(o.Runtime, log)
		if err != nil {
			return fail(fmt.Errorf("server: tools runtime: %w", err))
		}
		ts.runtime = rt
	}
	if len(o.Enabled) > 0 {
		all := builtinTools()
		known := make([]string, len(all))
		for i, t := range all {
			known[i] = t.name
		}
		want := map[string]bool{}
		for _, n := range o.Enabled {
			n = strings.TrimSpace(n)
			if n != "all" && !containsString(known, n) {
				return fail(fmt.Errorf("server: unknown tool %q, available tools: %s", n, strings.Join(known, ", ")))
			}
			want[n] = true
		}
		for _, t := range all {
			if want["all"] || want[t.name] {
				ts.add(t)
			}
		}
	}
	if mcp != nil {
		for _, def := range mcp.listTools() {
			name := def.server + "_" + def.name
			if ts.byName[name] != nil {
				log.Warn("MCP tool collides with an existing tool, skipping", "tool", name, "server", def.server)
				continue
			}
			ts.add(mcp.tool(def, ts.stopped))
		}
	}
	ts.warn(o, log)
	return ts, nil
}

// warn logs, once at start, what the tools open to HTTP clients.
func (ts *toolSet) warn(o ToolsOptions, log *slog.Logger) {
	var names []string
	for _, t := range ts.tools {
		if t.kind == "server" {
			names = append(names, t.name)
		}
	}
	args := []any{"tools", strings.Join(names, ",")}
	if ts.root != nil {
		args = append(args, "root", ts.root.dir)
	}
	if o.Runtime != "" {
		args = append(args, "runtime", o.Runtime)
	}
	if ts.mcp != nil {
		args = append(args, "mcp_servers", len(ts.mcp.configs))
	}
	args = append(args, "client_cwd", ts.allowCwd, "client_runtime", ts.allowRuntime)
	log.Warn("agent tools are enabled (experimental): HTTP clients can read and write files and run commands as this server's user; do not expose the server to untrusted clients", args...)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (ts *toolSet) add(t *tool) {
	ts.tools = append(ts.tools, t)
	ts.byName[t.name] = t
}

// abort cancels the calls in flight and refuses new ones; llama-server
// does this first when it shuts down, so that a slow tool does not hold
// the HTTP server's drain.
func (ts *toolSet) abort() {
	ts.stopOnce.Do(func() { close(ts.stopped) })
	if ts.mcp != nil {
		ts.mcp.abort()
	}
}

// close aborts the calls in flight, stops the MCP servers and the
// runtime's container, if the server started one.
func (ts *toolSet) close() {
	ts.abort()
	if ts.mcp != nil {
		ts.mcp.close()
	}
	if ts.runtime != nil {
		ts.runtime.close()
	}
	if ts.root != nil {
		ts.root.close()
	}
}

func handleToolsList(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ts := s.tools
		if ts == nil {
			return errFeatureDisabled()
		}
		out := make([]toolCard, 0, len(ts.tools))
		for _, t := range ts.tools {
			out = append(out, t.card())
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// toolCall is the body of POST /tools.
type toolCall struct {
	Tool   *string         `json:"tool"`
	Params json.RawMessage `json:"params"`
	Stream *bool           `json:"stream"`
}

func handleToolsCall(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ts := s.tools
		if ts == nil {
			return errFeatureDisabled()
		}
		if err := requireJSONBody(r); err != nil {
			return err
		}
		body, err := readBody(r)
		if err != nil {
			return badRequest("%v", err)
		}
		var req toolCall
		if err := json.Unmarshal(body, &req); err != nil {
			return badRequest("invalid JSON body: %v", err)
		}
		if req.Tool == nil {
			return badRequest(`missing "tool"`)
		}
		params := toolParams{}
		if p := bytes.TrimSpace(req.Params); len(p) > 0 && string(p) != "null" {
			dec := json.NewDecoder(bytes.NewReader(p))
			dec.UseNumber()
			if err := dec.Decode(&params); err != nil {
				return badRequest(`"params" must be an object`)
			}
		}
		stream := req.Stream != nil && *req.Stream
		t := ts.byName[*req.Tool]
		if t == nil {
			return &httpError{Status: http.StatusNotFound, Type: errInvalidRequest, Msg: fmt.Sprintf("unknown tool %q", *req.Tool)}
		}
		if stream && !t.stream {
			return &httpError{Status: http.StatusNotFound, Type: errInvalidRequest, Msg: fmt.Sprintf("tool %q does not support stream = true", t.name)}
		}
		if t.kind != "mcp" {
			// The working directory, runtime and response type come from
			// the client's headers (or the server's runtime), never from
			// what the model wrote in the parameters.
			delete(params, "cwd")
			delete(params, "runtime")
			delete(params, "resp_type")
			if v := r.Header.Get("X-Tool-Cwd"); v != "" {
				if !ts.allowCwd {
					return &httpError{Status: http.StatusForbidden, Type: errPermission, Msg: "x-tool-cwd is not allowed by this server (--tools-allow-cwd)"}
				}
				params["cwd"] = v
			}
			if v := r.Header.Get("X-Tool-Runtime"); v != "" {
				if !ts.allowRuntime {
					return &httpError{Status: http.StatusForbidden, Type: errPermission, Msg: "x-tool-runtime is not allowed by this server (--tools-allow-runtime)"}
				}
				params["runtime"] = v
			} else if ts.runtime != nil {
				spec, err := ts.runtime.spec()
				if err != nil {
					return serverError("%v", err)
				}
				params["runtime"] = spec
			}
			if v := r.Header.Get("X-Resp-Type"); v != "" {
				params["resp_type"] = v
			}
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(withDone(ctx, ts.stopped), cancel)
		defer stop()
		if stream {
			streamToolCall(ctx, w, t, ts.root, params)
			return nil
		}
		res, err := t.invoke(ctx, ts.root, params, nil)
		if err != nil {
			var he *httpError
			if errors.As(err, &he) {
				return he
			}
			return serverError("%v", err)
		}
		if res == nil {
			res = struct{}{}
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	}
}

// withDone returns a context that is done when ctx is or when done is
// closed.
func withDone(ctx context.Context, done <-chan struct{}) context.Context {
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-done:
		case <-c.Done():
		}
		cancel()
	}()
	return c
}

// streamToolCall runs a streaming tool and sends its output as
// server-sent events: {"chunk": "..."} events, then {"done": true} (with
// "error" when the call failed).
func streamToolCall(ctx context.Context, w http.ResponseWriter, t *tool, root *toolsRoot, params toolParams) {
	sse, err := sseStart(ctx, w)
	if err != nil {
		return
	}
	send := func(v any) bool { return sse.data(v) == nil && ctx.Err() == nil }
	_, err = t.invoke(ctx, root, params, func(chunk string) bool {
		if chunk == "" {
			return ctx.Err() == nil
		}
		return send(toolChunk{Chunk: chunk})
	})
	done := toolDone{Done: true}
	if err != nil {
		done.Error = err.Error()
	}
	send(done)
}

// toolText is a tool's answer in text: an MCP tool's, a command's
// output, a file's lines.
type toolText struct {
	PlainTextResponse string `json:"plain_text_response"`
}

// toolFailure is a tool's answer when it could not do what it was asked,
// sent with status 200 as llama-server does (a bad call is an error
// answer instead).
type toolFailure struct {
	Error string `json:"error"`
}

// toolChunk is an event of a streaming tool's output.
type toolChunk struct {
	Chunk string `json:"chunk"`
}

// toolDone is the last event of a streaming tool call.
type toolDone struct {
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// toolParams are a tool call's parameters, a JSON object decoded with
// json.Number for numbers.
type toolParams map[string]any

// str returns the required string parameter key.
func (p toolParams) str(key string) (string, error) {
	v, ok := p[key]
	if !ok || v == nil {
		return "", errToolParams("missing parameter %q", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", errToolParams("parameter %q must be a string", key)
	}
	return s, nil
}

// optStr returns the string parameter key, or def when it is missing or
// not a string (llama-server's json_value).
func (p toolParams) optStr(key, def string) string {
	if s, ok := p[key].(string); ok {
		return s
	}
	return def
}

// optInt returns the integer parameter key, or def when it is missing or
// not an integer.
func (p toolParams) optInt(key string, def int) int {
	n, ok := p[key].(json.Number)
	if !ok {
		return def
	}
	i, err := n.Int64()
	if err != nil {
		return def
	}
	const limit = 1 << 31
	if i > limit {
		i = limit
	} else if i < -limit {
		i = -limit
	}
	return int(i)
}

// optBool returns the boolean parameter key, or def.
func (p toolParams) optBool(key string, def bool) bool {
	if b, ok := p[key].(bool); ok {
		return b
	}
	return def
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readBody reads the whole request body (bounded by the server's body
// limit).
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, errors.New("request body is empty")
	}
	body := io.Reader(r.Body)
	if _, bounded := r.Body.(*maxBytesMarker); !bounded {
		body = io.LimitReader(r.Body, defaultMaxBodySize)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return data, nil
}
