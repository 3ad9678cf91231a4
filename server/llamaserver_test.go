package server

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

// startLlamaServer runs bin on a free port until the test ends and returns
// its URL once /health answers 200.
func startLlamaServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	logPath := filepath.Join(t.TempDir(), "llama-server.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("llama-server exited before it was healthy:\n%s", tailText(string(b), 3000))
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
			t.Fatalf("llama-server not healthy after 2 minutes:\n%s", tailText(string(b), 3000))
		}
	}
}

func tailText(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// gemmaTemplateFile is the Gemma 3 instruction template (as published with
// the model; the GGUF of the PyPI package has none) that the real-model
// chats and the web page's Gemma test use.
func gemmaTemplateFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "gemma3-chat-template.jinja"))
	require.NoError(t, err)
	return p
}
