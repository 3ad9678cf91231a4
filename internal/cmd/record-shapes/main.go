// Command record-shapes records what llama.cpp's llama-server answers on
// GET /v1/models, /models, /slots and /metrics, into
// server/testdata/llamaserver/shapes.json, for TestShapesAsLlamaServer of
// package server, which requires this server's answers to have the same
// keys and value types.
//
// It is run by hand from the repository's root, never in CI. It needs the
// llama-server built from the pinned llama.cpp source beside the library
// (go run ./lib/cmd/llama-install -server), or another one named by -bin,
// and the test model stories260K.gguf ($LLAMA_TEST_MODELS, or -model):
//
//	go run ./internal/cmd/record-shapes
//
// It starts llama-server on a free 127.0.0.1 port with -m MODEL and the
// flags in the file's "args", reads the endpoints once before any request
// ("idle") and once after the file's "request" was sent to /completion
// ("after"), and writes the answers into the file. The flags and the request
// are edited in the file itself.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/x/llama/internal/refserver"
)

// file is server/testdata/llamaserver/shapes.json.
type file struct {
	Comment string          `json:"comment"`
	Args    []string        `json:"args"`    // llama-server flags besides -m, --host and --port
	Request json.RawMessage `json:"request"` // sent to /completion between the two readings
	Idle    *reading        `json:"idle,omitempty"`
	After   *reading        `json:"after,omitempty"`
}

// reading is one answer per endpoint: JSON ones as they came, /metrics as
// its text.
type reading struct {
	Models   json.RawMessage `json:"/v1/models"`
	ModelsV0 json.RawMessage `json:"/models"`
	Slots    json.RawMessage `json:"/slots"`
	Metrics  string          `json:"/metrics"`
}

func main() {
	bin := flag.String("bin", "", "llama-server binary (default: the one `go run ./lib/cmd/llama-install -server` built beside the library)")
	model := flag.String("model", "", "model file (default: stories260K.gguf in $LLAMA_TEST_MODELS)")
	path := flag.String("file", "server/testdata/llamaserver/shapes.json", "file to fill")
	flag.Parse()
	if err := refserver.Defaults(bin, model); err != nil {
		log.Fatal(err)
	}
	if err := run(*bin, *model, *path); err != nil {
		log.Fatal(err)
	}
}

func run(bin, model, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	err = refserver.With(bin, model, "", f.Args, func(base string) error {
		if f.Idle, err = read(base); err != nil {
			return fmt.Errorf("idle: %w", err)
		}
		if _, err := get(base+"/completion", f.Request); err != nil {
			return fmt.Errorf("request: %w", err)
		}
		if f.After, err = read(base); err != nil {
			return fmt.Errorf("after: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

func read(base string) (*reading, error) {
	var r reading
	for _, e := range []struct {
		path string
		dst  *json.RawMessage
	}{{"/v1/models", &r.Models}, {"/models", &r.ModelsV0}, {"/slots", &r.Slots}} {
		b, err := get(base+e.path, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "    ", "  "); err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
		*e.dst = buf.Bytes()
	}
	b, err := get(base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	r.Metrics = string(b)
	return &r, nil
}

// get GETs url, or POSTs body to it when there is one.
func get(url string, body []byte) ([]byte, error) {
	var resp *http.Response
	var err error
	if body != nil {
		resp, err = http.Post(url, "application/json", bytes.NewReader(body))
	} else {
		resp, err = http.Get(url)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return b, nil
}
