package llama_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// BenchmarkSpeculative measures greedy generation with and without drafts,
// side by side, in generated tokens per second (tok/s) with the drafts'
// acceptance rate (accept):
//   - retell: stories260K retells a story it has just read, so n-gram drafts
//     from the prompt are accepted; self-draft is stories260K drafting for
//     itself (acceptance close to 100%, to show the mechanics);
//   - random: llama-2-tiny-random (random weights, 32k vocabulary);
//   - random125m: the random 125M-parameter llama (Q8_0, 32k vocabulary)
//     with a prompt that repeats a sentence, so n-gram drafts are made from
//     it and rejected by the random model: the overhead of speculating in
//     vain.
//
// Compare the plain and speculative figures of one run (go test -bench
// Speculative -count 6), as ratios.
func BenchmarkSpeculative(b *testing.B) {
	ctx := context.Background()
	for _, mc := range []struct{ name, file, prompt string }{
		{"retell", "stories260K.gguf", ""},
		{"random", "llama-2-tiny-random.gguf", "The quick brown fox jumps over the lazy dog"},
		{"random125m", "", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 8)},
	} {
		path := ""
		if mc.file != "" {
			path = testenv.Model(b, mc.file)
		} else {
			p, err := gguf.BenchModelFile(testenv.Model(b, "llama-2-tiny-random.gguf"), "llama-125m", gguf.BenchModel125M, gguf.Q8_0)
			if err != nil {
				b.Fatal(err)
			}
			path = p
		}
		m, err := llama.LoadModel(ctx, path, llama.ModelOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		c, err := m.NewContext(llama.ContextOptions{ContextSize: 1024, Threads: 1, ThreadsBatch: 1})
		if err != nil {
			b.Fatal(err)
		}
		dc, err := m.NewContext(llama.ContextOptions{ContextSize: 1024, Threads: 1, ThreadsBatch: 1})
		if err != nil {
			b.Fatal(err)
		}
		prompt := mc.prompt
		if prompt == "" {
			story := ""
			for p, err := range c.Generate(ctx, "Once upon a time", llama.GenerateOptions{MaxTokens: 200}) {
				if err != nil {
					b.Fatal(err)
				}
				story += p.Text
			}
			prompt = "Once upon a time" + story + " Once upon a time"
		}
		drafters := map[string]func() []llama.Drafter{
			"plain":        nil,
			"ngram-simple": func() []llama.Drafter { return []llama.Drafter{&llama.NgramSimple{SizeN: 4, SizeM: 16}} },
			"ngram-map-k":  func() []llama.Drafter { return []llama.Drafter{&llama.NgramMap{SizeN: 4, SizeM: 16}} },
			"self-draft": func() []llama.Drafter {
				d, err := llama.NewDraftModel(m, dc, llama.DraftModelOptions{NMax: 8})
				if err != nil {
					b.Fatal(err)
				}
				return []llama.Drafter{d}
			},
		}
		for _, name := range []string{"plain", "ngram-simple", "ngram-map-k", "self-draft"} {
			if name == "self-draft" && mc.name == "random125m" {
				continue // the draft would cost as much as the target
			}
			b.Run(mc.name+"/"+name, func(b *testing.B) {
				toks, err := m.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true})
				if err != nil {
					b.Fatal(err)
				}
				var gen, drafted, accepted int
				var spent time.Duration
				for b.Loop() {
					o := llama.GenerateOptions{MaxTokens: 200}
					if mk := drafters[name]; mk != nil {
						o.Speculative = &llama.Speculative{Drafters: mk()}
					}
					g := c.GenerateTokens(ctx, toks, o)
					start := time.Now()
					for _, err := range g.Seq() {
						if err != nil {
							b.Fatal(err)
						}
					}
					spent += time.Since(start)
					gen += g.Generated()
					s := g.Speculative()
					drafted += s.Drafted
					accepted += s.Accepted
				}
				b.ReportMetric(float64(gen)/spent.Seconds(), "tok/s")
				if drafted > 0 {
					b.ReportMetric(float64(accepted)/float64(drafted), "accept")
				}
			})
		}
	}
}
