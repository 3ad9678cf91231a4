// Package tools is the room of GET and POST /tools: llama-server's
// experimental agent tools. It holds the built-in shell and file tools,
// each with a typed input whose JSON Schema and decoding come from its Go
// struct (params.go), the client of MCP servers (mcp.go), the runtimes
// the tools run in (the host, confined to a root folder, or a container or
// ssh host: io.go, root.go) and the environment their commands get
// (env.go). The server package keeps the HTTP side: the route, the
// request's headers and the error dialect.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// Options are server.ToolsOptions, which defines and documents each
// field: the server passes its struct through as tools.Options(o.Tools),
// so the two must keep the same fields in the same order (a field added to
// one only does not compile). CORSProxy and CORSProxyAllowPrivate are the
// server's /cors-proxy's; this package does not read them.
type Options struct {
	Enabled               []string
	Runtime               string
	Root                  string
	AllowClientCwd        bool
	AllowClientRuntime    bool
	MCPServersConfig      string
	MCPServersJSON        string
	CORSProxy             bool
	CORSProxyAllowPrivate bool
	Env                   []string
	KeepDumpable          bool
}

// Error is a call that fails as a whole (an HTTP error answer, not a 200
// with an "error" field): Status is its HTTP status.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// toolStream receives a streaming tool's output as it comes. It returns
// false once the client has gone away.
type toolStream func(chunk string) bool

// errToolParams is a missing or mistyped parameter of a tool call (400);
// llama-server answers it with an HTTP error, while the tool's own
// failures are a 200 with an "error" field.
func errToolParams(format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// errToolRuntime is a failure of the tool machinery itself, such as an
// unknown runtime (500).
func errToolRuntime(format string, args ...any) error {
	return &Error{Status: http.StatusInternalServerError, Msg: fmt.Sprintf(format, args...)}
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
	// invoke runs the tool with its parameters. c.stream is nil unless
	// the call streams; a streaming tool then sends its output through it
	// and returns a nil result.
	invoke func(ctx context.Context, c *call, p toolParams) (any, error)
}

// call is where one call runs: the tool set's root and environment, and
// what the HTTP layer took from the request's headers (never from the
// parameters the model wrote).
type call struct {
	root     *toolsRoot // confines the call's files on the host
	env      *envPolicy // the environment of the commands it runs
	cwd      string     // x-tool-cwd, where the server allows it
	runtime  string     // x-tool-runtime or --tools-runtime
	respType string     // x-resp-type
	stream   toolStream // nil unless the call streams
}

// Card is a tool as GET /tools lists it. Its fields are in the order
// of their names, as llama-server's JSON objects are.
type Card struct {
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
func (t *tool) card() Card {
	c := Card{Definition: t.definition, DisplayName: t.displayName, Tool: t.name, Type: t.kind, UsesCwd: t.usesCwd}
	c.Permissions.Write = t.write
	return c
}

// Set is a server's /tools: the enabled built-in tools, then the MCP
// servers' tools, and the runtime they run in.
type Set struct {
	tools   []*tool
	byName  map[string]*tool
	runtime toolsRuntime // nil: the host, unless a request names one
	mcp     *mcpManager  // nil without MCP servers
	root    *toolsRoot   // nil without built-in tools
	env     *envPolicy

	allowCwd, allowRuntime bool

	stopOnce sync.Once
	stopped  chan struct{} // closed by abort: cancels calls in flight
}

// New builds the tool set of o, or returns nil when o enables neither
// built-in tools nor MCP servers (and /tools answers 403). It starts the
// MCP servers once to list their tools. Unless o.KeepDumpable, it makes
// the process undumpable on Linux (see hideProcess) when it returns a set.
func New(ctx context.Context, o Options, log *slog.Logger) (*Set, error) {
	env := newEnvPolicy(o.Env)
	if (len(o.Enabled) > 0 || o.MCPServersConfig != "" || o.MCPServersJSON != "") && !o.KeepDumpable {
		// Before any MCP server starts: none may read our environment.
		if err := hideProcess(); err != nil {
			return nil, fmt.Errorf("server: tools: %w", err)
		}
	}
	mcp, err := newMCPManager(ctx, o.MCPServersConfig, o.MCPServersJSON, env, log)
	if err != nil {
		return nil, err
	}
	if len(o.Enabled) == 0 && mcp == nil {
		return nil, nil
	}
	ts := &Set{byName: map[string]*tool{}, mcp: mcp, env: env, stopped: make(chan struct{}),
		allowCwd: o.AllowClientCwd, allowRuntime: o.AllowClientRuntime}
	fail := func(err error) (*Set, error) {
		ts.Close()
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
func (ts *Set) warn(o Options, log *slog.Logger) {
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

func (ts *Set) add(t *tool) {
	ts.tools = append(ts.tools, t)
	ts.byName[t.name] = t
}

// Abort cancels the calls in flight and refuses new ones; llama-server
// does this first when it shuts down, so that a slow tool does not hold
// the HTTP server's drain.
func (ts *Set) Abort() {
	ts.stopOnce.Do(func() { close(ts.stopped) })
	if ts.mcp != nil {
		ts.mcp.abort()
	}
}

// Close aborts the calls in flight, stops the MCP servers and the
// runtime's container, if the server started one.
func (ts *Set) Close() {
	ts.Abort()
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

// List returns the tools as GET /tools lists them.
func (ts *Set) List() []Card {
	out := make([]Card, 0, len(ts.tools))
	for _, t := range ts.tools {
		out = append(out, t.card())
	}
	return out
}

// Request is one POST /tools call, as the HTTP layer read it.
type Request struct {
	Tool   string
	Params json.RawMessage // a JSON object, or empty or null
	// Cwd, Runtime and RespType are the x-tool-cwd, x-tool-runtime and
	// x-resp-type headers ("" when absent). The first two are refused
	// (403) unless the set allows them; MCP tools ignore all three.
	Cwd, Runtime, RespType string
}

// Invocation is a call that passed the checks of Prepare, ready to Run.
type Invocation struct {
	set    *Set
	tool   *tool
	call   *call
	params toolParams
}

// Prepare checks a call before it runs: its parameters are an object,
// the tool exists (and streams, if streaming), and the headers it sends
// are allowed. The error, when not nil, is an *Error.
func (ts *Set) Prepare(req Request, streaming bool) (*Invocation, error) {
	params := toolParams{}
	if p := bytes.TrimSpace(req.Params); len(p) > 0 && string(p) != "null" {
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.UseNumber()
		if err := dec.Decode(&params); err != nil {
			return nil, errToolParams(`"params" must be an object`)
		}
	}
	t := ts.byName[req.Tool]
	if t == nil {
		return nil, &Error{Status: http.StatusNotFound, Msg: fmt.Sprintf("unknown tool %q", req.Tool)}
	}
	if streaming && !t.stream {
		return nil, &Error{Status: http.StatusNotFound, Msg: fmt.Sprintf("tool %q does not support stream = true", t.name)}
	}
	c := &call{root: ts.root, env: ts.env}
	if t.kind != "mcp" {
		// The working directory, runtime and response type come from
		// the client's headers (or the server's runtime), never from
		// what the model wrote in the parameters.
		c.respType = req.RespType
		if req.Cwd != "" {
			if !ts.allowCwd {
				return nil, &Error{Status: http.StatusForbidden, Msg: "x-tool-cwd is not allowed by this server (--tools-allow-cwd, Options.Tools.AllowClientCwd)"}
			}
			c.cwd = req.Cwd
		}
		if req.Runtime != "" {
			if !ts.allowRuntime {
				return nil, &Error{Status: http.StatusForbidden, Msg: "x-tool-runtime is not allowed by this server (--tools-allow-runtime, Options.Tools.AllowClientRuntime)"}
			}
			c.runtime = req.Runtime
		} else if ts.runtime != nil {
			spec, err := ts.runtime.spec()
			if err != nil {
				return nil, errToolRuntime("%v", err)
			}
			c.runtime = spec
		}
	}
	return &Invocation{set: ts, tool: t, call: c, params: params}, nil
}

// Run runs the call until it ends, ctx is done or the set aborts. A
// streaming call (chunk not nil) sends its output through chunk and
// returns a nil result; chunk returns false once the client has gone
// away. The error, when not nil, is an *Error: the call failed as a
// whole. A tool that could not do what it was asked answers
// {"error": ...} instead, with a nil error.
func (inv *Invocation) Run(ctx context.Context, chunk func(string) bool) (any, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(withDone(ctx, inv.set.stopped), cancel)
	defer stop()
	c := *inv.call
	c.stream = chunk
	res, err := inv.tool.invoke(ctx, &c, inv.params)
	if err != nil {
		var te *Error
		if !errors.As(err, &te) {
			te = &Error{Status: http.StatusInternalServerError, Msg: err.Error()}
		}
		return nil, te
	}
	if res == nil && chunk == nil {
		res = struct{}{}
	}
	return res, nil
}

// Call is Prepare, then Run without streaming.
func (ts *Set) Call(ctx context.Context, req Request) (any, error) {
	inv, err := ts.Prepare(req, false)
	if err != nil {
		return nil, err
	}
	return inv.Run(ctx, nil)
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

// toolParams are a tool call's parameters, a JSON object decoded with
// json.Number for numbers.
type toolParams map[string]any

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
