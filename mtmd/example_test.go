//go:build mtmd

package mtmd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/mtmd"
)

// An image in a prompt: load the text model and its projector, decode the
// image, tokenize the prompt into chunks and generate after it.
func Example() {
	ctx := context.Background()
	model, err := llama.LoadModel(ctx, testenv.MustModel("stories260K.gguf"), llama.ModelOptions{})
	if err != nil {
		panic(err)
	}
	defer model.Close()
	// A tiny random projector for this model stands in for a real mmproj file.
	dir, _ := os.MkdirTemp("", "mtmd-example")
	defer os.RemoveAll(dir)
	projPath := filepath.Join(dir, "mmproj.gguf")
	if err := gguf.WriteTinyProjector(projPath, gguf.TinyProjectorOptions{TextEmbd: 64}); err != nil {
		panic(err)
	}
	proj, err := mtmd.LoadProjector(ctx, model, projPath, mtmd.ProjectorOptions{CPUOnly: true})
	if err != nil {
		panic(err) // e.g. libmtmd not installed: go run ./lib/cmd/llama-install -mtmd
	}
	defer proj.Close()

	pixels := make([]byte, 64*64*3) // a black 64x64 image; NewMedia takes PNG, JPEG, WAV, MP3... bytes
	img, err := mtmd.NewImage(64, 64, pixels, "black")
	if err != nil {
		panic(err)
	}
	defer img.Close()

	prompt := "Once upon a time " + proj.Marker() + " there was"
	chunks, err := proj.Tokenize(prompt, []*mtmd.Media{img}, mtmd.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		panic(err)
	}
	defer chunks.Close()
	for _, c := range chunks.All() {
		fmt.Println(c.Type, c.NTokens)
	}

	lctx, err := model.NewContext(llama.ContextOptions{ContextSize: 512})
	if err != nil {
		panic(err)
	}
	n := 0
	for _, err := range mtmd.Generate(ctx, lctx, proj, prompt, []*mtmd.Media{img}, llama.GenerateOptions{MaxTokens: 8}) {
		if err != nil {
			panic(err)
		}
		n++
	}
	fmt.Println("generated", n, "pieces")
	// Output:
	// text 6
	// image 16
	// text 3
	// generated 8 pieces
}
