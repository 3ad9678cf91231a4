package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	mcpProtocolVersion = "2024-11-05"
	mcpDefaultTimeout  = 30 * time.Second // one call, unless timeout_ms says otherwise
	mcpWarmupTimeout   = 10 * time.Second // listing one server's tools at start
	mcpCooldown        = 5 * time.Second  // after a server failed to start
	mcpMaxLine         = 8 << 20          // longer NDJSON lines are dropped
	MCPQueue           = 256              // unread messages kept from a server
	MCPQueueBytes      = 16 << 20         // their total size
)

// mcpServerConfig is one entry of "mcpServers".
type mcpServerConfig struct {
	name    string
	command string
	args    []string
	env     map[string]string // over the server's environment, without its secrets
	cwd     string
	timeout time.Duration // of one call
}

// parseMCPConfig reads {"mcpServers": {"NAME": {...}}}. A document
// without "mcpServers" has no servers; entries without a command are
// skipped. Servers come in name order.
func parseMCPConfig(data []byte, log *slog.Logger) ([]mcpServerConfig, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var servers map[string]json.RawMessage
	if raw, ok := doc["mcpServers"]; !ok || json.Unmarshal(raw, &servers) != nil {
		return nil, nil
	}
	var out []mcpServerConfig
	for _, name := range sortedKeys(servers) {
		var e struct {
			Command   string            `json:"command"`
			Args      []string          `json:"args"`
			Env       map[string]string `json:"env"`
			Cwd       string            `json:"cwd"`
			TimeoutMS *int              `json:"timeout_ms"`
		}
		if err := json.Unmarshal(servers[name], &e); err != nil {
			return nil, fmt.Errorf("server %q: %w", name, err)
		}
		if e.Command == "" {
			log.Warn("MCP server has no command, skipping", "server", name)
			continue
		}
		c := mcpServerConfig{name: name, command: e.Command, args: e.Args, env: e.Env, cwd: e.Cwd, timeout: mcpDefaultTimeout}
		if e.TimeoutMS != nil {
			c.timeout = time.Duration(*e.TimeoutMS) * time.Millisecond
		}
		out = append(out, c)
	}
	return out, nil
}

// mcpToolDef is a tool an MCP server offers.
type mcpToolDef struct {
	server      string
	name        string // without the "SERVER_" prefix
	description string
	inputSchema any
}

// mcpManager runs the configured MCP servers: each is started on first
// use, kept for later calls, started again when it died, and left alone
// for a few seconds after it failed to start. Safe for concurrent use.
type mcpManager struct {
	log     *slog.Logger
	env     *envPolicy
	configs []mcpServerConfig

	mu         sync.Mutex
	transports map[string]*mcpTransport
	cooldown   map[string]time.Time
	registry   []mcpToolDef

	stopOnce sync.Once
	stopping chan struct{} // closed by abort
}

// newMCPManager reads the configuration (a file and/or inline JSON) and
// starts each server once to list its tools. It returns nil when nothing
// is configured. A configuration that cannot be read is an error; a
// server that does not start is only logged.
func newMCPManager(ctx context.Context, file, inline string, env *envPolicy, log *slog.Logger) (*mcpManager, error) {
	m := &mcpManager{log: log, env: env, transports: map[string]*mcpTransport{}, cooldown: map[string]time.Time{}, stopping: make(chan struct{})}
	add := func(data []byte) error {
		cfgs, err := parseMCPConfig(data, log)
		if err != nil {
			return fmt.Errorf("server: failed to parse MCP config JSON: %w", err)
		}
		if len(cfgs) == 0 {
			log.Warn("MCP config: no servers found in JSON")
		}
		for _, c := range cfgs {
			if m.config(c.name) != nil {
				log.Warn("MCP config: duplicate server name, skipping", "server", c.name)
				continue
			}
			m.configs = append(m.configs, c)
		}
		return nil
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("server: failed to open MCP config file: %w", err)
		}
		if err := add(data); err != nil {
			return nil, err
		}
	}
	if inline != "" {
		if err := add([]byte(inline)); err != nil {
			return nil, err
		}
	}
	if len(m.configs) == 0 {
		return nil, nil
	}
	for i := range m.configs {
		c := &m.configs[i]
		t, err := startMCPTransport(c, env, log)
		if err != nil {
			log.Warn("MCP warmup: failed to start", "server", c.name, "err", err)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, mcpWarmupTimeout)
		tools, err := t.listTools(withDone(wctx, m.stopping))
		cancel()
		t.close()
		if err != nil {
			log.Warn("MCP warmup: no tools", "server", c.name, "err", err)
			continue
		}
		log.Info("MCP warmup", "server", c.name, "tools", len(tools))
		m.registry = append(m.registry, tools...)
	}
	return m, nil
}

func (m *mcpManager) config(name string) *mcpServerConfig {
	for i := range m.configs {
		if m.configs[i].name == name {
			return &m.configs[i]
		}
	}
	return nil
}

func (m *mcpManager) listTools() []mcpToolDef {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mcpToolDef(nil), m.registry...)
}

// tool makes def a /tools entry named SERVER_TOOL.
func (m *mcpManager) tool(def mcpToolDef, stopped <-chan struct{}) *tool {
	schema, ok := def.inputSchema.(map[string]any)
	if !ok {
		schema = map[string]any{}
	}
	name := def.server + "_" + def.name
	return &tool{
		name: name, displayName: name, kind: "mcp",
		definition: map[string]any{
			"type":     "function",
			"function": map[string]any{"name": name, "description": def.description, "parameters": schema},
		},
		invoke: func(ctx context.Context, _ *call, p toolParams) (any, error) {
			return m.call(ctx, def.server, def.name, p), nil
		},
	}
}

// call runs a tool of server and returns the /tools answer: the text
// parts of the result as plain_text_response, or an "error".
func (m *mcpManager) call(ctx context.Context, server, toolName string, args toolParams) any {
	t := m.transport(server)
	if t == nil {
		return toolFailure{"MCP server unavailable: " + server}
	}
	if args == nil {
		args = toolParams{}
	}
	res, err := t.callTool(withDone(ctx, m.stopping), toolName, args)
	if err != nil {
		return toolFailure{err.Error()}
	}
	return res
}

// transport returns server's running transport, starting one if needed;
// nil while the server cools down after a failed start, or on shutdown.
func (m *mcpManager) transport(server string) *mcpTransport {
	var dead *mcpTransport
	defer func() {
		if dead != nil {
			dead.close()
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.stopping:
		return nil
	default:
	}
	if until, ok := m.cooldown[server]; ok {
		if time.Now().Before(until) {
			return nil
		}
		delete(m.cooldown, server)
	}
	if t := m.transports[server]; t != nil {
		if t.alive() {
			return t
		}
		m.log.Warn("MCP server is no longer alive", "server", server, "diagnostics", t.diagnostics())
		dead = t
		delete(m.transports, server)
	}
	c := m.config(server)
	if c == nil {
		return nil
	}
	t, err := startMCPTransport(c, m.env, m.log)
	if err != nil {
		m.log.Warn("MCP server failed to start", "server", server, "err", err)
		m.cooldown[server] = time.Now().Add(mcpCooldown)
		return nil
	}
	m.transports[server] = t
	return t
}

// abort cancels the calls in flight and refuses new ones.
func (m *mcpManager) abort() {
	m.stopOnce.Do(func() { close(m.stopping) })
}

// close aborts and stops every server.
func (m *mcpManager) close() {
	m.abort()
	m.mu.Lock()
	ts := m.transports
	m.transports = map[string]*mcpTransport{}
	m.mu.Unlock()
	for _, t := range ts {
		t.close()
	}
}

// mcpTransport is one MCP server process, spoken to in JSON-RPC 2.0 over
// its stdin and stdout, one JSON message a line. Calls are serialized.
type mcpTransport struct {
	cfg *mcpServerConfig
	log *slog.Logger
	cmd *exec.Cmd

	stdin  *os.File
	stdout *os.File
	stderr *os.File

	msgs    chan []byte   // lines read from stdout, but the awaited reply
	queued  atomic.Int64  // bytes in msgs
	waitID  atomic.Int64  // the id of the request awaiting its reply, or -1
	replies chan []byte   // the awaited reply, never dropped (one call at a time)
	exited  chan struct{} // closed when the process exited or the transport closed

	callMu      chan struct{} // held (full) for a whole call: one request at a time
	nextID      int64
	initialized bool
	tools       []mcpToolDef

	errMu   sync.Mutex
	lastErr string // the last handshake failure (errMu)
	errTail string // the end of the server's stderr (errMu)

	closeOnce sync.Once
}

// startMCPTransport starts the server's process.
func startMCPTransport(c *mcpServerConfig, envp *envPolicy, log *slog.Logger) (*mcpTransport, error) {
	cmd := exec.Command(c.command, c.args...)
	cmd.Dir = c.cwd
	env := envp.environ()
	for _, k := range sortedKeys(c.env) {
		env = append(env, k+"="+c.env[k])
	}
	cmd.Env = env
	setProcessGroup(cmd)
	// Pipes of our own, read with the poller: a grandchild that inherits
	// them cannot keep a reader blocked after the server is gone.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	t := &mcpTransport{
		cfg: c, log: log, cmd: cmd, stdin: inW, stdout: outR, stderr: errR, nextID: 1,
		msgs: make(chan []byte, MCPQueue), replies: make(chan []byte, 1), exited: make(chan struct{}), callMu: make(chan struct{}, 1),
	}
	t.waitID.Store(-1)
	go func() {
		_ = cmd.Wait()
		t.markExited()
	}()
	go t.readLoop()
	go t.stderrLoop()
	return t, nil
}

func (t *mcpTransport) markExited() {
	t.closeOnce.Do(func() { close(t.exited) })
}

func (t *mcpTransport) alive() bool {
	select {
	case <-t.exited:
		return false
	default:
		return true
	}
}

// readLoop passes each line of the server's stdout to msgs (enqueue).
func (t *mcpTransport) readLoop() {
	defer t.markExited()
	sc := bufio.NewScanner(t.stdout)
	sc.Buffer(make([]byte, 0, 64<<10), mcpMaxLine)
	for {
		for sc.Scan() {
			line := strings.TrimSuffix(sc.Text(), "\r")
			if strings.TrimSpace(line) == "" {
				continue
			}
			if id := t.waitID.Load(); id >= 0 {
				if _, _, ok := matchReply([]byte(line), id); ok && t.waitID.CompareAndSwap(id, -1) {
					t.replies <- []byte(line)
					continue
				}
			}
			t.enqueue([]byte(line))
		}
		if errors.Is(sc.Err(), bufio.ErrTooLong) {
			t.log.Warn("MCP server: dropping an oversized line", "server", t.cfg.name)
			if !t.skipLine() {
				return
			}
			sc = bufio.NewScanner(t.stdout)
			sc.Buffer(make([]byte, 0, 64<<10), mcpMaxLine)
			continue
		}
		return
	}
}

// skipLine discards stdout up to the next newline.
func (t *mcpTransport) skipLine() bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := t.stdout.Read(buf)
		for _, b := range buf[:n] {
			if b == '\n' {
				return true // the rest of this read is lost, as a partial line
			}
		}
		if err != nil {
			return false
		}
	}
}

// stderrLoop drains the server's stderr (a full pipe would block it) to
// the debug log, keeping its end for diagnostics.
func (t *mcpTransport) stderrLoop() {
	sc := bufio.NewScanner(t.stderr)
	sc.Buffer(make([]byte, 0, 4096), mcpMaxLine)
	for sc.Scan() {
		line := sc.Text()
		t.log.Debug("MCP server stderr", "server", t.cfg.name, "line", line)
		t.errMu.Lock()
		t.errTail += line + "\n"
		if len(t.errTail) > 4096 {
			t.errTail = t.errTail[len(t.errTail)-4096:]
		}
		t.errMu.Unlock()
	}
}

// fail records msg as the transport's last failure for diagnostics, which
// other requests read while this one holds callMu, and returns it as an
// error.
func (t *mcpTransport) fail(msg string) error {
	t.errMu.Lock()
	t.lastErr = msg
	t.errMu.Unlock()
	return errors.New(msg)
}

func (t *mcpTransport) diagnostics() string {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	if t.errTail == "" {
		return t.lastErr
	}
	return strings.TrimSpace(t.lastErr + "; last stderr: " + t.errTail)
}

// close kills the server (and what it started) and closes the pipes; it
// does not wait for a grandchild that holds them.
func (t *mcpTransport) close() {
	killProcessGroup(t.cmd)
	t.markExited()
	_ = t.stdin.Close()
	_ = t.stdout.Close()
	_ = t.stderr.Close()
}

// rpcRequest is a JSON-RPC request, or a notification without ID.
type rpcRequest struct {
	ID      *int64 `json:"id,omitempty"`
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// mcpInitialize is the params of MCP's initialize request.
type mcpInitialize struct {
	Capabilities struct{} `json:"capabilities"`
	ClientInfo   struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
	ProtocolVersion string `json:"protocolVersion"`
}

// mcpToolCall is the params of MCP's tools/call request.
type mcpToolCall struct {
	Arguments toolParams `json:"arguments"`
	Name      string     `json:"name"`
}

// rpcError is a JSON-RPC error reply, or a failure to get a reply.
type rpcError struct{ msg string }

func (e *rpcError) Error() string { return e.msg }

// send writes one request (or a notification, without id) and, for a
// request, waits for the reply with its id until the server's timeout,
// ctx or the server's exit. Notifications, malformed lines and late
// replies to earlier requests are skipped.
func (t *mcpTransport) send(ctx context.Context, method string, params any, notify bool) (json.RawMessage, error) {
	msg := rpcRequest{JSONRPC: "2.0", Method: method, Params: params}
	var id int64
	if !notify {
		id = t.nextID
		t.nextID++
		msg.ID = &id
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, &rpcError{"encode request: " + err.Error()}
	}
	if !notify {
		// What came before this request is stale: a reply routed after an
		// earlier call gave up, notifications, late replies.
		select {
		case <-t.replies:
		default:
		}
		t.drain()
		t.waitID.Store(id)
		defer t.waitID.Store(-1)
	}
	deadline := time.Now().Add(t.cfg.timeout)
	_ = t.stdin.SetWriteDeadline(deadline)
	if _, err := t.stdin.Write(append(b, '\n')); err != nil {
		return nil, &rpcError{"transport closed"}
	}
	if notify {
		return nil, nil
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case line := <-t.replies:
			// The server wrote what is still queued before this reply
			// (it reads its stdout in order): nothing will read it now.
			t.drain()
			res, err, _ := matchReply(line, id)
			return res, err
		case line := <-t.msgs:
			t.queued.Add(-int64(len(line)))
			if res, err, ok := matchReply(line, id); ok {
				return res, err
			}
		case <-ctx.Done():
			return nil, &rpcError{"cancelled"}
		case <-timer.C:
			return nil, &rpcError{"request timed out"}
		case <-t.exited:
			// The reply may have come just before the exit.
			for {
				select {
				case line := <-t.replies:
					res, err, _ := matchReply(line, id)
					return res, err
				case line := <-t.msgs:
					t.queued.Add(-int64(len(line)))
					if res, err, ok := matchReply(line, id); ok {
						return res, err
					}
					continue
				default:
				}
				return nil, &rpcError{"transport closed"}
			}
		}
	}
}

// drain empties msgs.
func (t *mcpTransport) drain() {
	for {
		select {
		case line := <-t.msgs:
			t.queued.Add(-int64(len(line)))
		default:
			return
		}
	}
}

// enqueue adds line to msgs: a notification, a late reply, or a server's
// request (the awaited reply goes to replies instead). When the queue is
// full (MCPQueue messages or MCPQueueBytes bytes) the oldest are dropped.
func (t *mcpTransport) enqueue(line []byte) {
	if len(line) > MCPQueueBytes {
		t.log.Warn("MCP server: dropping an oversized message", "server", t.cfg.name)
		return
	}
	n := int64(len(line))
	for {
		if t.queued.Add(n) <= MCPQueueBytes {
			select {
			case t.msgs <- line:
				return
			default:
			}
		}
		t.queued.Add(-n)
		select {
		case old := <-t.msgs:
			t.queued.Add(-int64(len(old)))
			t.log.Warn("MCP server: dropping an unread message", "server", t.cfg.name)
		default:
			// A caller took the queue's messages meanwhile: try again.
		}
	}
}

// matchReply decodes line and reports whether it is the reply to id.
func matchReply(line []byte, id int64) (json.RawMessage, error, bool) {
	var reply struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &reply) != nil || len(reply.ID) == 0 {
		return nil, nil, false
	}
	var got float64
	if json.Unmarshal(reply.ID, &got) != nil || got != float64(id) {
		return nil, nil, false
	}
	if len(reply.Error) > 0 && string(reply.Error) != "null" {
		return nil, &rpcError{rpcErrorMessage(reply.Error)}, true
	}
	if len(reply.Result) == 0 {
		return nil, &rpcError{"invalid response from MCP server"}, true
	}
	return reply.Result, nil, true
}

func rpcErrorMessage(raw json.RawMessage) string {
	var obj struct {
		Message *string `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != nil {
		return *obj.Message
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return "unknown error"
}

// lock takes callMu, unless ctx is done or the server exits first.
func (t *mcpTransport) lock(ctx context.Context) error {
	select {
	case t.callMu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &rpcError{"cancelled"}
	case <-t.exited:
		return &rpcError{"transport closed"}
	}
}

func (t *mcpTransport) unlock() { <-t.callMu }

// ensureInit does the initialize handshake once (callMu held).
func (t *mcpTransport) ensureInit(ctx context.Context) error {
	if t.initialized {
		return nil
	}
	init := mcpInitialize{ProtocolVersion: mcpProtocolVersion}
	init.ClientInfo.Name, init.ClientInfo.Version = "llama.cpp", "1.0"
	_, err := t.send(ctx, "initialize", init, false)
	if err != nil {
		return t.fail("initialize failed: " + err.Error())
	}
	_, _ = t.send(ctx, "notifications/initialized", nil, true)
	t.initialized = true
	return nil
}

// listTools asks the server for its tools.
func (t *mcpTransport) listTools(ctx context.Context) ([]mcpToolDef, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.unlock()
	if err := t.ensureInit(ctx); err != nil {
		return nil, err
	}
	if t.tools != nil {
		return t.tools, nil
	}
	raw, err := t.send(ctx, "tools/list", nil, false)
	if err != nil {
		return nil, t.fail("tools/list failed: " + err.Error())
	}
	var res struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema any    `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	t.tools = []mcpToolDef{}
	for _, d := range res.Tools {
		t.tools = append(t.tools, mcpToolDef{server: t.cfg.name, name: d.Name, description: d.Description, inputSchema: d.InputSchema})
	}
	return t.tools, nil
}

// callTool runs tools/call and normalizes its result: the text parts
// joined by newlines as plain_text_response, or an "error" when the
// result says isError.
func (t *mcpTransport) callTool(ctx context.Context, name string, args toolParams) (any, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.unlock()
	if err := t.ensureInit(ctx); err != nil {
		return nil, err
	}
	raw, err := t.send(ctx, "tools/call", mcpToolCall{Name: name, Arguments: args}, false)
	if err != nil {
		return nil, err
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(raw, &res)
	var parts []string
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		if text == "" {
			text = "MCP tool returned an error"
		}
		return toolFailure{text}, nil
	}
	return toolText{text}, nil
}

// MCPStats is the state of a configured MCP server's transport, for
// tests and diagnostics.
type MCPStats struct {
	Running     bool  // a transport is started
	QueuedBytes int64 // bytes of unread messages held (at most MCPQueueBytes)
	QueuedMsgs  int   // unread messages held (at most MCPQueue)
	CallsHeld   int   // 1 while a call holds the server
}

// MCPStats returns the state of the MCP server named server.
func (ts *Set) MCPStats(server string) MCPStats {
	if ts == nil || ts.mcp == nil {
		return MCPStats{}
	}
	ts.mcp.mu.Lock()
	t := ts.mcp.transports[server]
	ts.mcp.mu.Unlock()
	if t == nil {
		return MCPStats{}
	}
	return MCPStats{Running: true, QueuedBytes: t.queued.Load(), QueuedMsgs: len(t.msgs), CallsHeld: len(t.callMu)}
}
