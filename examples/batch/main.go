// Command batch runs many prompts at once on one model, in process, through
// the engine package: every prompt is a goroutine calling Engine.Generate,
// and their tokens share the engine's decodes (continuous batching).
//
//	go run ./examples/batch -m model.gguf -np 4 -n 64 "Once upon a time" "The cat" "One day"
//	go run ./examples/batch -m model.gguf -f prompts.txt   # one prompt per line
//
// Each completion is printed in the order of the prompts, then the total
// tokens generated and the throughput.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
)

type config struct {
	model    string
	file     string
	parallel int
	nPredict int
	threads  int
	ctxSize  int
	temp     float64
	seed     uint
	prompts  []string
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil {
		// Installing the library is explicit: this program installs it
		// into the cache folder on its first run (with a progress bar on
		// stderr).
		err = llama.Init(llama.LibraryOptions{Install: true})
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err = run(ctx, cfg, os.Stdout)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "batch:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("batch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	fs.StringVar(&c.model, "m", "", "model file (GGUF)")
	fs.StringVar(&c.file, "f", "", "file of prompts, one per line (beside the prompts given as arguments)")
	fs.IntVar(&c.parallel, "np", 4, "slots: prompts generated at once")
	fs.IntVar(&c.nPredict, "n", 64, "tokens to generate per prompt")
	fs.IntVar(&c.threads, "t", min(2, runtime.NumCPU()), "compute threads")
	fs.IntVar(&c.ctxSize, "c", 0, "context size in tokens, shared by the slots (0: 512 per slot)")
	fs.Float64Var(&c.temp, "temp", 0, "temperature (0: greedy)")
	fs.UintVar(&c.seed, "seed", uint(llama.DefaultSeed), "sampling seed")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.prompts = fs.Args()
	if c.file != "" {
		f, err := os.Open(c.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				c.prompts = append(c.prompts, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	switch {
	case c.model == "":
		return nil, errors.New("no model: give -m")
	case len(c.prompts) == 0:
		return nil, errors.New("no prompts: give them as arguments or with -f")
	case c.parallel < 1:
		return nil, errors.New("-np must be at least 1")
	}
	if c.ctxSize == 0 {
		c.ctxSize = 512 * c.parallel
	}
	return c, nil
}

// result is one prompt's completion.
type result struct {
	text      string
	generated int
	err       error
}

func run(ctx context.Context, c *config, out io.Writer) error {
	model, err := llama.LoadModel(ctx, c.model, llama.ModelOptions{})
	if err != nil {
		return err
	}
	defer model.Close()
	eng, err := engine.New(model, engine.Options{Parallel: c.parallel, Context: llama.ContextOptions{ContextSize: c.ctxSize, Threads: c.threads, ThreadsBatch: c.threads},
		QueueSize: len(c.prompts)})
	if err != nil {
		return err
	}
	defer eng.Close()

	results := make([]result, len(c.prompts))
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range c.prompts {
		wg.Go(func() { results[i] = complete(ctx, eng, model, p, c) })
	}
	wg.Wait()
	elapsed := time.Since(start)

	total := 0
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("prompt %d: %w", i+1, r.err))
			continue
		}
		total += r.generated
		fmt.Fprintf(out, "--- %d\n%s%s\n", i+1, c.prompts[i], r.text)
	}
	fmt.Fprintf(out, "--- %d prompts, %d tokens generated in %.2fs: %.1f tokens/s\n",
		len(c.prompts), total, elapsed.Seconds(), float64(total)/elapsed.Seconds())
	return errors.Join(errs...)
}

// complete generates prompt's continuation on eng.
func complete(ctx context.Context, eng *engine.Engine, model *llama.Model, prompt string, c *config) result {
	toks, err := model.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true})
	if err != nil {
		return result{err: err}
	}
	params := sampling.Defaults()
	params.Temperature = float32(c.temp)
	params.Seed = uint32(c.seed)
	req := &engine.Request{Kind: engine.KindCompletion, Prompt: toks, Params: params, NPredict: c.nPredict, SlotID: -1, CachePrompt: true}
	var r result
	var sb strings.Builder
	for ev, err := range eng.Generate(ctx, req) {
		if err != nil {
			return result{err: err}
		}
		sb.WriteString(ev.Text)
		if ev.Done {
			r.generated = ev.Generated
		}
	}
	r.text = sb.String()
	return r
}
