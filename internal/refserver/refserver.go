// Package refserver runs the reference llama-server (built from the pinned
// source by go run ./lib/cmd/llama-install -server) for the commands that
// record its answers as test data.
package refserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/x/llama/lib"
)

// Defaults fills an empty bin with the installed llama-server and an empty
// model with stories260K.gguf of $LLAMA_TEST_MODELS, and checks that the
// model exists.
func Defaults(bin, model *string) error {
	if *bin == "" {
		dir, err := lib.Find("", lib.CPU)
		if err != nil {
			return fmt.Errorf("-bin: %w", err)
		}
		if *bin, err = lib.ServerPath(dir); err != nil {
			return fmt.Errorf("-bin: %w", err)
		}
	}
	if *model == "" {
		dir := os.Getenv("LLAMA_TEST_MODELS")
		if dir == "" {
			return errors.New("-model: none given and LLAMA_TEST_MODELS (the folder of the test models) is not set")
		}
		*model = filepath.Join(dir, "stories260K.gguf")
	}
	if _, err := os.Stat(*model); err != nil {
		return fmt.Errorf("-model: %w", err)
	}
	return nil
}

// With runs llama-server bin on model with args on a free port of the
// loopback while fn runs, giving fn the server's base URL once /health
// answers 200. Its output is appended to logFile, or discarded when "".
func With(bin, model, logFile string, args []string, fn func(base string) error) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	all := append([]string{"-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if logFile != "" {
		lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer lf.Close()
		cmd.Stdout, cmd.Stderr = lf, lf
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitHealthy(base); err != nil {
		return err
	}
	return fn(base)
}

func waitHealthy(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("llama-server did not become healthy in 60 s")
}
