package server

// The HTTP side of the agent tools (GET and POST /tools): the tools
// themselves, the MCP client and the runtimes live in internal/tools.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/x/llama/server/internal/corsproxy"
	"github.com/x/llama/server/internal/tools"
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
//   - Commands (exec_shell_command, get_info) and MCP servers get a
//     minimal environment: PATH, HOME, USER, LOGNAME, SHELL, LANG,
//     LANGUAGE, LC_*, TERM, TMPDIR and TZ (and Windows' system folders),
//     plus the names Env lists; none of the server's other variables (API
//     keys, cloud credentials, database URLs, agent sockets). An MCP
//     server's "env" in the configuration is added after, so it can pass
//     one on. On Linux the server's process is made undumpable, so that
//     they cannot read its environment from /proc/PPID/environ either
//     (KeepDumpable).
//   - The file tools list files without running git (which runs what a
//     repository's .git/config names), and write_file and edit_file
//     refuse paths with a .git component.
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
	// multicast, unspecified, documentation and reserved addresses, nor
	// to this machine's own, checked after DNS resolution
	// at every connection, follows at most 5 redirects, and relays at most
	// 32 MiB of a response body, sent as an attachment under
	// "Content-Security-Policy: sandbox" and without cookies.
	CORSProxy bool
	// CORSProxyAllowPrivate lets /cors-proxy connect to loopback,
	// private, link-local (cloud metadata included) and the other
	// addresses it refuses by default (--cors-proxy-allow-private), for
	// MCP servers on this machine or the local network.
	CORSProxyAllowPrivate bool
	// Env names the variables of the server's environment that commands
	// and MCP servers get besides the minimal set (--tools-env), even
	// names that look secret; "*" gives them the whole environment but
	// the names that look secret (LLAMA_API_KEY, LLAMA_ARG_*, HF_TOKEN,
	// PGPASSWORD, SSH_AUTH_SOCK, names ending in _API_KEY, _TOKEN,
	// _SECRET, _PASSWORD, _KEY, _URL, ...), as llama-server gives all of
	// it.
	Env []string
	// KeepDumpable leaves the server's process dumpable on Linux when
	// tools or MCP servers are enabled (by default it is made undumpable,
	// so that the commands they run, under the same user, cannot read the
	// server's environment, memory and descriptors through /proc; that
	// also stops core dumps and same-user debuggers). Its command line
	// stays readable to every process either way: keep API keys off it
	// (LLAMA_API_KEY, --api-key-file).
	KeepDumpable bool

	// New passes these options to internal/tools as tools.Options, a
	// struct of the same fields in the same order: add a field to both.
}

func handleToolsList(s *Server) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.tools == nil {
			return errFeatureDisabled()
		}
		writeJSON(w, http.StatusOK, s.tools.List())
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
		if s.tools == nil {
			return errFeatureDisabled()
		}
		if err := requireJSONBody(r); err != nil {
			return err
		}
		// As every JSON body: its shape checked and what decoding it
		// builds counted against the budget before it is decoded.
		var req toolCall
		if err := decodeJSON(r, &req); err != nil {
			return err
		}
		if req.Tool == nil {
			return badRequest(`missing "tool"`)
		}
		call := tools.Request{Tool: *req.Tool, Params: req.Params,
			Cwd: r.Header.Get("X-Tool-Cwd"), Runtime: r.Header.Get("X-Tool-Runtime"), RespType: r.Header.Get("X-Resp-Type")}
		stream := req.Stream != nil && *req.Stream
		inv, err := s.tools.Prepare(call, stream)
		if err != nil {
			return statusError(err)
		}
		if stream {
			streamToolCall(r.Context(), w, inv)
			return nil
		}
		res, err := inv.Run(r.Context(), nil)
		if err != nil {
			return statusError(err)
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	}
}

// streamToolCall runs a streaming tool and sends its output as
// server-sent events: {"chunk": "..."} events, then {"done": true} (with
// "error" when the call failed).
func streamToolCall(ctx context.Context, w http.ResponseWriter, inv *tools.Invocation) {
	sse, err := sseStart(ctx, w)
	if err != nil {
		return
	}
	send := func(v any) bool { return sse.data(v) == nil && ctx.Err() == nil }
	_, err = inv.Run(ctx, func(chunk string) bool {
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

// toolChunk is an event of a streaming tool's output.
type toolChunk struct {
	Chunk string `json:"chunk"`
}

// toolDone is the last event of a streaming tool call.
type toolDone struct {
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// statusError renders the errors of internal/tools and
// internal/corsproxy, which carry an HTTP status, in the server's error
// types.
func statusError(err error) error {
	var status int
	var msg string
	var te *tools.Error
	var pe *corsproxy.Error
	switch {
	case errors.As(err, &te):
		status, msg = te.Status, te.Msg
	case errors.As(err, &pe):
		status, msg = pe.Status, pe.Msg
	default:
		return err
	}
	typ := errServer
	switch {
	case status == http.StatusForbidden:
		typ = errPermission
	case status < 500:
		typ = errInvalidRequest
	}
	return &httpError{Status: status, Type: typ, Msg: msg}
}

// readJSONBody is readBody for a body that will be decoded as JSON: its
// shape is checked and what decoding it builds is counted against the
// body budget, as decodeJSON does (a *httpError then).
func readJSONBody(r *http.Request) ([]byte, error) {
	data, err := readBody(r)
	if err != nil {
		return nil, err
	}
	sh, err := checkJSONShape(data)
	if err != nil {
		return nil, err
	}
	if m, ok := r.Body.(*maxBytesMarker); ok {
		if err := m.charge(decodedCost(sh), sh); err != nil {
			return nil, err
		}
	}
	return data, nil
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
