package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Helpers that run this server's binary and llama.cpp's llama-server the
// same way, for the tests that compare them.

// ourServer is this package's binary, built once per test run.
func ourServer(t *testing.T) string {
	t.Helper()
	return buildServer(t)
}

// runServer runs bin (either server) in dir with args on a free port of
// the loopback, waits until /health answers 200, and returns its URL. The
// process is interrupted at the end of the test.
func runServer(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	logPath := filepath.Join(t.TempDir(), "server.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	// A bound that only detects a server that never comes up.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited before it was healthy:\n%s", bin, b)
		default:
		}
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s not healthy after 2 minutes:\n%s", bin, b)
		}
	}
}
