package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestStepTimes: the loop's time by phase. Between two snapshots taken
// while the engine is idle, the phases add up to the time between the
// snapshots (no more than the time around the two calls, no less than
// the time between them), the steps are the decodes, and every phase a
// generation must go through took time.
func TestStepTimes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		clients       int
		sampleThreads int
		stop          []string // exercises the stop-string path of emitting
	}{
		{name: "one client", clients: 1},
		{name: "four clients", clients: 4},
		{name: "four clients sampled in parallel", clients: 4, sampleThreads: 2},
		{name: "stop strings", clients: 2, stop: []string{"zzzz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 256 * tc.clients},
				Parallel: tc.clients, SampleThreads: tc.sampleThreads})
			prompt := engTokenize(t, m, "Once upon a time", true)
			// snapshot takes Metrics while the loop waits for work, the
			// same wait from before the call to after it, and the times
			// around the call.
			snapshot := func() (before time.Time, m Metrics, after time.Time) {
				for {
					require.Eventually(t, e.parked.Load, time.Minute, 100*time.Microsecond)
					n := e.parks.Load()
					before = time.Now()
					m = e.Metrics()
					after = time.Now()
					if e.parked.Load() && e.parks.Load() == n {
						return before, m, after
					}
				}
			}
			before0, m0, after0 := snapshot()
			// An idle engine's snapshot includes the wait so far. (The sleep
			// is the subject: idle time passing, nothing to wait for.)
			time.Sleep(2 * time.Millisecond)
			assert.GreaterOrEqual(t, e.Metrics().Steps.Phase[PhaseIdle]-m0.Steps.Phase[PhaseIdle], 2*time.Millisecond,
				"the idle wait in progress")

			const nGen = 16
			var wg sync.WaitGroup
			for range tc.clients {
				wg.Go(func() {
					req := engGreedyTask(prompt, nGen)
					req.Params.IgnoreEOS = true
					req.Stop = tc.stop
					r := engRun(t, e, req)
					assert.Equal(t, nGen, r.done.Generated)
				})
			}
			wg.Wait()
			before1, m1, after1 := snapshot()

			d := m1.Steps.Sub(m0.Steps)
			assert.Equal(t, m1.DecodeTotal-m0.DecodeTotal, d.Steps, "steps are decodes")
			assert.GreaterOrEqual(t, d.Steps, int64(nGen), "a decode for the prompt and one per token after the first")
			for _, p := range []StepPhase{PhaseIdle, PhaseStart, PhaseBatch, PhaseDecodeSubmit, PhaseDecodeWait, PhaseSample, PhaseEmit, PhaseOther} {
				assert.Positive(t, d.Phase[p], "phase %s", p)
			}
			for p, v := range d.Phase {
				assert.GreaterOrEqual(t, v, time.Duration(0), "phase %s", StepPhase(p))
			}
			// The phases cover the loop's whole life, idle or not.
			assert.LessOrEqual(t, d.Total(), after1.Sub(before0), "phases over the time around the snapshots")
			assert.GreaterOrEqual(t, d.Total(), before1.Sub(after0), "phases under the time between the snapshots")
			assert.Equal(t, m1.Steps, m0.Steps.Add(d))
		})
	}
}

func TestStepPhaseString(t *testing.T) {
	for _, tc := range []struct {
		p    StepPhase
		want string
	}{
		{PhaseIdle, "idle"}, {PhaseGather, "gather"}, {PhaseStart, "start"}, {PhaseBatch, "batch"},
		{PhaseDecodeSubmit, "decode_submit"}, {PhaseDecodeWait, "decode_wait"}, {PhaseSample, "sample"},
		{PhaseEmit, "emit"}, {PhaseOther, "other"}, {NumStepPhases, "unknown"}, {-1, "unknown"},
	} {
		assert.Equal(t, tc.want, tc.p.String())
	}
}
