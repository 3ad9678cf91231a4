// Command record-completion records llama.cpp's llama-server answers to
// the requests of server/testdata/completion/cases.json as the golden
// files beside it, for TestCompletionGolden of package server, which
// requires this server to answer the same requests the same way.
//
// It is run by hand from the repository's root, never in CI. It needs the
// llama-server built from the pinned llama.cpp source beside the library
// (go run ./lib/cmd/llama-install -server), or another one named by -bin,
// and the test model stories260K.gguf ($LLAMA_TEST_MODELS, or -model):
//
//	go run ./internal/cmd/record-completion
//
// For each case it starts a fresh llama-server on a free 127.0.0.1 port
// with -m MODEL and the file's flags, sends the case's request and writes
// the exchange, normalized (see package wiregolden), into NAME.golden.
// -run NAME records one case. The requests and flags are edited in the
// file itself.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/x/llama/internal/refserver"
	"github.com/x/llama/internal/wiregolden"
)

func main() {
	bin := flag.String("bin", "", "llama-server binary (default: the one `go run ./lib/cmd/llama-install -server` built beside the library)")
	model := flag.String("model", "", "model file (default: stories260K.gguf in $LLAMA_TEST_MODELS)")
	path := flag.String("file", "server/testdata/completion/cases.json", "cases file")
	only := flag.String("run", "", "record only the case of this name")
	logFile := flag.String("log", "", "file for llama-server's log (default: discarded)")
	flag.Parse()
	if err := refserver.Defaults(bin, model); err != nil {
		log.Fatal(err)
	}
	if err := run(*bin, *model, *path, *only, *logFile); err != nil {
		log.Fatal(err)
	}
}

func run(bin, model, path, only, logFile string) error {
	f, err := wiregolden.ReadFile(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	recorded := 0
	for _, c := range f.Cases {
		if only != "" && c.Name != only {
			continue
		}
		args := append(append([]string{}, f.Args...), f.PlainArgs...)
		if c.Tools {
			args = append(append(append([]string{}, f.Args...), f.ToolsArgs...), "--chat-template-file", filepath.Join(dir, wiregolden.ToolsTemplate))
		}
		// A fresh llama-server per case: an answer does not depend on
		// what an earlier one left in a slot.
		var got string
		err := refserver.With(bin, model, logFile, args, func(base string) (err error) {
			got, err = wiregolden.Transcript(base, c.Path, c.Body)
			return err
		})
		if err != nil {
			return fmt.Errorf("case %s: %w", c.Name, err)
		}
		if err := os.WriteFile(wiregolden.Golden(dir, c.Name), []byte(got), 0o644); err != nil {
			return err
		}
		log.Printf("%s recorded", c.Name)
		recorded++
	}
	if recorded == 0 {
		return fmt.Errorf("no case named %q", only)
	}
	return nil
}
