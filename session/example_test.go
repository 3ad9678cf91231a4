package session_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/session"
)

// readmeSession's body is the README's session lines, character for
// character (TestReadmeSession checks it).
func readmeSession(ctx context.Context, eng *engine.Engine) error {
	// A chat session in one call (package session): history, template, Go functions as tools.
	s, err := session.NewEngine(eng, session.Options{ // or session.New(lctx, ...) on one Context
		TemplateName: "chatml", Stop: []string{"<|im_end|>"}, // a model without a template of its own
		ToolFormat: chat.FormatGeneric, // calls in JSON, for templates without a tool-call format
		ToolChoice: chat.ToolChoice{Mode: "required"}, MaxSteps: 1})
	if err != nil {
		return err
	}
	err = session.AddTool(s, "get_weather", "Current weather in a city",
		func(ctx context.Context, in struct{ City string }) (string, error) {
			return "sunny in " + in.City, nil
		})
	if err != nil {
		return err
	}
	reply, err := s.Send(ctx, "What is the weather in Paris?") // calls run, results go back
	if err != nil {
		return err
	}
	fmt.Println(reply.Calls[0].Arguments, "->", reply.Calls[0].Result) // and reply.Content
	return nil
}

// The README's session lines on stories260K, which has no template and no
// idea what a tool is: the grammar makes its call valid JSON all the same.
func ExampleNewEngine() {
	ctx := context.Background()
	model, err := llama.LoadModel(ctx, testenv.MustModel("stories260K.gguf"), llama.ModelOptions{CPUOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	eng, err := engine.New(model, engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 2048, Threads: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	if err := readmeSession(ctx, eng); err != nil {
		log.Fatal(err)
	}
	// Output:
	// { "City" : "Yes," } -> sunny in Yes,
}

// The README holds readmeSession's body as it is here, unindented once.
func TestReadmeSession(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	s := string(src)
	start := strings.Index(s, "func readmeSession(")
	require.GreaterOrEqual(t, start, 0)
	s = s[start:]
	body := s[strings.Index(s, "{\n")+2 : strings.Index(s, "\n\treturn nil\n}")]
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.ReplaceAll(strings.TrimPrefix(l, "\t"), "\t", "    "))
	}
	require.Contains(t, string(readme), strings.Join(lines, "\n"))
}

// A reply decoded into a Go type, on one Context: the type's JSON Schema
// becomes the grammar the model writes under.
func ExampleAsk() {
	ctx := context.Background()
	model, err := llama.LoadModel(ctx, testenv.MustModel("stories260K.gguf"), llama.ModelOptions{CPUOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	lctx, err := model.NewContext(llama.ContextOptions{ContextSize: 1024, Threads: 1})
	if err != nil {
		log.Fatal(err)
	}
	s, err := session.New(lctx, session.Options{TemplateName: "chatml", MaxTokens: 64})
	if err != nil {
		log.Fatal(err)
	}
	type pet struct {
		Name string `json:"name" jsonschema:"maxLength=8"`
		Legs int    `json:"legs" jsonschema:"minimum=0,maximum=8"`
	}
	p, err := session.Ask[pet](ctx, s, "Describe a pet.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", p)
	// Output:
	// {Name:It's a s Legs:3}
}
