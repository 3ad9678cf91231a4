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
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/x/llama/internal/refserver"
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
	model := flag.String("model", "", "model file (default: stories260K.gguf in $LLAMA_TEST_MODELS)")
	path := flag.String("file", "server/testdata/llamaserver/chat.json", "cases file to fill")
	logFile := flag.String("log", "", "file for llama-server's log (default: discarded)")
	flag.Parse()
	if err := refserver.Defaults(bin, model); err != nil {
		log.Fatal(err)
	}
	if err := run(*bin, *model, *path, *logFile); err != nil {
		log.Fatal(err)
	}
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
		err := refserver.With(bin, model, logFile, f.Args, func(base string) (err error) {
			a, err = ask(base, c.Request)
			return err
		})
		if err != nil {
			return fmt.Errorf("case %s: %w", c.Name, err)
		}
		err = refserver.With(bin, model, logFile, f.Args, func(base string) (err error) {
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
