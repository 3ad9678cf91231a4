// Command testprep prepares everything the tagged test suites need, in one
// go, before any test process loads the library:
//
//	go run ./internal/cmd/testprep
//
// It installs the pinned library if missing, builds libggml-rpc and
// rpc-server, libmtmd, llama-server and llama.cpp's web UI from the pinned
// source (llama-install -rpc -server -ui), and fetches the real models
// (testmodels). Each step does nothing when what it makes is already there
// and matches its inputs, so a second run takes seconds.
//
// The plain go test ./... needs none of it. The suites behind these build
// tags do:
//
//	rpc        libggml-rpc and rpc-server
//	mtmd       libmtmd
//	realmodel  Gemma 3 270M, all-MiniLM-L6-v2 and llama-server
//	browser    llama.cpp's web UI (and chromium, from the system)
//
// The llama.cpp source comes from $LLAMA_CPP_SRC, else from
// ../shared/tools/llama-cpp-src beside the module, as for llama-install.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/x/llama/internal/realmodel"
)

func main() {
	jobs := flag.Int("j", 0, "files compiled at once (default 2)")
	flag.Parse()
	args := []string{"run", "./lib/cmd/llama-install", "-rpc", "-server", "-ui"}
	if *jobs > 0 {
		args = append(args, "-j", fmt.Sprint(*jobs))
	}
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fail(fmt.Errorf("testprep: llama-install: %w", err))
	}
	paths, err := realmodel.Fetch(context.Background(), realmodel.Options{Log: os.Stderr})
	if err != nil {
		fail(err)
	}
	for _, p := range paths {
		fmt.Fprintln(os.Stderr, "testprep: model", p)
	}
	fmt.Fprintln(os.Stderr, "testprep: ready for go test -tags rpc,mtmd,realmodel,browser")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
