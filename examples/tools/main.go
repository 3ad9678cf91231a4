// Command tools runs a tool-calling loop with package session: the model
// is offered a Go function, its first answer is constrained by a grammar
// to a well-formed call (tool choice "required"), the call is decoded into
// the function's Go type and run, its result goes back into the
// conversation, and the model answers.
//
//	go run ./examples/tools -m model.gguf
//	go run ./examples/tools -m gemma-3-270m-q4_k_m.gguf --chat-template-file server/testdata/gemma3-chat-template.jinja
//	go run ./examples/tools -m stories260K.gguf --chat-template chatml
//
// A model's own template is used unless --chat-template-file (a Jinja
// file) or --chat-template (a llama.cpp built-in name) gives another; a
// model without one needs either. Templates with a tool-call format of
// their own are used with it; those without one (Gemma 3, chatml) get
// llama.cpp's generic JSON format, chosen here explicitly with
// session.Options.ToolFormat. stories260K shows the mechanics even though
// it has no idea what a tool is.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/sampling"
	"github.com/x/llama/session"
)

type config struct {
	model, question        string
	templateFile, template string
	seed                   uint32
	threads                int
}

// weatherArgs are get_weather's arguments; their JSON Schema, given to
// the model, comes from this type.
type weatherArgs struct {
	City string `json:"city" jsonschema:"maxLength=20,description=the city's name"`
}

func getWeather(_ context.Context, in weatherArgs) (string, error) {
	return fmt.Sprintf(`{"city": %q, "temperature_c": 21, "sky": "sunny"}`, in.City), nil
}

func main() {
	var c config
	var seed uint
	flag.StringVar(&c.model, "m", "", "GGUF model")
	flag.StringVar(&c.question, "q", "What is the weather in Paris?", "the user's question")
	flag.StringVar(&c.templateFile, "chat-template-file", "", "a Jinja chat template file (default: the model's)")
	flag.StringVar(&c.template, "chat-template", "", "a llama.cpp built-in chat template name (chatml, llama3, ...)")
	flag.UintVar(&seed, "seed", 1, "seed")
	flag.IntVar(&c.threads, "t", 0, "threads (0: all CPUs)")
	flag.Parse()
	if c.model == "" {
		flag.Usage()
		fmt.Fprintln(os.Stderr, "tools: -m is required")
		os.Exit(1)
	}
	c.seed = uint32(seed)
	// Installing the library is explicit: this program installs it into
	// the cache folder on its first run (with a progress bar on stderr).
	if err := llama.Init(llama.LibraryOptions{Install: true}); err != nil {
		fmt.Fprintln(os.Stderr, "tools:", err)
		os.Exit(1)
	}
	if err := run(context.Background(), os.Stdout, c); err != nil {
		fmt.Fprintln(os.Stderr, "tools:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, c config) error {
	m, err := llama.LoadModel(ctx, c.model, llama.ModelOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	// session.New would refuse a model without a template naming its
	// Options alone; name this program's flags too.
	if src, ok := m.ChatTemplate(""); c.templateFile == "" && c.template == "" && (!ok || strings.TrimSpace(src) == "") {
		return &llama.Error{Code: llama.CodeInvalid, Msg: "the model has no chat template: give --chat-template-file " +
			"(session.Options.TemplateFile) or --chat-template (session.Options.TemplateName)"}
	}
	lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 2048, Threads: c.threads})
	if err != nil {
		return err
	}
	params := sampling.Defaults()
	params.Seed = c.seed
	s, err := session.New(lctx, session.Options{
		TemplateFile: c.templateFile, TemplateName: c.template,
		ToolFormat: chat.FormatGeneric, // for templates without a tool-call format
		ToolChoice: chat.ToolChoice{Mode: "required"},
		MaxSteps:   1, // one call, then the answer
		MaxTokens:  256,
		Sampling:   params,
		Stop:       []string{"<|im_end|>"}, // chatml's end of turn, not a token of every model
	})
	if err != nil {
		return err
	}
	if err := session.AddTool(s, "get_weather", "Current weather in a city", getWeather); err != nil {
		return err
	}
	reply, err := s.Send(ctx, c.question)
	if err != nil {
		return err
	}
	for _, call := range reply.Calls {
		fmt.Fprintf(w, "call %s(%s) -> %s\n", call.Name, call.Arguments, call.Result)
	}
	fmt.Fprintf(w, "assistant: %s\n", reply.Content)
	return nil
}
