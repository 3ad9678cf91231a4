// Command structured asks a model for a value of a Go struct type: the
// grammar made from the type's JSON Schema guarantees output that
// unmarshals into it, whatever the model.
//
//	go run ./examples/structured -m ../shared/models/stories260K.gguf
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/schema"
)

// Character is what we ask the model for.
type Character struct {
	Name    string   `json:"name" jsonschema:"maxLength=24"`
	Age     int      `json:"age" jsonschema:"minimum=1,maximum=99"`
	Friends []string `json:"friends" jsonschema:"maxItems=3"`
	Brave   bool     `json:"brave"`
}

func main() {
	model := flag.String("m", "", "GGUF model")
	prompt := flag.String("p", "Once upon a time there was a girl. Describe her as JSON:", "prompt")
	seed := flag.Uint("seed", 42, "seed")
	threads := flag.Int("t", 0, "threads (0: all CPUs)")
	flag.Parse()
	if *model == "" {
		flag.Usage()
		fmt.Fprintln(os.Stderr, "structured: -m is required")
		os.Exit(1)
	}
	// Installing the library is explicit: this program installs it into
	// the cache folder on its first run (with a progress bar on stderr).
	if err := llama.Init(llama.LibraryOptions{Install: true}); err != nil {
		fmt.Fprintln(os.Stderr, "structured:", err)
		os.Exit(1)
	}
	if err := run(context.Background(), os.Stdout, *model, *prompt, uint32(*seed), *threads); err != nil {
		fmt.Fprintln(os.Stderr, "structured:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, path, prompt string, seed uint32, threads int) error {
	c, err := ask[Character](ctx, path, prompt, seed, threads)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%+v\n", c)
	return nil
}

// ask generates a T from prompt under T's grammar and decodes it.
func ask[T any](ctx context.Context, path, prompt string, seed uint32, threads int) (T, error) {
	var v T
	m, err := llama.LoadModel(ctx, path, llama.ModelOptions{})
	if err != nil {
		return v, err
	}
	defer m.Close()
	lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 1024, Threads: threads})
	if err != nil {
		return v, err
	}
	g, err := schema.GrammarFor[T]()
	if err != nil {
		return v, err
	}
	chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, g.Sampler(), llama.TopK(40), llama.Temp(0.7), llama.Dist(seed))
	if err != nil {
		return v, err
	}
	var out strings.Builder
	for p, err := range lctx.Generate(ctx, prompt, llama.GenerateOptions{MaxTokens: 512, Sampler: chain}).Seq() {
		if err != nil {
			return v, err
		}
		out.WriteString(p.Text)
	}
	if err := json.Unmarshal([]byte(out.String()), &v); err != nil {
		return v, fmt.Errorf("decoding %q: %w", out.String(), err)
	}
	return v, nil
}
