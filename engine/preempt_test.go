package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

// engHold blocks e's loop until the returned func is called, so that
// requests submitted meanwhile start in the same step (a schedule, and
// so a layout of the shared memory, that does not depend on timing).
func engHold(t *testing.T, e *Engine) func() {
	started, release := make(chan struct{}), make(chan struct{})
	go e.do(func() { close(started); <-release })
	<-started
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	return free
}

// engWhen is a request to submit once its condition holds.
type engWhen struct {
	cond func() bool
	req  *Request
}

// engSubmitWhen arranges for each request of ws to be submitted from e's
// loop, right before the first decode at which its condition holds (in
// order: the next condition is checked once the previous request is
// submitted), so that the schedule does not depend on timing; the
// returned func waits for them and returns their streams. Call it while
// e is idle, before submitting what the conditions wait for.
func engSubmitWhen(t *testing.T, e *Engine, ws ...engWhen) func() []*Stream {
	out := make([]*Stream, len(ws))
	done := make(chan struct{})
	next := 0
	testBeforeDecode = func() {
		for next < len(ws) && ws[next].cond() {
			st, err := e.Submit(context.Background(), ws[next].req)
			if err != nil {
				t.Error(err)
			}
			out[next] = st
			if next++; next == len(ws) {
				close(done)
			}
		}
	}
	t.Cleanup(func() { testBeforeDecode = nil })
	return func() []*Stream {
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the conditions never held")
		}
		return out
	}
}

// TestEnginePreemption: requests that together overrun the KV memory the
// slots share all end, each with the tokens it has alone, whether the
// memory fills during their prompts or their generation, with or without
// an NPredict; a request cancelled while preempted ends and the others
// go on.
func TestEnginePreemption(t *testing.T) {
	long := strings.Repeat("Once upon a time, there was a little girl named Lily. ", 6)
	for _, tt := range []struct {
		name     string
		parallel int
		prompts  []string
		npredict []int
		batch    int
		cancel   int // index of a request cancelled once preempted (-1: none)
	}{
		{"generation fills", 4, []string{"A", "A", "A", "A"}, []int{90, 90, 90, 90}, 0, -1},
		{"prompts fill", 3, []string{long, long + "And", long + "Then"}, []int{100, 150, 150}, 16, -1},
		{"no NPredict", 3, []string{"Once", "The dog", "A cat"}, []int{-1, -1, -1}, 0, -1},
		{"cancelled while preempted", 3, []string{"Once", "The dog", "A cat"}, []int{200, 200, 200}, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Parallel: tt.parallel, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true, BatchSize: tt.batch}})
			var tasks []*Request
			var alone []engResult
			for i, p := range tt.prompts {
				tk := engGreedyTask(engTokenize(t, m, p, true), tt.npredict[i])
				tk.Params.IgnoreEOS = true
				tasks = append(tasks, tk)
				if i != tt.cancel {
					alone = append(alone, engRun(t, e, tk))
				} else {
					alone = append(alone, engResult{})
				}
			}
			before := e.Metrics().PreemptionsTotal
			results := make([]engResult, len(tasks))
			var wg sync.WaitGroup
			release := engHold(t, e)
			for i, tk := range tasks {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				st, err := e.Submit(ctx, tk)
				require.NoError(t, err)
				if i == tt.cancel {
					// The last started is the one preempted.
					wg.Go(func() {
						for e.Metrics().PreemptionsTotal == before {
							time.Sleep(time.Millisecond)
						}
						cancel()
						for st.Next() {
						}
						st.Close()
					})
					continue
				}
				wg.Go(func() { results[i] = engCollect(t, st) })
			}
			release()
			wg.Wait()
			assert.Greater(t, e.Metrics().PreemptionsTotal, before, "the memory filled")
			for i, r := range results {
				if i == tt.cancel {
					continue
				}
				require.NoError(t, r.done.Err, "request %d", i)
				if tt.cancel < 0 {
					// The schedule is the same each run; where it depends
					// on a cancel, rounding differences of other batches
					// can change a greedy token.
					assert.Equal(t, alone[i].tokens, r.tokens, "request %d", i)
				}
				assert.Equal(t, alone[i].done.Generated, r.done.Generated, "request %d", i)
				assert.Equal(t, alone[i].done.Truncated, r.done.Truncated, "request %d", i)
			}
			r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once", true), 16))
			assert.Equal(t, 16, r.done.Generated, "the engine goes on")
		})
	}
}

// TestEnginePreemptionHeldMemory: a preempted request that wakes while
// another request's prompt, decoded in part and left out of the batch,
// holds the memory, waits again rather than failing.
func TestEnginePreemptionHeldMemory(t *testing.T) {
	o := Options{Parallel: 3, PrefillChunk: -1, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true, BatchSize: 64}}
	m, _ := newEngTestEngine(t, o)
	px := engTokenize(t, m, strings.Repeat("The dog ran to the park and played with a ball. ", 20), true)[:250]
	for _, at := range []int{61, 70, 80} {
		_, e := newEngTestEngine(t, o)
		w := engGreedyTask(engTokenize(t, m, "Once", true), -1)
		w.Params.IgnoreEOS = true
		g := engGreedyTask(engTokenize(t, m, "The dog", true), 4)
		g.Params.IgnoreEOS = true
		x := engGreedyTask(px, 3)
		at := at
		wait := engSubmitWhen(t, e,
			engWhen{func() bool { return len(e.slots[0].cache) >= at }, g},
			engWhen{func() bool { return true }, x})
		sw, err := e.Submit(context.Background(), w)
		require.NoError(t, err)
		sts := wait()
		sg, sx := sts[0], sts[1]
		for name, st := range map[string]*Stream{"W": sw, "G": sg, "X": sx} {
			r := engCollect(t, st)
			require.NoError(t, r.done.Err, "at %d: %s after %d tokens", at, name, len(r.tokens))
		}
		assert.Positive(t, e.Metrics().PreemptionsTotal, "at %d", at)
		e.Close()
	}
}

// TestEnginePreemptionPromptProbs: a request preempted in its prompt
// still gives each prompt token's probability once, and its text.
func TestEnginePreemptionPromptProbs(t *testing.T) {
	m, e := newEngTestEngine(t, Options{PrefillChunk: -1, Parallel: 2, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true, BatchSize: 16}})
	prompt := engTokenize(t, m, strings.Repeat("Once upon a time, there was a little girl named Lily. ", 13), true)[:197]
	mk := func() *Request {
		r := engGreedyTask(prompt, -1)
		r.PromptProbs = true
		r.Params.NProbs = 1
		r.Params.IgnoreEOS = true
		return r
	}
	alone := engRun(t, e, mk())
	probs := func(r engResult) []PromptProb {
		var pp []PromptProb
		for _, ev := range r.events {
			pp = append(pp, ev.PromptProbs...)
		}
		return append(pp, r.done.PromptProbs...)
	}
	want := probs(alone)
	for _, at := range []int{50, 60, 70, 80} {
		b := engGreedyTask(engTokenize(t, m, "Once", true), 100)
		b.Params.IgnoreEOS = true
		before := e.Metrics().PreemptionsTotal
		at := at
		wait := engSubmitWhen(t, e, engWhen{func() bool {
			n := 0
			for _, s := range e.slots {
				if s.tk != nil { // B, alone
					n = len(s.cache)
				}
			}
			return n >= at
		}, mk()})
		sb, err := e.Submit(context.Background(), b)
		require.NoError(t, err)
		sx := wait()[0]
		rb, rx := engCollect(t, sb), engCollect(t, sx)
		require.NoError(t, rb.done.Err, "at %d", at)
		require.NoError(t, rx.done.Err, "at %d", at)
		require.Greater(t, e.Metrics().PreemptionsTotal, before, "at %d", at)
		got := probs(rx)
		require.Len(t, got, len(want), "at %d", at)
		for i := range want {
			assert.Equal(t, want[i].Token.Token, got[i].Token.Token, "at %d: prompt token %d", at, i)
			assert.InDelta(t, want[i].Token.Logprob, got[i].Token.Logprob, 0.05, "at %d: prompt token %d", at, i)
		}
		assert.Equal(t, alone.done.Generated, rx.done.Generated, "at %d", at)
	}
}

// TestEnginePreemptionShift: a context shift in the step the shared
// memory fills stays done when the batch is undone: every request ends
// without error.
func TestEnginePreemptionShift(t *testing.T) {
	o := Options{Parallel: 3, PrefillChunk: -1, ContextShift: true, KVUnifiedPerSlot: 200, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}}
	m, e := newEngTestEngine(t, o)
	a := engGreedyTask(engTokenize(t, m, "Once", true), 300)
	a.Params.IgnoreEOS = true
	b := engGreedyTask(engTokenize(t, m, "The dog", true), 250)
	b.Params.IgnoreEOS = true
	c := engGreedyTask(engTokenize(t, m, strings.Repeat("The dog ran to the park and played with a ball. ", 12), true)[:150], 3)
	wait := engSubmitWhen(t, e,
		engWhen{func() bool { return len(e.slots[0].cache) >= 160 }, b},
		engWhen{func() bool { return len(e.slots[0].cache) >= 199 }, c})
	sa, err := e.Submit(context.Background(), a)
	require.NoError(t, err)
	sts := wait()
	sb, sc := sts[0], sts[1]
	for name, st := range map[string]*Stream{"A": sa, "B": sb, "C": sc} {
		r := engCollect(t, st)
		require.NoError(t, r.done.Err, name)
	}
	assert.Positive(t, e.Metrics().PreemptionsTotal)
}

// TestEnginePreemptionStress: a hundred requests arriving a few
// milliseconds apart on eight slots that share 256 cells, one in five
// cancelled mid-stream: every other request ends in full, and the engine
// goes on.
func TestEnginePreemptionStress(t *testing.T) {
	m, e := newEngTestEngine(t, Options{QueueSize: 1000, Parallel: 8, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}})
	prompts := []string{"Once upon a time", "The dog", "Lily and Tom went to the park. ", strings.Repeat("A cat ", 20), strings.Repeat("Once upon a time, there was a little girl named Lily. ", 4)}
	var wg sync.WaitGroup
	for i := range 100 {
		n := []int{40, 120}[i%2]
		tk := engGreedyTask(engTokenize(t, m, prompts[(i*7)%len(prompts)], true), n)
		tk.Params.IgnoreEOS = true
		ctx, cancel := context.WithCancel(context.Background())
		st, err := e.Submit(ctx, tk)
		require.NoError(t, err)
		abort := i%5 == 2
		wg.Go(func() {
			defer cancel()
			if abort {
				for k := 0; st.Next(); k++ {
					if k == i%17 {
						cancel()
					}
				}
				st.Close()
				return
			}
			r := engCollect(t, st)
			assert.NoError(t, r.done.Err, "request %d", i)
			assert.Equal(t, n, r.done.Generated, "request %d", i)
		})
		time.Sleep(time.Duration((i*37)%40) * time.Millisecond / 4)
	}
	wg.Wait()
	assert.Positive(t, e.Metrics().PreemptionsTotal)
	r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once", true), 16))
	assert.Equal(t, 16, r.done.Generated)
}

// TestEnginePreemptionEndless: beside a request that never ends (context
// shift, no NPredict), a short request still starts and ends (in the
// memory the shifts free), and a preempted request that cannot fit
// beside it gets its turn: the endless one yields to it at a shift,
// whether it waited still or woke after each shift only to be preempted
// again before it went on.
func TestEnginePreemptionEndless(t *testing.T) {
	for _, after := range []int{0, 30} { // B starts with A, or once A holds 30 cells
		t.Run(fmt.Sprintf("after %d", after), func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Parallel: 3, ContextShift: true, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}})
			a := engGreedyTask(engTokenize(t, m, "Once", true), -1)
			a.Params.IgnoreEOS = true
			b := engGreedyTask(engTokenize(t, m, "The dog", true), 150)
			b.Params.IgnoreEOS = true
			ctxA, cancelA := context.WithCancel(context.Background())
			defer cancelA()
			var sb *Stream
			wait := engSubmitWhen(t, e, engWhen{func() bool { return len(e.slots[0].cache) >= after }, b})
			sa, err := e.Submit(ctxA, a)
			require.NoError(t, err)
			sb = wait()[0]
			go func() {
				for sa.Next() {
				}
				sa.Close()
			}()
			for e.Metrics().PreemptionsTotal == 0 {
				time.Sleep(time.Millisecond)
			}
			rc := engRun(t, e, engGreedyTask(engTokenize(t, m, "Tom", true), 5))
			assert.Equal(t, 5, rc.done.Generated, "a short request beside the endless one")
			rb := engCollect(t, sb)
			require.NoError(t, rb.done.Err)
			assert.Equal(t, 150, rb.done.Generated)
			cancelA()
			r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Lily", true), 4))
			assert.Equal(t, 4, r.done.Generated, "the engine goes on")
		})
	}
}

// TestEnginePreemptionWaitBound: a preempted request that has waited its
// bound ends with the context error, and the engine goes on.
func TestEnginePreemptionWaitBound(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}})
	tasks := []*Request{engGreedyTask(engTokenize(t, m, "Once", true), 200), engGreedyTask(engTokenize(t, m, "The dog", true), 200)}
	for _, tk := range tasks {
		tk.Params.IgnoreEOS = true
	}
	aged := false
	testBeforeDecode = func() {
		if s := e.slots[1]; !aged && s.state == stWait {
			s.waited, aged = maxWaitSlots*e.nCtxSlot, true // as if it had waited that long
		}
	}
	t.Cleanup(func() { testBeforeDecode = nil })
	release := engHold(t, e)
	var sts []*Stream
	for _, tk := range tasks {
		st, err := e.Submit(context.Background(), tk)
		require.NoError(t, err)
		sts = append(sts, st)
	}
	release()
	ra, rb := engCollect(t, sts[0]), engCollect(t, sts[1])
	require.NoError(t, ra.done.Err)
	assert.Equal(t, 200, ra.done.Generated)
	require.ErrorIs(t, rb.done.Err, errWaitedTooLong)
	assert.Contains(t, rb.done.Err.Error(), "context size has been exceeded")
	r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Lily", true), 4))
	assert.Equal(t, 4, r.done.Generated, "the engine goes on")
}

// TestEnginePreemptionLongShifting: beside a finite request that context
// shift keeps going for six slot contexts, a request preempted with more
// tokens than a shift frees gets its turn and ends in full.
func TestEnginePreemptionLongShifting(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Parallel: 2, PrefillChunk: -1, ContextShift: true, Context: llama.ContextOptions{ContextSize: 256, KVUnified: true}})
	a := engGreedyTask(engTokenize(t, m, "Once", true), 1500)
	a.Params.IgnoreEOS = true
	b := engGreedyTask(engTokenize(t, m, strings.Repeat("The dog ran to the park and played with a ball. ", 12), true)[:100], 120)
	b.Params.IgnoreEOS = true
	release := engHold(t, e)
	sa, err := e.Submit(context.Background(), a)
	require.NoError(t, err)
	sb, err := e.Submit(context.Background(), b)
	require.NoError(t, err)
	release()
	done := make(chan engResult)
	go func() { done <- engCollect(t, sa) }()
	rb := engCollect(t, sb)
	ra := <-done
	require.NoError(t, ra.done.Err)
	assert.Equal(t, 1500, ra.done.Generated)
	require.NoError(t, rb.done.Err)
	assert.Equal(t, 120, rb.done.Generated)
	assert.Positive(t, e.Metrics().PreemptionsTotal)
}
