// Command chat is an interactive terminal chat over a GGUF model that
// streams tokens as they are generated, with a one-shot mode for scripts.
//
//	go run ./examples/chat -m model.gguf                 # interactive
//	go run ./examples/chat -m model.gguf -p "Once upon a time" -n 64 --temp 0
//	go run ./examples/chat -hf ggml-org/gemma-3-1b-it-GGUF:Q4_K_M   # pulled from Hugging Face
//
// -hf (also -hfr, --hf-repo) takes "user/repo[:quant]" and downloads the
// model into the Hugging Face cache shared with llama.cpp (see hub.Pull),
// with a progress bar on stderr; -hff/--hf-file names the file instead of a
// quant, -hft/--hf-token (default $HF_TOKEN) opens gated repos, --offline
// uses the cache only, and $MODEL_ENDPOINT/$HF_ENDPOINT point at another hub.
//
// Models with a chat template are chatted with through it; models without
// one (such as stories260K) continue the text they are given, unless
// --chat-template (a built-in name such as gemma, or Jinja source) or
// --chat-template-file gives one.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"

	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/hub"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		modelPath = flag.String("m", "", "path of the GGUF model (or use -hf)")
		hfRepo    = flag.String("hf", "", "Hugging Face model `user/repo[:quant]` to pull (quant default: Q4_K_M, then Q8_0, then the first GGUF)")
		hfFile    = flag.String("hff", "", "the `file` to pull from the -hf repo, instead of a quant")
		hfToken   = flag.String("hft", "", "Hugging Face access `token` (default: $HF_TOKEN)")
		offline   = flag.Bool("offline", false, "use the model cache only, never the network (also $LLAMA_ARG_OFFLINE, $HF_HUB_OFFLINE)")
		prompt    = flag.String("p", "", "one-shot prompt: print the completion and exit")
		nPredict  = flag.Int("n", 256, "most tokens to generate per answer (-1: until the context is full)")
		temp      = flag.Float64("temp", 0.8, "temperature (0: greedy)")
		seed      = flag.Int64("seed", -1, "random seed (-1: random)")
		topK      = flag.Int("top-k", 40, "top-k sampling (0: off)")
		topP      = flag.Float64("top-p", 0.95, "top-p sampling (1: off)")
		minP      = flag.Float64("min-p", 0.05, "min-p sampling (0: off)")
		ctxSize   = flag.Int("c", 2048, "context size in tokens")
		threads   = flag.Int("t", runtime.NumCPU(), "threads")
		system    = flag.String("sys", "", "system prompt for chat models")
		tmplFlag  = flag.String("chat-template", "", "chat template: a built-in `name` (chatml, gemma, llama3, ...) or Jinja source, instead of the model's")
		tmplFile  = flag.String("chat-template-file", "", "`file` holding a Jinja chat template, instead of the model's")
		verbose   = flag.Bool("v", false, "show llama.cpp's log")
	)
	flag.StringVar(modelPath, "model", "", "same as -m")
	flag.StringVar(prompt, "prompt", "", "same as -p")
	flag.IntVar(nPredict, "n-predict", 256, "same as -n")
	flag.StringVar(hfRepo, "hfr", "", "same as -hf")
	flag.StringVar(hfRepo, "hf-repo", "", "same as -hf")
	flag.StringVar(hfFile, "hf-file", "", "same as -hff")
	flag.StringVar(hfToken, "hf-token", "", "same as -hft")
	flag.Parse()
	if *hfRepo == "" {
		*hfRepo = os.Getenv("LLAMA_ARG_HF_REPO")
	}
	if *hfFile == "" {
		*hfFile = os.Getenv("LLAMA_ARG_HF_FILE")
	}
	if v := os.Getenv("LLAMA_ARG_OFFLINE"); v != "" && v != "0" && v != "false" {
		*offline = true
	}
	switch {
	case *modelPath == "" && *hfRepo == "":
		flag.Usage()
		return errors.New("-m or -hf is required")
	case *modelPath != "" && *hfRepo != "":
		return errors.New("-m and -hf are exclusive")
	}
	if *verbose {
		llama.SetLogger(slogStderr())
	}
	// Installing the library is explicit: this program installs it into
	// the cache folder on its first run (with a progress bar on stderr).
	if err := llama.Init(llama.LibraryOptions{Install: true}); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *hfRepo != "" {
		path, err := hub.Pull(ctx, *hfRepo, hub.Options{File: *hfFile, Token: *hfToken, Offline: *offline,
			Progress: hub.ProgressBar(os.Stderr)})
		if err != nil {
			return err
		}
		*modelPath = path
	}

	model, err := llama.LoadModel(ctx, *modelPath, llama.ModelOptions{})
	if err != nil {
		return err
	}
	defer model.Close()
	lctx, err := model.NewContext(llama.ContextOptions{ContextSize: *ctxSize, Threads: *threads})
	if err != nil {
		return err
	}
	defer lctx.Close()

	s := uint32(llama.DefaultSeed)
	if *seed >= 0 {
		s = uint32(*seed)
	}
	var samplers []llama.Sampler
	if *temp <= 0 {
		samplers = []llama.Sampler{llama.Greedy()}
	} else {
		samplers = []llama.Sampler{llama.TopK(*topK), llama.TopP(float32(*topP), 1), llama.MinP(float32(*minP), 1),
			llama.Temp(float32(*temp)), llama.Dist(s)}
	}
	sampler, err := llama.NewSamplerChain(model, llama.SamplerChainOptions{}, samplers...)
	if err != nil {
		return err
	}
	defer sampler.Close()
	maxTokens := *nPredict
	if maxTokens < 0 {
		maxTokens = 0
	}

	if *prompt != "" {
		// One shot: continue the text exactly as llama.cpp's completion does.
		fmt.Print(*prompt)
		for p, err := range lctx.Generate(ctx, *prompt, llama.GenerateOptions{MaxTokens: maxTokens, Sampler: sampler}).Seq() {
			if err != nil {
				return err
			}
			fmt.Print(p.Text)
		}
		fmt.Println()
		return nil
	}

	tmpl, err := chatTemplate(model, *tmplFlag, *tmplFile)
	if err != nil {
		return err
	}
	var history []chat.Message
	if *system != "" {
		history = append(history, chat.Message{Role: chat.RoleSystem, Content: *system})
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	text := ""
	cache := &promptCache{}
	for {
		fmt.Print("\n> ")
		if !in.Scan() {
			fmt.Println()
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var input string
		if tmpl != nil {
			history = append(history, chat.Message{Role: chat.RoleUser, Content: line})
			// Render drops the template's BOS when the vocabulary adds
			// one, as llama.cpp does: Generate adds it.
			if input, err = tmpl.Render(history, nil, true, nil); err != nil {
				return err
			}
		} else {
			if text != "" && !strings.HasSuffix(text, "\n") {
				text += "\n" // the answer printed ended its line
			}
			text += line
			input = text
		}
		var answer strings.Builder
		genCtx, cancel := signal.NotifyContext(ctx, os.Interrupt)
		gen, err := cache.generate(genCtx, lctx, input, llama.GenerateOptions{MaxTokens: maxTokens, Sampler: sampler})
		if err != nil {
			cancel()
			return err
		}
		for p, err := range gen {
			if err != nil {
				if errors.Is(err, context.Canceled) {
					break
				}
				cancel()
				return err
			}
			fmt.Print(p.Text)
			answer.WriteString(p.Text)
		}
		cancel()
		fmt.Println()
		if tmpl != nil {
			history = append(history, chat.Message{Role: chat.RoleAssistant, Content: answer.String()})
		} else {
			text += answer.String()
		}
	}
}

// chatTemplate is the template to chat through, rendered as the server
// renders it: the one the flags give (a built-in name such as chatml or
// llama3, or Jinja source), else the model's own; nil when the model has
// none (a base model such as stories260K or Gemma 3 270M base), which
// then continues the text.
func chatTemplate(model *llama.Model, name, file string) (*chat.Templates, error) {
	var r chat.Renderer
	var err error
	switch {
	case name != "" && file != "":
		return nil, errors.New("--chat-template and --chat-template-file are exclusive")
	case file != "":
		b, rerr := os.ReadFile(file)
		if rerr != nil {
			return nil, rerr
		}
		if r, err = chat.NewResolver(true).For(string(b)); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	case name != "":
		if r, err = chat.NewResolver(false).For(name); err != nil {
			return nil, fmt.Errorf("--chat-template: %w", err)
		}
	default:
		if _, ok := model.ChatTemplate(""); !ok {
			return nil, nil
		}
		return chat.ForModel(model, func(msg string, args ...any) {
			fmt.Fprintln(os.Stderr, append([]any{msg}, args...)...)
		})
	}
	return chat.ForModelWith(model, r), nil
}
