package engine_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// Four goroutines generate at once on one model: their tokens share the
// engine's decodes.
func Example() {
	ctx := context.Background()
	model, err := llama.LoadModel(ctx, testenv.MustModel("stories260K.gguf"), llama.ModelOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	eng, err := engine.New(model, engine.Options{Parallel: 4, Context: llama.ContextOptions{ContextSize: 1024, Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	prompts := []string{"Once upon a time", "The cat", "Lily and Tom", "One day"}
	out := make([]string, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			toks, err := model.Tokenize(p, llama.TokenizeOptions{AddSpecial: true})
			if err != nil {
				log.Fatal(err)
			}
			req := engine.NewRequest(toks)
			req.Params.Temperature = 0 // greedy
			req.NPredict = 12
			text := p
			for ev, err := range eng.Generate(ctx, req) {
				if err != nil {
					log.Fatal(err)
				}
				text += ev.Text
			}
			out[i] = text
		})
	}
	wg.Wait()
	fmt.Println(out[0])
	// Output: Once upon a time, there was a little girl named Lily. She
}
