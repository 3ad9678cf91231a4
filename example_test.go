package llama_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/testenv"
)

// modelPath is the shared stories260K test model (see internal/testenv).
var modelPath = testenv.MustModel("stories260K.gguf")

// Generate streams a greedy continuation of a prompt.
func Example() {
	ctx := context.Background()
	model, err := llama.LoadModel(ctx, modelPath, llama.ModelOptions{})
	if err != nil {
		panic(err)
	}
	defer model.Close()
	lctx, err := model.NewContext(llama.ContextOptions{ContextSize: 512, Threads: 1})
	if err != nil {
		panic(err)
	}
	var out strings.Builder
	for piece, err := range lctx.Generate(ctx, "Once upon a time", llama.GenerateOptions{MaxTokens: 16}).Seq() {
		if err != nil {
			panic(err)
		}
		out.WriteString(piece.Text)
	}
	fmt.Println(out.String())
	// Output: , there was a little girl named Lily. She loved to play
}

// A sampler chain picks tokens with llama.cpp's samplers in the given order.
func ExampleNewSamplerChain() {
	ctx := context.Background()
	model, _ := llama.LoadModel(ctx, modelPath, llama.ModelOptions{})
	defer model.Close()
	lctx, _ := model.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
	chain, err := llama.NewSamplerChain(model, llama.SamplerChainOptions{},
		llama.Penalties(64, 1.1, 0, 0), llama.TopK(40), llama.TopP(0.95, 1), llama.Temp(0.8), llama.Dist(42))
	if err != nil {
		panic(err)
	}
	defer chain.Close()
	n := 0
	for _, err := range lctx.Generate(ctx, "Once upon a time", llama.GenerateOptions{MaxTokens: 8, Sampler: chain}).Seq() {
		if err != nil {
			panic(err)
		}
		n++
	}
	fmt.Println(chain, n)
	// Output: [penalties top-k top-p temp dist] 8
}

// Sample inside the decode (backend sampling): the chain attached to
// sequence 0 picks each token in the decode's graph, and Sample returns
// it. Greedy there writes what greedy on the CPU does.
func ExampleContext_SetSampler() {
	ctx := context.Background()
	model, _ := llama.LoadModel(ctx, modelPath, llama.ModelOptions{})
	defer model.Close()
	lctx, _ := model.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
	chain, _ := llama.NewSamplerChain(model, llama.SamplerChainOptions{}, llama.Greedy())
	defer chain.Close() // detaches it
	if err := lctx.SetSampler(0, chain); err != nil {
		panic(err)
	}
	var out strings.Builder
	for piece, err := range lctx.Generate(ctx, "Once upon a time", llama.GenerateOptions{MaxTokens: 16, Sampler: chain}).Seq() {
		if err != nil {
			panic(err)
		}
		out.WriteString(piece.Text)
	}
	fmt.Println(out.String())
	// Output: , there was a little girl named Lily. She loved to play
}

// Decode a batch by hand and read the logits of its last token.
func ExampleContext_Decode() {
	ctx := context.Background()
	model, _ := llama.LoadModel(ctx, modelPath, llama.ModelOptions{})
	defer model.Close()
	lctx, _ := model.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
	toks, _ := model.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	batch := llama.NewBatch(64, 1)
	_ = batch.AddSequence(toks, 0, 0, true)
	if err := lctx.Decode(ctx, batch); err != nil {
		panic(err)
	}
	logits, _ := lctx.Logits(batch.Len() - 1)
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	piece, _ := model.TokenPiece(llama.Token(best), false)
	fmt.Printf("%d logits, next %q\n", len(logits), piece)
	// Output: 512 logits, next ","
}

// Speculative generation: n-gram drafts from the text so far, checked in one
// decode each; the output is that of plain generation.
func ExampleSpeculative() {
	ctx := context.Background()
	model, _ := llama.LoadModel(ctx, modelPath, llama.ModelOptions{})
	defer model.Close()
	lctx, _ := model.NewContext(llama.ContextOptions{ContextSize: 512, Threads: 1})
	spec := &llama.Speculative{Drafters: []llama.Drafter{&draft.NgramSimple{SizeN: 3, SizeM: 8}}}
	toks, _ := model.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	g := lctx.GenerateTokens(ctx, toks, llama.GenerateOptions{MaxTokens: 16, Speculative: spec})
	var out strings.Builder
	for piece, err := range g.Seq() {
		if err != nil {
			panic(err)
		}
		out.WriteString(piece.Text)
	}
	fmt.Println(out.String())
	// Output: , there was a little girl named Lily. She loved to play
}

// Compute threads can be placed as llama.cpp's --prio, --poll and
// --cpu-mask place them: here two threads that sleep as soon as a decode
// ends (no polling), for a process that shares its cores with other work.
// Decodes compute the same with any placement.
func ExampleThreadPoolOptions() {
	model, err := llama.LoadModel(context.Background(), modelPath, llama.ModelOptions{})
	if err != nil {
		panic(err)
	}
	defer model.Close()
	lctx, err := model.NewContext(llama.ContextOptions{
		ContextSize: 512, Threads: 2,
		ThreadPool: llama.ThreadPoolOptions{Poll: -1},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(lctx.Threads())
	// Output: 2 2
}

// Sample the outputs of several sequences of one decode at once, each
// with its own chain.
func ExampleContext_SampleParallel() {
	ctx := context.Background()
	model, _ := llama.LoadModel(ctx, modelPath, llama.ModelOptions{})
	defer model.Close()
	lctx, _ := model.NewContext(llama.ContextOptions{ContextSize: 512, Sequences: 2, Threads: 1})
	batch := llama.NewBatch(64, 1)
	var jobs []llama.SampleJob
	for seq, prompt := range []string{"Once upon a time", "The little dog"} {
		toks, _ := model.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true})
		_ = batch.AddSequence(toks, 0, seq, true)
		chain, _ := llama.NewSamplerChain(model, llama.SamplerChainOptions{}, llama.Greedy())
		defer chain.Close()
		jobs = append(jobs, llama.SampleJob{Chain: chain, Index: batch.Len() - 1})
	}
	if err := lctx.Decode(ctx, batch); err != nil {
		panic(err)
	}
	if err := lctx.SampleParallel(jobs, 2); err != nil {
		panic(err)
	}
	for _, j := range jobs {
		piece, _ := model.TokenPiece(j.Token, false)
		fmt.Printf("%q %v\n", piece, j.Err)
	}
	// Output:
	// "," <nil>
	// " was" <nil>
}
