package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/server"
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// buildServer builds the server binary once for the package's tests and
// returns its path.
func buildServer(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "llama-server-test-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "server")
		binary.out, binary.err = exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
	})
	require.NoError(t, binary.err, "%s", binary.out)
	return binary.path
}

// child is a running server binary.
type child struct {
	base string          // the address it logged once it served
	logs *testenv.Buffer // its standard error so far
	stop func() error    // SIGTERM, then its whole log and its exit status
}

// startServer runs the binary with args and --port 0 (it picks a free
// port and logs its address once the model is loaded and it serves) and
// waits for that address. The child is stopped when the test ends, if the
// test has not stopped it.
func startServer(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--port", "0")...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{logs: &testenv.Buffer{}}
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			c.logs.Write([]byte(line + "\n"))
			if _, a, ok := strings.Cut(line, "msg=listening addr="); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	var once sync.Once
	var waitErr error
	c.stop = func() error {
		once.Do(func() {
			waitErr = cmd.Process.Signal(syscall.SIGTERM)
			<-done
			if err := cmd.Wait(); waitErr == nil {
				waitErr = err
			}
		})
		return waitErr
	}
	t.Cleanup(func() { c.stop() })
	base, ok := <-addr
	require.True(t, ok, "server exited before listening: %s", c.logs.String())
	c.base = base
	return c
}

// fakeHub serves repos as the Hugging Face hub for the test: -hf and the
// other pulls reach it, with no token and not offline.
func fakeHub(t *testing.T, repos map[string]*hubtest.Repo) {
	t.Helper()
	h := hubtest.New(t, repos)
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
}

// serveCompletion starts a server with opts, posts body to /completion
// and returns the answer, which must be a 200.
func serveCompletion(t *testing.T, opts server.Options, body string) *bytes.Buffer {
	t.Helper()
	srv, err := server.New(context.Background(), opts)
	require.NoError(t, err)
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/completion", strings.NewReader(body)))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	return rec.Body
}
