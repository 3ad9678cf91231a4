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
			_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: (nStreams + 1) * 512}, Parallel: nStreams + 1,
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
			for _, ev := range r.events {
				if ev.Progress == nil {
					tokens = append(tokens, ev.Token)
				}
			}
			sizes, processed := progressSizes(r.events) // prompt tokens of each decode
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

// TestEnginePrefillTailPaced: once a long prompt goes in paced chunks, its
// tail does too, even when it has become short enough to go whole (deep in
// a prompt a few tokens cost a step's worth: measured, the whole tail made
// the slowest step of a 4,000-token prefill). The pacer sees steps of a
// cost model, not the machine's (whose noise, under the race detector,
// moved the chunks by tens of tokens): 4 ms a generating step and 1 ms more
// for every prefillUnit units of prompt work, so at slowdown 2 a chunk is
// 4 ms of work, 4,096 units: three tokens at these depths.
func TestEnginePrefillTailPaced(t *testing.T) {
	const gen, perUnit = 4 * time.Millisecond, time.Millisecond / prefillUnit
	testStepTime = func(_ time.Duration, units int) time.Duration { return gen + time.Duration(units)*perUnit }
	t.Cleanup(func() { testStepTime = nil })
	m := engStoriesModel(t)
	long := engTokenize(t, m, strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. ", 3), true)
	require.Greater(t, len(long), 60)
	require.Less(t, len(long), 300, "three tokens a chunk up to here")
	short := engTokenize(t, m, "Once upon a time", true)
	_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 2 * 512}, Parallel: 2, PrefillSlowdown: 2})
	st, err := e.Submit(context.Background(), engGreedyTask(short, 400))
	require.NoError(t, err)
	defer st.Close()
	// Three tokens: two steps of the stream alone, so the pacer knows a
	// generating step before the long prompt comes (else its chunks are
	// the initial size until a probe step measures one).
	for range 3 {
		require.True(t, st.Next())
	}
	task := engGreedyTask(long, 2)
	task.ReturnProgress = true
	lst, err := e.Submit(context.Background(), task)
	require.NoError(t, err)
	r := engCollect(t, lst)
	require.NoError(t, r.done.Err)
	sizes, processed := progressSizes(r.events)
	require.Equal(t, len(long), processed)
	first, _ := prefillFit(0, DefaultPrefillChunk*prefillUnit, len(long))
	require.Less(t, first, len(long))
	// Every chunk after the first is the model's three tokens, the last
	// what is left of them: the tail (within DefaultPrefillChunk units, so
	// a short prompt's size) did not go whole.
	want := []int{first}
	for p := first; p < len(long); p += 3 {
		want = append(want, min(3, len(long)-p))
	}
	assert.Equal(t, want, sizes, "prompt tokens of each decode")
	assert.LessOrEqual(t, prefillCost(len(long)-10, 10), DefaultPrefillChunk*prefillUnit, "a 10-token tail would have gone whole")
}

// ms is f milliseconds.
func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// progressSizes returns the prompt tokens of each decode after the first
// progress event of events, and the tokens processed at the last.
func progressSizes(events []Event) (sizes []int, processed int) {
	processed = -1
	for _, ev := range events {
		if ev.Progress == nil {
			continue
		}
		if processed >= 0 {
			sizes = append(sizes, ev.Progress.Processed-processed)
		}
		processed = ev.Progress.Processed
	}
	return sizes, processed
}

// TestPrefillPacer holds the pacer's budget against the step times it was
// shown: a chunk's units are sized so that a step takes slowdown times a
// generating step, from moving averages of both.
func TestPrefillPacer(t *testing.T) {
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
		{"the median of the last 9", 2, append(append(slices.Repeat([]obs{{ms(10), 0, false}}, 40),
			slices.Repeat([]obs{{ms(20), 0, false}}, 5)...), obs{ms(40), 10240, false}), 10240},
		// Four 20 ms steps of the last nine: the median is still 10 ms, so a
		// 30 ms chunk cost 20 ms and 10 ms buys 5,120 units.
		{"four of the last 9", 2, append(append(slices.Repeat([]obs{{ms(10), 0, false}}, 40),
			slices.Repeat([]obs{{ms(20), 0, false}}, 4)...), obs{ms(30), 10240, false}), 5120},
		// The generating slots grew during the prefill: a probe step of
		// theirs took 30 ms, the chunks 50 ms for 10,240 units; the later
		// step of a prompt chunk is charged only its excess over 30 ms.
		{"a fresh generating step", 2, append(slices.Repeat([]obs{{ms(20), 0, false}}, 9),
			append(slices.Repeat([]obs{{ms(30), 0, false}}, 5), obs{ms(50), 10240, false})...), 15360},
		{"at least a token", 2, []obs{{ms(20), 0, false}, {ms(2000), 1024, false}}, prefillUnit},
		{"at most twice: a token a step", 1, []obs{{ms(20), 0, false}, {ms(40), 10240, false}}, prefillUnit},
		{"fixed chunks", -1, []obs{{ms(20), 0, false}, {ms(40), 10240, false}}, 32 * prefillUnit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPrefillPacer(32, tc.slowdown)
			for _, o := range tc.steps {
				p.observe(o.d, o.units, o.short)
			}
			assert.InDelta(t, tc.want, p.budget(7), 2)
		})
	}
	// During a long prefill, every prefillProbe-th step is the generating
	// slots' alone; with fixed chunks, none.
	for _, tc := range []struct {
		name     string
		slowdown float64
		steps    []obs
		want     bool
	}{
		{"no prefill", 2, slices.Repeat([]obs{{ms(20), 0, false}}, 20), false},
		{"a chunk short of a probe", 2, append([]obs{{ms(20), 0, false}}, slices.Repeat([]obs{{ms(40), 1024, false}}, prefillProbe-2)...), false},
		{"a probe due", 2, append([]obs{{ms(20), 0, false}}, slices.Repeat([]obs{{ms(40), 1024, false}}, prefillProbe-1)...), true},
		{"short prompts do not count", 2, append([]obs{{ms(20), 0, false}}, slices.Repeat([]obs{{ms(40), 1024, true}}, 2*prefillProbe)...), false},
		{"after the probe", 2, append(append([]obs{{ms(20), 0, false}}, slices.Repeat([]obs{{ms(40), 1024, false}}, prefillProbe-1)...), obs{ms(20), 0, false}), false},
		{"fixed chunks", -1, append([]obs{{ms(20), 0, false}}, slices.Repeat([]obs{{ms(40), 1024, false}}, 2*prefillProbe)...), false},
	} {
		p := newPrefillPacer(32, tc.slowdown)
		for _, o := range tc.steps {
			p.observe(o.d, o.units, o.short)
		}
		assert.Equal(t, tc.want, p.probe(), tc.name)
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

// TestPrefillPacerAnchor: the target is slowdown times the generating step
// when the prefill began; the slots' growth since then, measured by probe
// steps, comes out of the prompt's share (down to half the slowdown's
// share over the step now), and a new set of generating
// slots or the end of the prefill sets the target again.
func TestPrefillPacerAnchor(t *testing.T) {
	// op: a step observed (d, units; a probe asked for first when probe),
	// or, with budget set, the budget asked beside nGen slots.
	type op struct {
		d      time.Duration
		units  int
		probe  bool
		budget bool
		nGen   int
	}
	gen := func(d float64, n int) []op { return slices.Repeat([]op{{d: ms(d)}}, n) }
	cat := func(parts ...[]op) []op { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name string
		ops  []op
		want int
	}{
		// 20 ms steps, then a chunk of 10,240 units taking 40 ms: 2 ms a
		// 1,024 units, and twice 20 ms leaves 20 ms.
		{"began", cat(gen(20, 9), []op{{budget: true, nGen: 7}, {d: ms(40), units: 10240}}), 10240},
		// The probes now find 24 ms steps: the target stays 40 ms, of
		// which 16 ms is left for the prompt (more than half of 24 ms);
		// the chunks' 44 ms for 10,240 units is 20 ms over the fresh step.
		{"the slots grew", cat(gen(20, 9), []op{{budget: true, nGen: 7}, {d: ms(40), units: 10240}},
			slices.Repeat([]op{{d: ms(24), probe: true}}, 9), []op{{d: ms(44), units: 10240}}), 8192},
		// Steps of 36 ms: 4 ms is left under the target, but the prompt
		// takes half of its share over 36 ms, 18 ms; the chunk's 56 ms for
		// 10,240 units was 20 ms over the step: 9,216 units.
		{"grew near the target: half the share", cat(gen(20, 9), []op{{budget: true, nGen: 7}, {d: ms(40), units: 10240}},
			slices.Repeat([]op{{d: ms(36), probe: true}}, 9), []op{{d: ms(56), units: 10240}}), 9216},
		{"grew past the target: half the share", cat(gen(20, 9), []op{{budget: true, nGen: 7}, {d: ms(40), units: 10240}},
			slices.Repeat([]op{{d: ms(60), probe: true}}, 9), []op{{d: ms(80), units: 10240}}), 15360},
		// An eighth generating slot: the target is set again from now.
		{"another slot", cat(gen(20, 9), []op{{budget: true, nGen: 7}, {d: ms(40), units: 10240}},
			slices.Repeat([]op{{d: ms(30), probe: true}}, 9), []op{{d: ms(50), units: 10240}, {budget: true, nGen: 8}}), 15360},
		// A plain step that was not a probe ends the prefill: the next one
		// sets its target from the steps then.
		{"a new prefill", cat(gen(20, 9), []op{{budget: true, nGen: 7}, {d: ms(40), units: 10240}},
			gen(30, 9), []op{{d: ms(50), units: 10240}}), 15360},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPrefillPacer(32, 2)
			for _, o := range tc.ops {
				switch {
				case o.budget:
					p.budget(o.nGen)
				case o.probe:
					p.mixed = prefillProbe - 1 // as after that many chunks
					require.True(t, p.probe())
					p.observe(o.d, 0, false)
				default:
					p.observe(o.d, o.units, false)
				}
			}
			assert.InDelta(t, tc.want, p.budget(7), 2)
		})
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
	_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: (n + 1) * 256}, Parallel: n + 1})
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
