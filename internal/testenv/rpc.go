package testenv

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/x/llama/lib"
)

// RPCServer returns llama.cpp's rpc-server built beside the library (with
// libggml-rpc). A missing one fails the test with the command that builds
// it: the tests never build it themselves, since a test process that loaded
// the library before libggml-rpc existed has no RPC backend, and the first
// run would fail where the second passes. The RPC tests sit behind the
// "rpc" build tag; go run ./internal/cmd/testprep prepares them.
func RPCServer(t testing.TB) string {
	t.Helper()
	dir := LibraryDir(t)
	if _, err := lib.RPCPath(dir); err != nil {
		t.Fatalf("testenv: libggml-rpc: %v; build it with `go run ./internal/cmd/testprep` (or `go run ./lib/cmd/llama-install -rpc`)", err)
	}
	p, err := lib.RPCServerPath(dir)
	if err != nil {
		t.Fatalf("testenv: %v; build it with `go run ./internal/cmd/testprep` (or `go run ./lib/cmd/llama-install -rpc`)", err)
	}
	return p
}

// RPCWorker is an rpc-server on 127.0.0.1 that a test started; the test's
// cleanup stops it.
type RPCWorker struct {
	Addr string // 127.0.0.1:port
	bin  string
	port int
	t    testing.TB
	cmd  *exec.Cmd
	log  *Buffer // written by exec's copier while the test reads it
}

// StartRPCWorker starts an rpc-server with one thread on a free port of
// 127.0.0.1 and waits until it listens.
func StartRPCWorker(t testing.TB) *RPCWorker {
	t.Helper()
	w := &RPCWorker{bin: RPCServer(t), t: t}
	t.Cleanup(func() {
		if t.Failed() && w.log != nil {
			t.Logf("testenv: %s's output:\n%s", w, w.log)
		}
		w.Kill()
	})
	// A port found free can be taken before the worker binds it, by a
	// worker another test package starts at the same time: then the
	// worker exits and another port is tried.
	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		w.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		w.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(w.port))
		err = w.start()
		if err == nil {
			return w
		}
		if !errors.Is(err, errPortTaken) || try == 5 {
			t.Fatalf("testenv: %v", err)
		}
	}
}

// errPortTaken is start's error when another process holds the port.
var errPortTaken = errors.New("the port is taken")

// Start starts the worker again, after Kill, on its port and waits until
// it listens.
func (w *RPCWorker) Start() {
	w.t.Helper()
	if err := w.start(); err != nil {
		w.t.Fatalf("testenv: %v", err)
	}
}

func (w *RPCWorker) start() error {
	w.log = &Buffer{}
	w.cmd = exec.Command(w.bin, "-H", "127.0.0.1", "-p", strconv.Itoa(w.port), "-t", "1")
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.Dir = filepath.Dir(w.bin)
	w.cmd.SysProcAttr = workerAttr()
	if err := w.cmd.Start(); err != nil {
		return fmt.Errorf("starting rpc-server: %v", err)
	}
	done := make(chan struct{})
	cmd, log := w.cmd, w.log
	go func() {
		// The exit goes into the log, which a failed test prints: a
		// worker that died of its own shows how.
		err := cmd.Wait()
		fmt.Fprintf(log, "[testenv: rpc-server exited: %v]\n", err)
		close(done)
	}()
	// A hang guard, far above the worker's start-up time.
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-done:
			w.cmd = nil
			if strings.Contains(log.String(), "Failed to create server socket") {
				return fmt.Errorf("rpc-server on %s: %w", w.Addr, errPortTaken)
			}
			return fmt.Errorf("rpc-server on %s exited: %s", w.Addr, log)
		default:
		}
		if ok, known := listensOn(cmd.Process.Pid, w.port); known {
			if ok {
				return nil
			}
		} else if c, err := net.DialTimeout("tcp", w.Addr, time.Second); err == nil {
			// A bare connection, closed at once: the worker accepts it,
			// reads no handshake and waits for the next client.
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rpc-server on %s does not listen: %s", w.Addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill ends the worker at once (SIGKILL), as a crash or a lost machine
// would, and waits until it is gone.
func (w *RPCWorker) Kill() {
	if w.cmd == nil || w.cmd.Process == nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	for range 600 { // waits while the process lingers, up to a minute
		if err := w.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.cmd = nil
}

// String names the worker, for messages.
func (w *RPCWorker) String() string { return fmt.Sprintf("rpc-server %s", w.Addr) }
