package testenv

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// RunHTTPServer runs bin (llama-server, or a server of this repository)
// in dir ("" for the test's own) with args and --host/--port on a free
// port of the loopback, and returns its URL once /health answers 200. The
// process is interrupted when the test ends (killed after 20 s). A server
// that exits first, or is not healthy within two minutes (a bound that
// only detects one that never comes up), fails the test with the end of
// its log.
func RunHTTPServer(t testing.TB, bin, dir string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logPath := filepath.Join(t.TempDir(), "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	logTail := func() string {
		b, _ := os.ReadFile(logPath)
		if len(b) > 3000 {
			return "..." + string(b[len(b)-3000:])
		}
		return string(b)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("%s exited before it was healthy:\n%s", bin, logTail())
		default:
		}
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy after 2 minutes:\n%s", bin, logTail())
		}
	}
}
