package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/x/llama"
)

type specBenchCase struct {
	name string
	opts SpeculativeOptions
}

// BenchmarkSpeculative measures generation speed with and without
// speculative decoding on a repetition task: stories260K continues a
// prompt that repeats a story it generated, so n-gram drafts are often
// right; draft-simple is stories260K drafting for itself (every draft
// right, at the cost of a second model as large as the target). Greedy,
// 100 tokens, one thread. gen-tok/s is the generation speed (predicted
// tokens over generation time, prompt excluded); accept-% the share of
// drafted tokens accepted; tok/decode the tokens generated per target
// decode. Run the variants side by side, e.g.
//
//	go test ./server -run '^$' -bench BenchmarkSpeculative -count 5
func BenchmarkSpeculative(b *testing.B) {
	m := engStoriesModel(b)
	benchSpec(b, m, specRepeatPrompt(b), 1, []specBenchCase{
		{"plain", SpeculativeOptions{}},
		{"ngram-simple", SpeculativeOptions{Types: []string{SpecNgramSimple}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16}},
		{"ngram-map-k", SpeculativeOptions{Types: []string{SpecNgramMapK}, NgramMapKSizeN: 4, NgramMapKSizeM: 16}},
		{"ngram-cache", SpeculativeOptions{Types: []string{SpecNgramCache}}},
		{"draft-simple", SpeculativeOptions{Types: []string{SpecDraftSimple}, DraftModel: engModelPath(b),
			DraftModelOptions: llama.ModelOptions{CPUOnly: true}, DraftThreads: 1, NMax: 8}},
	})
}

func benchSpec(b *testing.B, m *llama.Model, prompt string, threads int, cases []specBenchCase) {
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			e, err := New(m, Options{Context: llama.ContextOptions{ContextSize: 1024, Threads: threads, ThreadsBatch: threads}, Speculative: tc.opts})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			toks := engTokenize(b, m, prompt, true)
			var predicted, drafted, accepted int
			var ms float64
			before := e.Metrics().DecodeTotal
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := engRun(b, e, engGreedyTask(toks, 100))
				tm := r.done.Timings
				predicted += tm.PredictedN
				ms += tm.PredictedMS
				drafted += tm.DraftN
				accepted += tm.DraftNAccepted
			}
			b.StopTimer()
			// One decode per task is its prompt's (it fits one batch).
			decodes := e.Metrics().DecodeTotal - before - int64(b.N)
			b.ReportMetric(float64(predicted)/(ms/1000), "gen-tok/s")
			b.ReportMetric(float64(predicted)/float64(decodes), "tok/decode")
			if drafted > 0 {
				b.ReportMetric(100*float64(accepted)/float64(drafted), "accept-%")
			}
		})
	}
}

// BenchmarkSpeculativeSlots measures draft-model speculation with several
// slots generating at once: stories260K drafting for itself (4 tokens a
// draft) for 1, 4 and 8 concurrent greedy tasks of 100 tokens, one thread.
// The slots' drafts are drafted together (draft.DraftModels), a few
// decodes of one token per slot each step instead of a few per slot.
// tok/s is all the tasks' tokens over the wall time.
func BenchmarkSpeculativeSlots(b *testing.B) {
	m := engStoriesModel(b)
	toks := engTokenize(b, m, specRepeatPrompt(b), true)
	for _, np := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("slots=%d", np), func(b *testing.B) {
			e, err := New(m, Options{Context: llama.ContextOptions{ContextSize: 1024 * np, Threads: 1, ThreadsBatch: 1}, Parallel: np,
				Speculative: SpeculativeOptions{Types: []string{SpecDraftSimple}, DraftModel: engModelPath(b),
					DraftModelOptions: llama.ModelOptions{CPUOnly: true}, DraftThreads: 1, NMax: 4, Adapt: llama.DraftAdapt{Off: true}}})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			benchSlots(b, e, toks, np, 100)
		})
	}
}

// BenchmarkSpeculativeMTP runs 1 and 4 slots of greedy generation on a
// small GLM-4.5-layout model whose MTP head drafts what it says
// (mtpEngineModel), without speculation and with draft-mtp: what the
// head's mirroring of every batch and its drafting cost or save, per
// generated token, beside the share of drafted tokens kept.
func BenchmarkSpeculativeMTP(b *testing.B) {
	m := mtpEngineModel(b, true)
	toks := engTokenize(b, m, "Once upon a time", true)
	for _, np := range []int{1, 4} {
		for _, spec := range []bool{false, true} {
			name := fmt.Sprintf("slots=%d/plain", np)
			o := Options{Context: llama.ContextOptions{ContextSize: 512 * np, Threads: 1, ThreadsBatch: 1}, Parallel: np}
			if spec {
				name = fmt.Sprintf("slots=%d/mtp", np)
				o.Speculative = SpeculativeOptions{Types: []string{SpecDraftMTP}, NMax: 4, Adapt: llama.DraftAdapt{Off: true}}
			}
			b.Run(name, func(b *testing.B) {
				e, err := New(m, o)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				benchSlots(b, e, toks, np, 200)
			})
		}
	}
}

// benchSlots runs b.N rounds of np greedy tasks of n tokens at once on e
// and reports tokens/s and, when there were drafts, the share kept.
func benchSlots(b *testing.B, e *Engine, toks []llama.Token, np, n int) {
	var predicted, drafted, accepted atomic.Int64
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for range np {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := engRun(b, e, engGreedyTask(toks, n))
				predicted.Add(int64(r.done.Timings.PredictedN))
				drafted.Add(int64(r.done.Timings.DraftN))
				accepted.Add(int64(r.done.Timings.DraftNAccepted))
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(predicted.Load())/time.Since(start).Seconds(), "tok/s")
	if d := drafted.Load(); d > 0 {
		b.ReportMetric(float64(accepted.Load())/float64(d), "kept/drafted")
	}
}
