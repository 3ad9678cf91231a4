package llama_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// BenchmarkSpeculative measures generation with and without drafts, side
// by side, in generated tokens per second (tok/s) with the drafts'
// acceptance rate (accept) and the tokens drafted per generated token
// (drafted/tok), the drafts checked per generation of 200 tokens
// (drafts/gen), and generated tokens per second of the process's CPU time
// (tok/cpu-s: steadier than tok/s on a machine shared with other work):
//   - retell: stories260K retells a story it has just read, so n-gram drafts
//     from the prompt are accepted; self-draft is stories260K drafting for
//     itself (acceptance close to 100%, to show the mechanics);
//   - random: llama-2-tiny-random (random weights, 32k vocabulary);
//   - random125m: the random 125M-parameter llama (Q8_0, 32k vocabulary)
//     after a prompt repeating a sentence, greedy: the random model falls
//     into loops of its own, which n-gram drafts predict (speculation pays);
//   - random125m-sampled: the same model after a varied prompt, sampling
//     among its 2 most likely tokens (seeded): its text keeps coming back to
//     the same few tokens, so n-gram drafts are proposed, but the samples
//     rarely follow them (speculation does not help, its cost shows).
//
// Each n-gram drafter runs with the default adaptation (DraftAdapt) and
// without it ("-fixed", drafting as llama.cpp does). Compare the plain and
// speculative figures of one run (go test -bench Speculative -count 6), as
// ratios.
func BenchmarkSpeculative(b *testing.B) {
	ctx := context.Background()
	for _, mc := range []struct {
		name, file, prompt string
		topK               int // sample among the topK most likely tokens (0: greedy)
	}{
		{"retell", "stories260K.gguf", "", 0},
		{"random", "llama-2-tiny-random.gguf", "The quick brown fox jumps over the lazy dog", 0},
		{"random125m", "", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 8), 0},
		{"random125m-sampled", "", "Rain drummed on the tin roof while Mara counted the jars of honey; " +
			"the old dog snored by the stove, and past the orchard a tractor coughed twice before it fell silent.", 2},
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
			for p, err := range c.Generate(ctx, "Once upon a time", llama.GenerateOptions{MaxTokens: 200}).Seq() {
				if err != nil {
					b.Fatal(err)
				}
				story += p.Text
			}
			prompt = "Once upon a time" + story + " Once upon a time"
		}
		ngram := map[string]func() llama.Drafter{
			"ngram-simple": func() llama.Drafter { return &draft.NgramSimple{SizeN: 4, SizeM: 16} },
			"ngram-map-k":  func() llama.Drafter { return &draft.NgramMap{SizeN: 4, SizeM: 16} },
			"ngram-cache":  func() llama.Drafter { return &draft.NgramCache{} },
		}
		names := []string{"plain"}
		for _, n := range []string{"ngram-simple", "ngram-map-k", "ngram-cache"} {
			names = append(names, n, n+"-fixed")
		}
		if !strings.HasPrefix(mc.name, "random125m") {
			names = append(names, "self-draft") // on the 125M model the draft would cost as much as the target
		}
		for _, name := range names {
			b.Run(mc.name+"/"+name, func(b *testing.B) {
				toks, err := m.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true})
				if err != nil {
					b.Fatal(err)
				}
				var gen, drafts, drafted, accepted, runs int
				var spent, cpu time.Duration
				for b.Loop() {
					o := llama.GenerateOptions{MaxTokens: 200}
					if mc.topK > 0 {
						s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.TopK(mc.topK), llama.Dist(7))
						if err != nil {
							b.Fatal(err)
						}
						o.Sampler = s
					}
					switch base, fixed := strings.CutSuffix(name, "-fixed"); {
					case name == "self-draft":
						d, err := draft.NewModel(m, dc, draft.ModelOptions{NMax: 8})
						if err != nil {
							b.Fatal(err)
						}
						o.Speculative = &llama.Speculative{Drafters: []llama.Drafter{d}}
					case ngram[base] != nil:
						o.Speculative = &llama.Speculative{Drafters: []llama.Drafter{ngram[base]()}, Adapt: llama.DraftAdapt{Off: fixed}}
					}
					g := c.GenerateTokens(ctx, toks, o)
					start, cpu0 := time.Now(), processCPU()
					for _, err := range g.Seq() {
						if err != nil {
							b.Fatal(err)
						}
					}
					spent += time.Since(start)
					cpu += processCPU() - cpu0
					if o.Sampler != nil {
						o.Sampler.Close()
					}
					gen += g.Generated()
					s := g.Speculative()
					drafts += s.Drafts
					drafted += s.Drafted
					runs++
					accepted += s.Accepted
				}
				b.ReportMetric(float64(gen)/spent.Seconds(), "tok/s")
				if cpu > 0 {
					b.ReportMetric(float64(gen)/cpu.Seconds(), "tok/cpu-s")
				}
				if drafted > 0 {
					b.ReportMetric(float64(accepted)/float64(drafted), "accept")
					b.ReportMetric(float64(drafted)/float64(gen), "drafted/tok")
					b.ReportMetric(float64(drafts)/float64(runs), "drafts/gen")
				}
			})
		}
	}
}
