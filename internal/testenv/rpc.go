package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/x/llama/lib"
)

var (
	rpcOnce sync.Once
	rpcErr  error
)

// RPCServer returns llama.cpp's rpc-server built beside the library (with
// libggml-rpc), building both once if they are missing, as
// go run ./lib/cmd/llama-install -rpc (which .ci/run runs) does.
func RPCServer(t testing.TB) string {
	t.Helper()
	dir := LibraryDir(t)
	rpcOnce.Do(func() {
		if _, err := lib.RPCServerPath(dir); err == nil {
			if _, err := lib.RPCPath(dir); err == nil {
				return
			}
		}
		src, err := llamaSrc()
		if err != nil {
			rpcErr = err
			return
		}
		unlock, err := lockFile(filepath.Join(os.TempDir(), "go-llama-rpc.lock"))
		if err != nil {
			rpcErr = err
			return
		}
		defer unlock()
		_, rpcErr = lib.InstallRPC(context.Background(), lib.RPCOptions{Dir: dir, Source: src, Progress: os.Stderr})
	})
	if rpcErr != nil {
		t.Fatalf("testenv: rpc-server: %v (build it with `go run ./lib/cmd/llama-install -rpc`)", rpcErr)
	}
	p, err := lib.RPCServerPath(dir)
	if err != nil {
		t.Fatalf("testenv: %v", err)
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	w := &RPCWorker{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bin: RPCServer(t), port: port, t: t}
	w.Start()
	t.Cleanup(w.Kill)
	return w
}

// Start starts the worker (again, after Kill) on its port and waits until
// it accepts connections.
func (w *RPCWorker) Start() {
	w.t.Helper()
	w.log = &Buffer{}
	w.cmd = exec.Command(w.bin, "-H", "127.0.0.1", "-p", strconv.Itoa(w.port), "-t", "1")
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.Dir = filepath.Dir(w.bin)
	w.cmd.SysProcAttr = workerAttr()
	if err := w.cmd.Start(); err != nil {
		w.t.Fatalf("testenv: starting rpc-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	// A hang guard, far above the worker's start-up time.
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-done:
			w.t.Fatalf("testenv: rpc-server on %s exited: %s", w.Addr, w.log)
		default:
		}
		// A bare connection, closed at once: the worker accepts it, reads
		// no handshake and waits for the next client.
		if c, err := net.DialTimeout("tcp", w.Addr, time.Second); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("testenv: rpc-server on %s does not listen: %s", w.Addr, w.log)
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
