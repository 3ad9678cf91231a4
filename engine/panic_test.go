package engine

// A panic on the engine's loop ends the requests it touched, never the
// process: the tests inject panics where a library user's code runs there
// (a drafter, a Go sampler) and in the shared step, under load, and hold
// the other requests to their normal output and later requests, on the
// victim's slot too, to theirs.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// panicDrafter drafts nothing for a few calls, then panics.
type panicDrafter struct{ calls, after int }

func (d *panicDrafter) Draft(context.Context, []llama.Token, int) ([]llama.Token, error) {
	d.calls++
	if d.calls > d.after {
		panic("boom: drafter")
	}
	return nil, nil
}
func (d *panicDrafter) Accepted(int) {}

// panicBeginner is a llama.DraftBeginner whose Begin panics.
type panicBeginner struct{ panicDrafter }

func (*panicBeginner) Begin([]llama.Token) { panic("boom: begin") }

// panicSampler passes the candidates on for a few tokens, then panics.
type panicSampler struct{ applied, after int }

func (p *panicSampler) Name() string { return "panicky" }
func (p *panicSampler) Apply(*llama.Candidates) {
	p.applied++
	if p.applied > p.after {
		panic("boom: sampler")
	}
}
func (p *panicSampler) Accept(llama.Token) {}
func (p *panicSampler) Reset()             {}

const victimPrompt = "Bob went to the market"

// TestEnginePanicInSlot: a drafter's panic (in Draft or in Begin) and a Go
// sampler's panic, in a
// request running beside three others (with and without the parallel
// sampler), end that request with an error naming the panic, logged with
// its stack; the others give the output they give alone, and afterwards
// requests run as before, on the victim's slot too.
func TestEnginePanicInSlot(t *testing.T) {
	cases := []struct {
		name          string
		sampleThreads int
		victim        func(r *Request) // makes r the victim
		drafter       func() llama.Drafter
		want          string
	}{
		{name: "drafter", want: "llama: engine: drafter: panic: boom: drafter",
			drafter: func() llama.Drafter { return &panicDrafter{after: 3} }},
		{name: "drafter's Begin", want: "llama: engine: drafter: panic: boom: begin",
			drafter: func() llama.Drafter { return &panicBeginner{} }},
		{name: "Go sampler", want: "llama: custom sampler panicky: apply: panic: boom: sampler", victim: func(r *Request) {
			r.Samplers = []llama.Sampler{llama.Custom(&panicSampler{after: 5})}
		}},
		{name: "Go sampler, parallel sampling", sampleThreads: 2, want: "llama: custom sampler panicky: apply: panic: boom: sampler", victim: func(r *Request) {
			r.Samplers = []llama.Sampler{llama.Custom(&panicSampler{after: 5})}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.Buffer
			var armed atomic.Bool
			o := Options{Context: llama.ContextOptions{ContextSize: 2048}, Parallel: 4, SampleThreads: tc.sampleThreads,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))}
			if tc.drafter != nil {
				o.Speculative.NewDrafters = func(_ int, r *Request) []llama.Drafter {
					if armed.Load() && r.NPredict == 41 {
						return []llama.Drafter{tc.drafter()}
					}
					return nil
				}
			}
			m, e := newEngTestEngine(t, o)
			prompts := []string{"Once upon a time", "The cat sat", "Lily and Tom", victimPrompt}
			alone := map[string]string{}
			for _, p := range prompts {
				alone[p] = engRun(t, e, engGreedyTask(engTokenize(t, m, p, true), 40)).text
			}

			armed.Store(true)
			var wg sync.WaitGroup
			res := make([]engResult, len(prompts))
			for i, p := range prompts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := engGreedyTask(engTokenize(t, m, p, true), 40)
					if p == victimPrompt {
						r.NPredict = 41
						if tc.victim != nil {
							tc.victim(r)
						}
					}
					st, err := e.Submit(context.Background(), r)
					if !assert.NoError(t, err) {
						return
					}
					res[i] = engCollect(t, st)
				}()
			}
			wg.Wait()
			armed.Store(false)
			victimSlot := -1
			for i, p := range prompts {
				r := res[i]
				if p == victimPrompt {
					require.Error(t, r.done.Err, "the victim")
					var pe *llama.PanicError
					require.True(t, errors.As(r.done.Err, &pe), "%T %v", r.done.Err, r.done.Err)
					assert.Equal(t, tc.want, r.done.Err.Error())
					victimSlot = r.done.SlotID
					continue
				}
				require.NoError(t, r.done.Err, p)
				assert.Equal(t, alone[p], r.text, p)
			}
			require.GreaterOrEqual(t, victimSlot, 0)
			assert.Contains(t, logs.String(), "recovered a panic")
			assert.Contains(t, logs.String(), "panic_test.go", "the stack is logged")

			// Later requests: the victim's prompt on its slot, then all at once.
			r := engGreedyTask(engTokenize(t, m, victimPrompt, true), 40)
			r.SlotID = victimSlot
			after := engRun(t, e, r)
			assert.Equal(t, alone[victimPrompt], after.text)
			assert.Equal(t, victimSlot, after.done.SlotID)
			for _, p := range prompts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := e.Submit(context.Background(), engGreedyTask(engTokenize(t, m, p, true), 40))
					if assert.NoError(t, err) {
						r := engCollect(t, st)
						assert.NoError(t, r.done.Err)
						assert.Equal(t, alone[p], r.text, p)
					}
				}()
			}
			wg.Wait()
			// A slot is released on the loop's next step after its
			// request's last event, so idle comes soon after, not at once.
			assert.Eventually(t, func() bool {
				for _, s := range e.SlotsInfo() {
					if s.IsProcessing {
						return false
					}
				}
				return true
			}, time.Minute, 10*time.Millisecond, "a slot stays busy after its request failed")
		})
	}
}

// TestEnginePanicInStep: a panic in the step shared by the slots (here in
// the pacer's measurement, after a decode of several generating slots)
// cannot be laid at one slot's door: every running request ends with it,
// and the engine serves the next requests as before.
func TestEnginePanicInStep(t *testing.T) {
	var logs testenv.Buffer
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}, Parallel: 3,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))})
	prompt := engTokenize(t, m, "Once upon a time", true)
	want := engRun(t, e, engGreedyTask(prompt, 32)).text

	var fired atomic.Bool
	testStepTime = func(d time.Duration, _ int) time.Duration {
		if fired.CompareAndSwap(false, true) {
			panic("boom: step")
		}
		return d
	}
	t.Cleanup(func() { testStepTime = nil })
	var streams []*Stream
	for range 3 {
		r := engGreedyTask(prompt, 200)
		r.Params.IgnoreEOS = true
		st, err := e.Submit(context.Background(), r)
		require.NoError(t, err)
		streams = append(streams, st)
	}
	failed := 0
	for _, st := range streams {
		r := engCollect(t, st)
		if r.done.Err != nil {
			failed++
			assert.Equal(t, "llama: engine: panic: boom: step", r.done.Err.Error())
		}
	}
	assert.True(t, fired.Load())
	assert.Positive(t, failed, "the requests in the step fail")
	assert.Contains(t, logs.String(), "boom: step")
	for i := range 3 {
		r := engRun(t, e, engGreedyTask(prompt, 32))
		assert.Equal(t, want, r.text, fmt.Sprintf("request %d after the panic", i))
	}
}

// TestEngineSpeculativePromptLengths is the regression test of a server
// that died on a one-word prompt with ngram-simple drafting (the n-gram
// was longer than the history): ngram-simple alone, and the three n-gram
// types together, answer a one-word prompt with the output of plain
// generation, and a prompt near the context's end.
func TestEngineSpeculativePromptLengths(t *testing.T) {
	m := engStoriesModel(t)
	const nCtx = 2048
	long := engTokenize(t, m, strings.Repeat("Once upon a time, there was a little girl named Lily. ", 200), true)
	require.Greater(t, len(long), nCtx-40)
	long = long[:nCtx-40]
	word := engTokenize(t, m, "Once", true)
	_, plain := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: nCtx}})
	want := engRun(t, plain, engGreedyTask(word, 24)).text
	for _, typ := range []string{SpecNgramSimple, SpecNgramSimple + "," + SpecNgramMapK + "," + SpecNgramCache} {
		t.Run(typ, func(t *testing.T) {
			_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: nCtx}, Speculative: SpeculativeOptions{Types: []string{typ}, Adapt: llama.DraftAdapt{Off: true}}})
			got := engRun(t, e, engGreedyTask(word, 24))
			assert.Equal(t, want, got.text, "one word")
			// The long prompt repeats itself: the drafters draft from it.
			got = engRun(t, e, engGreedyTask(long, 24))
			assert.Equal(t, 24, got.done.Generated, "long prompt")
			assert.Equal(t, len(long), got.done.PromptTokens)
			assert.Positive(t, got.done.Timings.DraftN, "long prompt: drafts")
		})
	}
}

// TestEngineControlPanic: a control call's panic (the work SaveSlot and
// the like run on the loop) is that call's error, and the loop goes on.
func TestEngineControlPanic(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Logger: slog.New(slog.DiscardHandler)})
	err := e.do(func() { panic("boom: control") })
	var pe *llama.PanicError
	require.True(t, errors.As(err, &pe), "%v", err)
	assert.Equal(t, "llama: engine: control: panic: boom: control", err.Error())
	r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once upon a time", true), 16))
	assert.NotEmpty(t, r.text)
	assert.True(t, strings.HasPrefix(storiesGreedy, r.text), r.text)
}
