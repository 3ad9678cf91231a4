// Command record-llamaserver records llama.cpp's llama-server answers to the
// chat requests of server/testdata/llamaserver/chat.json, for the
// differential test of package server (TestLlamaServerDifferential), which
// requires this server to answer the same requests with the same content.
//
// It is run by hand from the repository's root, never in CI. It needs the
// llama-server built from the pinned llama.cpp source beside the library
// (go run ./lib/cmd/llama-install -server), or another one named by -bin,
// and the test model stories260K.gguf ($LLAMA_TEST_MODELS, or -model):
//
//	go run ./internal/cmd/record-llamaserver
//
// It starts llama-server on a free 127.0.0.1 port with the flags written in
// the file ("args"), sends each case's request to /v1/chat/completions
// (and again streamed) and writes its answer's choices[0].message.content,
// the streamed content, finish reason and token counts back into the file. The requests and flags are
// edited in the file itself.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/lib"
)

// file is server/testdata/llamaserver/chat.json.
type file struct {
	Comment string   `json:"comment"`
	Args    []string `json:"args"` // llama-server flags besides -m and --port
	Cases   []tcase  `json:"cases"`
}

type tcase struct {
	Name    string          `json:"name"`
	Request json.RawMessage `json:"request"`
	Want    *answer         `json:"want,omitempty"`
}

type answer struct {
	Content          string `json:"content"`
	StreamContent    string `json:"stream_content"` // the content deltas of the same request streamed
	FinishReason     string `json:"finish_reason"`
	CompletionTokens int    `json:"completion_tokens"`
	PromptTokens     int    `json:"prompt_tokens"`
}

func main() {
	bin := flag.String("bin", "", "llama-server binary (default: the one `go run ./lib/cmd/llama-install -server` built beside the library)")
	model := flag.String("model", "", "model file (default: stories260K.gguf in $LLAMA_TEST_MODELS, else in ../shared/models)")
	path := flag.String("file", "server/testdata/llamaserver/chat.json", "cases file to fill")
	logFile := flag.String("log", "", "file for llama-server's log (default: discarded)")
	flag.Parse()
	if err := defaults(bin, model); err != nil {
		log.Fatal(err)
	}
	if err := run(*bin, *model, *path, *logFile); err != nil {
		log.Fatal(err)
	}
}

// defaults fills an empty -bin with the installed llama-server and an
// empty -model with the shared test model.
func defaults(bin, model *string) error {
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
			dir = filepath.Join("..", "shared", "models")
		}
		*model = filepath.Join(dir, "stories260K.gguf")
	}
	if _, err := os.Stat(*model); err != nil {
		return fmt.Errorf("-model: %w", err)
	}
	return nil
}

func run(bin, model, path, logFile string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// A fresh llama-server for each request: answers do not depend on
	// what an earlier request left in the prompt cache (and the pinned
	// llama-server was seen to crash on some sequences of requests).
	for i := range f.Cases {
		c := &f.Cases[i]
		var a *answer
		err := withServer(bin, model, logFile, f.Args, func(base string) (err error) {
			a, err = ask(base, c.Request)
			return err
		})
		if err != nil {
			return fmt.Errorf("case %s: %w", c.Name, err)
		}
		err = withServer(bin, model, logFile, f.Args, func(base string) (err error) {
			a.StreamContent, err = askStream(base, c.Request)
			return err
		})
		if err != nil {
			return fmt.Errorf("case %s streamed: %w", c.Name, err)
		}
		c.Want = a
		log.Printf("%s: %q (%s, %d tokens)", c.Name, a.Content, a.FinishReason, a.CompletionTokens)
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

// withServer runs llama-server with args on a free port while fn runs.
func withServer(bin, model, logFile string, args []string, fn func(base string) error) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	all := append([]string{"-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Stderr = io.Discard
	if logFile != "" {
		lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer lf.Close()
		cmd.Stderr, cmd.Stdout = lf, lf
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// askStream sends req with "stream": true and joins the content deltas.
func askStream(base string, req json.RawMessage) (string, error) {
	var body map[string]any
	if err := json.Unmarshal(req, &body); err != nil {
		return "", err
	}
	body["stream"] = true
	data, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			return "", fmt.Errorf("bad chunk %q: %w", line, err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != nil {
				sb.WriteString(*c.Delta.Content)
			}
		}
	}
	return sb.String(), sc.Err()
}

func ask(base string, req json.RawMessage) (*answer, error) {
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(req))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
			PromptTokens     int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) == 0 {
		return nil, fmt.Errorf("unexpected answer: %s", body)
	}
	return &answer{Content: out.Choices[0].Message.Content, FinishReason: out.Choices[0].FinishReason,
		CompletionTokens: out.Usage.CompletionTokens, PromptTokens: out.Usage.PromptTokens}, nil
}
