package llama

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/x/llama/internal/capi"
	"github.com/x/llama/lib"
)

// RPC workers (llama.cpp's RPC backend, ggml-rpc).
//
// A worker is llama.cpp's rpc-server (built beside the library by
// llama-install -rpc, see lib.InstallRPC) listening on host:port. Naming
// workers in ModelOptions.RPCServers puts the model's layers on their
// devices: a worker's memory holds its share of the weights and the KV
// cache, and each decode runs its layers there. A worker serves one client
// process at a time, and the protocol has neither authentication nor
// encryption: keep workers on a private network.
//
// ggml-rpc ends the process (abort) when a worker stops answering. This
// package intercepts that: the thread that met the failure is parked for
// good instead, the call that was waiting for it returns an error with
// Code CodeRPC, and every model loaded with RPC workers is marked failed
// (Model.RPCErr): its calls return that error, and closing it leaves its
// C state allocated (freeing would wait on the lost worker): the parked
// thread and the failed model's memory are a bounded leak per failure.
// The process's connections to the workers still running are shut down,
// so that they take a new client, and loading the model again once the
// workers are back connects afresh.

// rpcHandshakeTimeout bounds the handshake with a worker at load.
const rpcHandshakeTimeout = 10 * time.Second

// The RPC protocol version this library speaks (ggml-rpc.h).
const (
	rpcProtoMajor = 6
	rpcProtoMinor = 0
)

type rpcEndpoint struct {
	gen  int       // failures so far: ggml-rpc knows this generation as key(gen)
	reg  uintptr   // ggml_backend_rpc_add_server(key(gen)), once added
	devs []uintptr // the worker's devices
	live int       // models loaded or being loaded on it (they hold its connection)
}

var rpcState struct {
	once   sync.Once
	err    error
	addMu  sync.Mutex // serializes connecting to workers
	mu     sync.Mutex // guards the rest; never held across a C call
	eps    map[string]*rpcEndpoint
	models map[*Model]struct{}
	broken chan struct{} // closed at the next failure
	// turn lets one call at a time reach the workers: ggml-rpc mixes up
	// graphs computed at once by two contexts over one connection (a
	// "malformed response"). A failure replaces it, the holder being parked.
	turn    chan struct{}
	failure string // ggml-rpc's message of the last failure
	cb      uintptr
}

func rpcInit() error {
	if err := ensureInit(); err != nil {
		return err
	}
	rpcState.once.Do(func() {
		if err := capi.LoadRPC(); err != nil {
			rpcState.err = &Error{Code: CodeRPC, Op: "rpc", Err: err}
			return
		}
		rpcState.eps = map[string]*rpcEndpoint{}
		rpcState.models = map[*Model]struct{}{}
		rpcState.broken = make(chan struct{})
		rpcState.turn = make(chan struct{}, 1)
		// ggml-rpc writes to workers without MSG_NOSIGNAL: a dead worker
		// raises SIGPIPE, which on its own threads would end the process.
		// Received here, the write fails with EPIPE instead, and the failure
		// takes the path below. (The signal no longer ends the process on
		// a write to a closed standard output either.)
		sigpipe := make(chan os.Signal, 1)
		signal.Notify(sigpipe, syscall.SIGPIPE)
		go func() {
			for range sigpipe {
			}
		}()
		rpcState.cb = purego.NewCallback(rpcAbortCallback)
		capi.GGMLSetAbortCallback(rpcState.cb)
	})
	return rpcState.err
}

// rpcAbortCallback is ggml's abort callback once RPC is in use. A failure
// of ggml-rpc (its source file names the message) parks the calling
// thread instead of letting abort() end the process; any other abort goes
// on as ggml's default does (the message on stderr, then abort).
func rpcAbortCallback(msg unsafe.Pointer) {
	s := capi.GoString(msg)
	if !strings.Contains(s, "ggml-rpc") {
		fmt.Fprintln(os.Stderr, s)
		return
	}
	rpcFail(s)
	<-make(chan struct{}) // parked for good: returning would abort
}

var rpcMsgPrefix = regexp.MustCompile(`^.*ggml-rpc[^:]*:\d+:\s*`)

// rpcFail records a failure: every endpoint gets a new generation (its
// connection is lost to the parked thread), and every model using RPC is
// failed.
func rpcFail(msg string) {
	reason := strings.TrimSpace(rpcMsgPrefix.ReplaceAllString(msg, ""))
	var eps []string
	defer func() { rpcDropConnections(eps) }()
	rpcState.mu.Lock()
	defer rpcState.mu.Unlock()
	rpcState.failure = reason
	for addr, ep := range rpcState.eps {
		if ep.reg != 0 {
			ep.gen++
			ep.reg, ep.devs = 0, nil
		}
		if ep.live > 0 {
			eps = append(eps, addr)
		}
	}
	for m := range rpcState.models {
		e := &Error{Code: CodeRPC, Op: "rpc", Msg: fmt.Sprintf("an RPC worker failed (%s; workers %s); "+
			"load the model again once the workers are back", reason, strings.Join(m.rpcServers, ", "))}
		m.rpcErr.CompareAndSwap(nil, e)
	}
	clear(rpcState.models)
	close(rpcState.broken)
	rpcState.broken = make(chan struct{})
	rpcState.turn = make(chan struct{}, 1)
}

// rpcCall runs f, a C call that may talk to workers, on its own goroutine,
// and returns an error with Code CodeRPC if a worker fails meanwhile (f
// then never returns).
func rpcCall(op string, f func()) error {
	rpcState.mu.Lock()
	broken, turn := rpcState.broken, rpcState.turn
	rpcState.mu.Unlock()
	select {
	case turn <- struct{}{}:
	case <-broken:
		return rpcFailedErr(op)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
		<-turn
	}()
	select {
	case <-done:
		return nil
	case <-broken:
		select {
		case <-done:
			return nil
		default:
		}
		return rpcFailedErr(op)
	}
}

func rpcFailedErr(op string) error {
	rpcState.mu.Lock()
	reason := rpcState.failure
	rpcState.mu.Unlock()
	return &Error{Code: CodeRPC, Op: op, Msg: "an RPC worker failed: " + reason}
}

// rpcKey is the endpoint as ggml-rpc is given it: generation g has g
// zeros before the port, so that after a failure ggml-rpc opens a new
// connection instead of reusing the one lost to the parked thread.
func rpcKey(addr string, gen int) string {
	host, port, _ := net.SplitHostPort(addr)
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strings.Repeat("0", gen) + port
}

// checkRPCEndpoint validates a worker's address: host:port, a port in
// 1..65535.
func checkRPCEndpoint(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (host == "" || strings.Contains(host, ":")) {
		// ggml-rpc splits at the first colon: IPv6 literals are not supported.
		err = errors.New("the host must be a name or an IPv4 address")
	}
	if err == nil {
		var n int
		if n, err = strconv.Atoi(port); err == nil && (n < 1 || n > 65535 || port != strconv.Itoa(n)) {
			err = errors.New("the port must be a number from 1 to 65535")
		}
	}
	if err != nil || strings.IndexByte(addr, 0) >= 0 {
		return errorf(CodeInvalid, "rpc", "invalid RPC worker address %q (want host:port): %v", addr, err)
	}
	return nil
}

// rpcHello performs the protocol's handshake with the worker at addr over
// a connection of its own, and closes it: it tells an unreachable address,
// a port where no worker listens and a worker of another version apart,
// before ggml-rpc (which would abort on each) is given the address.
func rpcHello(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, rpcHandshakeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return &Error{Code: CodeRPC, Op: "rpc", Msg: "cannot reach the RPC worker " + addr, Err: err}
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	// | command (1 byte: HELLO = 14) | size (8 bytes) | capabilities (24 bytes) |
	req := make([]byte, 1+8+24)
	req[0] = 14
	binary.LittleEndian.PutUint64(req[1:], 24)
	if _, err := conn.Write(req); err != nil {
		return &Error{Code: CodeRPC, Op: "rpc", Msg: "the RPC handshake with " + addr + " failed", Err: err}
	}
	// | size (8 bytes) = 28 | major, minor, patch, padding | capabilities (24 bytes) |
	rsp := make([]byte, 8+28)
	if _, err := io.ReadFull(conn, rsp[:8]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return &Error{Code: CodeRPC, Op: "rpc", Msg: fmt.Sprintf("%s did not answer the RPC handshake within %s "+
				"(not an RPC worker, or a worker busy with another client: a worker serves one at a time)", addr, rpcHandshakeTimeout)}
		}
		return &Error{Code: CodeRPC, Op: "rpc", Msg: addr + " is not an RPC worker (it closed the connection at the handshake)", Err: err}
	}
	if n := binary.LittleEndian.Uint64(rsp[:8]); n != 28 {
		return &Error{Code: CodeRPC, Op: "rpc", Msg: fmt.Sprintf("%s is not an RPC worker of this version "+
			"(its handshake answer has %d bytes, want 28)", addr, n)}
	}
	if _, err := io.ReadFull(conn, rsp[8:]); err != nil {
		return &Error{Code: CodeRPC, Op: "rpc", Msg: addr + " is not an RPC worker (short handshake answer)", Err: err}
	}
	major, minor, patch := rsp[8], rsp[9], rsp[10]
	if major != rpcProtoMajor || minor > rpcProtoMinor {
		return &Error{Code: CodeRPC, Op: "rpc", Msg: fmt.Sprintf("the RPC worker %s speaks protocol %d.%d.%d, this library %d.%d "+
			"(run the rpc-server of the same llama.cpp version, %s)", addr, major, minor, patch, rpcProtoMajor, rpcProtoMinor, lib.Version)}
	}
	return nil
}

// rpcConnect makes the worker at addr known to ggml-rpc and returns its
// devices.
func rpcConnect(ctx context.Context, addr string) ([]uintptr, error) {
	if err := checkRPCEndpoint(addr); err != nil {
		return nil, err
	}
	if err := rpcInit(); err != nil {
		return nil, err
	}
	rpcState.addMu.Lock()
	defer rpcState.addMu.Unlock()
	rpcState.mu.Lock()
	ep := rpcState.eps[addr]
	if ep == nil {
		ep = &rpcEndpoint{}
		rpcState.eps[addr] = ep
	}
	reg, devs, live, gen := ep.reg, ep.devs, ep.live, ep.gen
	rpcState.mu.Unlock()
	if live > 0 && reg != 0 {
		// A loaded model holds this process's connection (the worker serves
		// it alone): it answers, or the failure is reported by its calls.
		return devs, nil
	}
	if err := rpcHello(ctx, addr); err != nil {
		return nil, err
	}
	key := rpcKey(addr, gen)
	if err := rpcCall("rpc", func() { reg = capi.RPCAddServer(key) }); err != nil {
		return nil, err
	}
	if reg == 0 {
		return nil, errorf(CodeRPC, "rpc", "the RPC worker %s has no devices", addr)
	}
	devs = devs[:0:0]
	for i := range capi.BackendRegDevCount(reg) {
		devs = append(devs, capi.BackendRegDevGet(reg, i))
	}
	rpcState.mu.Lock()
	if ep.gen == gen {
		ep.reg, ep.devs = reg, devs
	}
	rpcState.mu.Unlock()
	return devs, nil
}

// AddRPCServer connects to the RPC worker at endpoint (host:port, see
// ModelOptions.RPCServers) and lists its devices with their memory. An
// unreachable address, a port where no worker listens and a worker of
// another llama.cpp version are errors with Code CodeRPC.
func AddRPCServer(ctx context.Context, endpoint string) ([]Device, error) {
	devs, err := rpcConnect(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	return rpcDescribe(endpoint, devs)
}

func rpcDescribe(endpoint string, devs []uintptr) ([]Device, error) {
	out := make([]Device, 0, len(devs))
	for _, d := range devs {
		var free, total uintptr
		if err := rpcCall("rpc", func() { capi.BackendDevMemory(d, &free, &total) }); err != nil {
			return nil, err
		}
		out = append(out, Device{Name: capi.BackendDevName(d), Description: endpoint, Type: "rpc",
			FreeMemory: uint64(free), TotalMemory: uint64(total)})
	}
	return out, nil
}

// rpcModelDevices connects to the workers of a model being loaded and
// claims them for it (see rpcRelease).
func rpcModelDevices(ctx context.Context, servers []string) (devs []uintptr, info []Device, err error) {
	if len(servers) > 16 { // GGML_RPC_MAX_SERVERS
		return nil, nil, errorf(CodeInvalid, "load model", "%d RPC servers, at most 16", len(servers))
	}
	seen := map[string]bool{}
	var claimed []string
	defer func() {
		if err != nil {
			rpcRelease(claimed)
		}
	}()
	for _, s := range servers {
		if seen[s] {
			return nil, nil, errorf(CodeInvalid, "load model", "RPC server %s named twice", s)
		}
		seen[s] = true
		d, err := rpcConnect(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		// Claimed from here: a model loading at the same time on this
		// worker shares the connection instead of knocking on the worker,
		// which serves this process's connection alone.
		rpcState.mu.Lock()
		rpcState.eps[s].live++
		rpcState.mu.Unlock()
		claimed = append(claimed, s)
		di, err := rpcDescribe(s, d)
		if err != nil {
			return nil, nil, err
		}
		devs = append(devs, d...)
		info = append(info, di...)
	}
	return devs, info, nil
}

// rpcRelease ends claims on workers: a model that failed to load, or
// closed.
func rpcRelease(servers []string) {
	rpcState.mu.Lock()
	defer rpcState.mu.Unlock()
	for _, s := range servers {
		if ep := rpcState.eps[s]; ep != nil && ep.live > 0 {
			ep.live--
		}
	}
}

// rpcTrack records a loaded model, which a failure must fail.
func rpcTrack(m *Model) {
	rpcState.mu.Lock()
	defer rpcState.mu.Unlock()
	rpcState.models[m] = struct{}{}
}

// rpcUntrack ends a model's use of its workers, at Close.
func rpcUntrack(m *Model) {
	rpcState.mu.Lock()
	delete(rpcState.models, m)
	rpcState.mu.Unlock()
	rpcRelease(m.rpcServers)
}

// RPCErr returns the failure of a worker of the model (an error with Code
// CodeRPC), or nil while its workers answer or when it uses none. A failed
// model answers every call with this error: close it and load it again.
func (m *Model) RPCErr() error {
	if e := m.rpcErr.Load(); e != nil {
		return e
	}
	return nil
}

// RPCDevices lists the devices of the model's RPC workers, with their
// memory as it was at load (nil without RPC workers).
func (m *Model) RPCDevices() []Device { return append([]Device(nil), m.rpcDevices...) }

// rpcGuard runs f, a C call of the model or of one of its contexts that
// may reach its workers (a decode, a state's save or restore, a change of
// the KV memory, adapters, control vectors, mtmd's evaluation): every such
// call goes through it, so that a worker's death returns an error with
// Code CodeRPC instead of blocking for good. Without workers it costs a
// length check and f's call; f escapes, so a caller on a hot path keeps
// its closure out of the local path (see rpcCompute).
func (m *Model) rpcGuard(op string, f func()) error {
	if err := m.rpcFailed(op); err != nil {
		return err
	}
	if len(m.rpcServers) == 0 {
		f()
		return nil
	}
	err := rpcCall(op, f)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			m.rpcErr.CompareAndSwap(nil, e)
		}
	}
	return err
}

// rpcFailed is the error of op on a model whose RPC worker failed (nil
// otherwise): a call that checks its input in Go first says so before
// judging the input.
func (m *Model) rpcFailed(op string) error {
	if len(m.rpcServers) == 0 {
		return nil
	}
	if e := m.rpcErr.Load(); e != nil {
		return &Error{Code: CodeRPC, Op: op, Msg: e.Msg}
	}
	return nil
}

// rpcCompute runs call (llama_decode or llama_encode) of c on b under the
// guard and waits for the result: ggml-rpc computes asynchronously, and
// waiting keeps a worker's failure inside the guarded call instead of in
// the next call that reads the outputs. Callers call it only with RPC
// workers, so that the closure's allocation stays off the local path.
func (c *Context) rpcCompute(op string, call func(capi.Context, capi.Batch) int32, b *Batch) (int32, error) {
	var rc int32
	err := c.model.rpcGuard(op, func() {
		if rc = call(c.ptr, b.c()); rc == 0 {
			capi.Synchronize(c.ptr)
		}
	})
	return rc, err
}
