package engine

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestEnginePrefillChunk checks chunked prefill: a long prompt submitted
// while other slots generate is decoded PrefillChunk tokens at a time
// (a token at position p counting 1+p/1024; one progress event per
// decode), and neither its greedy tokens nor
// those of the generating slots change from what each gives alone. With
// a negative PrefillChunk, the prompt fills the batch at once.
func TestEnginePrefillChunk(t *testing.T) {
	m := engStoriesModel(t)
	long := engTokenize(t, m, strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. ", 8), true)
	require.Greater(t, len(long), 200)
	short := engTokenize(t, m, "Once upon a time", true)
	const nLong, nShort, nStreams = 16, 160, 2
	for _, tc := range []struct {
		name      string
		chunk     int
		slowdown  float64
		wantChunk int // most prompt tokens per decode beside the streams; 0: paced
	}{
		{"fixed default", 0, -1, DefaultPrefillChunk},
		{"fixed 16", 16, -1, 16},
		{"no cap", -1, 0, len(long)},
		{"paced", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, Options{CtxSize: (nStreams + 1) * 512, Parallel: nStreams + 1,
				PrefillChunk: tc.chunk, PrefillSlowdown: tc.slowdown})
			// Alone: the whole prompt in one decode.
			alone := engRun(t, e, engGreedyTask(long, nLong))
			shortAlone := engRun(t, e, engGreedyTask(short, nShort))
			require.Len(t, alone.tokens, nLong)

			// Beside nStreams generating slots.
			var wg sync.WaitGroup
			streams := make([]engResult, nStreams)
			for i := range nStreams {
				st, err := e.Submit(context.Background(), engGreedyTask(short, nShort))
				require.NoError(t, err)
				require.True(t, st.Next(), "first token of stream %d", i)
				first := st.Event()
				wg.Go(func() {
					streams[i] = engCollect(t, st)
					streams[i].tokens = append([]llama.Token{first.Token}, streams[i].tokens...)
				})
			}
			task := engGreedyTask(long, nLong)
			task.ReturnProgress = true
			st, err := e.Submit(context.Background(), task)
			require.NoError(t, err)
			r := engCollect(t, st)
			wg.Wait()
			require.NoError(t, r.done.Err)

			var tokens []llama.Token
			var sizes []int // prompt tokens of each decode
			processed := -1
			for _, ev := range r.events {
				if ev.Progress == nil {
					tokens = append(tokens, ev.Token)
					continue
				}
				if processed >= 0 {
					sizes = append(sizes, ev.Progress.Processed-processed)
				}
				processed = ev.Progress.Processed
			}
			assert.Equal(t, len(long), processed, "the last progress is at 100%")
			require.NotEmpty(t, sizes)
			assert.Equal(t, alone.tokens, tokens, "the long prompt's greedy tokens")
			for i, s := range streams {
				require.NoError(t, s.done.Err)
				assert.Equal(t, shortAlone.tokens, s.tokens, "stream %d", i)
			}
			if tc.wantChunk == 0 {
				// Paced: the chunk sizes follow the measured step times;
				// the first is the initial chunk, and the prompt goes in
				// several.
				assert.Greater(t, len(sizes), 1, "the long prompt went in one decode beside the streams")
				n, _ := prefillFit(0, DefaultPrefillChunk*prefillUnit, len(long))
				assert.Equal(t, n, sizes[0], "the first chunk, before any cost is known")
				for _, n := range sizes {
					assert.Positive(t, n)
				}
				return
			}
			// The chunks: as many tokens as fit in the budget, a token at
			// position p counting 1+p/1024.
			var want []int
			for p := 0; p < len(long); {
				n := len(long) - p
				if tc.chunk >= 0 {
					n = 0
					for cost := 0.0; p+n < len(long); n++ {
						cost += 1 + float64(p+n)/1024
						if cost > float64(tc.wantChunk) {
							break
						}
					}
				}
				want = append(want, n)
				p += n
			}
			assert.Equal(t, want, sizes, "prompt tokens of each decode")
			assert.LessOrEqual(t, sizes[0], tc.wantChunk)
		})
	}
}

// TestPrefillPacer holds the pacer's budget against the step times it was
// shown: a chunk's units are sized so that a step takes slowdown times a
// generating step, from moving averages of both.
func TestPrefillPacer(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	type obs struct {
		d     time.Duration
		units int
		short bool
	}
	for _, tc := range []struct {
		name     string
		slowdown float64
		steps    []obs
		want     int
	}{
		{"nothing measured", 2, nil, 32 * prefillUnit},
		{"only generating steps", 2, []obs{{ms(20), 0, false}, {ms(20), 0, false}}, 32 * prefillUnit},
		// 20 ms a generating step, 40 ms with 10,240 units: 2 ms a 1,024 units;
		// twice the step leaves 20 ms: 10,240 units.
		{"measured", 2, []obs{{ms(20), 0, false}, {ms(40), 10240, false}}, 10240},
		{"three times", 3, []obs{{ms(20), 0, false}, {ms(40), 10240, false}}, 20480},
		// A second chunk of 60 ms moves the cost a quarter of the way: from
		// 20/10240 to 40/10240 s a unit: 25/10240, so 20 ms buys 8,192 units.
		{"moving average", 2, []obs{{ms(20), 0, false}, {ms(40), 10240, false}, {ms(60), 10240, false}}, 8192},
		{"a short prompt teaches nothing", 2, []obs{{ms(20), 0, false}, {ms(40), 10240, false}, {ms(500), 0, true}, {ms(500), 10240, true}}, 10240},
		// A chunk that came out faster than a generating step counts as a
		// tenth of one: 2 ms for 10,240 units, so 20 ms buys 102,400.
		{"faster than a step", 2, []obs{{ms(20), 0, false}, {ms(15), 10240, false}}, 102400},
		// The generating step is the median of the last ones: one slow
		// step does not move it.
		{"median step", 2, []obs{{ms(20), 0, false}, {ms(20), 0, false}, {ms(200), 0, false}, {ms(40), 10240, false}}, 10240},
		{"the median of the last 31", 2, append(append(slices.Repeat([]obs{{ms(10), 0, false}}, 40),
			slices.Repeat([]obs{{ms(20), 0, false}}, 16)...), obs{ms(40), 10240, false}), 10240},
		{"at least a token", 2, []obs{{ms(20), 0, false}, {ms(2000), 1024, false}}, prefillUnit},
		{"at most twice: a token a step", 1, []obs{{ms(20), 0, false}, {ms(40), 10240, false}}, prefillUnit},
		{"fixed chunks", -1, []obs{{ms(20), 0, false}, {ms(40), 10240, false}}, 32 * prefillUnit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPrefillPacer(32, tc.slowdown)
			for _, o := range tc.steps {
				p.observe(o.d, o.units, o.short)
			}
			assert.InDelta(t, tc.want, p.budget(), 2)
		})
	}
	// The units of a chunk: prefillFit and prefillCost agree.
	for _, pos := range []int{0, 1, 100, 4000} {
		for _, n := range []int{0, 1, 7, 64} {
			got, cost := prefillFit(pos, prefillCost(pos, n), n+10)
			assert.Equal(t, n, got, "pos %d n %d", pos, n)
			assert.Equal(t, prefillCost(pos, n), cost)
		}
	}
}

// TestEngineShortPromptsWhole: short prompts that arrive together while a
// slot generates all go whole into the next step, instead of one request's
// prompt a step (which staggered the starts of a burst of requests).
func TestEngineShortPromptsWhole(t *testing.T) {
	m := engStoriesModel(t)
	short := engTokenize(t, m, "Once upon a time, there was a little girl", true)
	require.Less(t, len(short), DefaultPrefillChunk)
	const n = 6
	_, e := newEngTestEngine(t, Options{CtxSize: (n + 1) * 256, Parallel: n + 1})
	st, err := e.Submit(context.Background(), engGreedyTask(short, 200))
	require.NoError(t, err)
	defer st.Close()
	require.True(t, st.Next(), "first token of the stream")
	streams := make([]*Stream, n)
	// Queued on the loop, so that all are there at its next step.
	require.NoError(t, e.do(func() {
		for i := range streams {
			streams[i], err = e.Submit(context.Background(), engGreedyTask(short, 4))
			require.NoError(t, err)
		}
	}))
	// The loop's next turn comes after that one step.
	var prompting []int
	require.NoError(t, e.do(func() {
		for _, s := range e.slots {
			if s.tk != nil && s.state == stPrompt {
				prompting = append(prompting, s.id)
			}
		}
	}))
	assert.Empty(t, prompting, "slots still prefilling a short prompt after a step")
	for i, st := range streams {
		r := engCollect(t, st)
		require.NoError(t, r.done.Err, "request %d", i)
		assert.Len(t, r.tokens, 4)
	}
}

// TestEnginePrefillSlowdownInvalid: a slowdown that is not a finite number
// is refused by New.
func TestEnginePrefillSlowdownInvalid(t *testing.T) {
	m := engStoriesModel(t)
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := New(m, Options{PrefillSlowdown: f})
		assert.ErrorIs(t, err, llama.ErrInvalid, "%v", f)
	}
}
