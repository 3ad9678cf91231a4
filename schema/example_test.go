package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/schema"
)

// modelPath is the shared stories260K test model (see internal/testenv).
var modelPath = testenv.MustModel("stories260K.gguf")

// Ask for a value of a Go type: the grammar guarantees JSON that decodes
// into it, whatever the model.
func ExampleGrammarFor() {
	type Answer struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	ctx := context.Background()
	model, _ := llama.LoadModel(ctx, modelPath, llama.ModelOptions{})
	defer model.Close()
	lctx, _ := model.NewContext(llama.ContextOptions{ContextSize: 512, Threads: 1})
	g, err := schema.GrammarFor[Answer]()
	if err != nil {
		panic(err)
	}
	chain, err := llama.NewSamplerChain(model, llama.SamplerChainOptions{}, g.Sampler(), llama.Greedy())
	if err != nil {
		panic(err)
	}
	defer chain.Close()
	var out strings.Builder
	for p, err := range lctx.Generate(ctx, "Lily", llama.GenerateOptions{MaxTokens: 200, Sampler: chain}).Seq() {
		if err != nil {
			panic(err)
		}
		out.WriteString(p.Text)
	}
	var a Answer
	fmt.Println(json.Unmarshal([]byte(out.String()), &a))
	// Output: <nil>
}
