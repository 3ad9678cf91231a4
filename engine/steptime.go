package engine

import "time"

// StepPhase is a part of the engine loop's time (see StepTimes).
type StepPhase int

// The phases of the loop's time. Every moment of the loop goroutine's
// life goes to exactly one of them.
const (
	// PhaseIdle: waiting for work, the compute threads paused.
	PhaseIdle StepPhase = iota
	// PhaseGather: an engine woken from idle holding its first step back
	// for the requests on their way and for a burst (see Expect).
	PhaseGather
	// PhaseStart: starting queued requests (samplers, prompt cache,
	// copies between slots) and freeing the slots of clients that left.
	PhaseStart
	// PhaseBatch: building the step's batch, drafts included with
	// speculative decoding.
	PhaseBatch
	// PhaseDecodeSubmit: llama_decode. On a GPU it returns once the work
	// is queued; on a CPU it computes the whole batch.
	PhaseDecodeSubmit
	// PhaseDecodeWait: waiting for the decode's work to finish
	// (llama_synchronize): the GPU's computation that submitting did not
	// cover; next to nothing on a CPU.
	PhaseDecodeWait
	// PhaseSample: reading the logits and sampling the slots' rows, and
	// the steps' bookkeeping before it (prompt progress, the end of
	// prompts, draft checks with speculative decoding).
	PhaseSample
	// PhaseEmit: making the events of the sampled tokens: detokenizing,
	// UTF-8 and stop strings, limits, pushing events to the streams, and
	// ending the requests that stop.
	PhaseEmit
	// PhaseOther: the rest: control calls (slot actions, adapters),
	// the snapshots for SlotsInfo and Metrics, pausing the threads.
	PhaseOther
	// NumStepPhases is the number of phases.
	NumStepPhases
)

var phaseNames = [NumStepPhases]string{"idle", "gather", "start", "batch", "decode_submit", "decode_wait", "sample", "emit", "other"}

// String returns the phase's name in snake case ("decode_wait"), the
// label of the server's llamacpp:step_seconds_total.
func (p StepPhase) String() string {
	if p < 0 || p >= NumStepPhases {
		return "unknown"
	}
	return phaseNames[p]
}

// StepTimes is the engine loop's time by phase since New, and its steps
// (the turns that decoded a batch). The phases add up to the loop's whole
// life: the difference of two snapshots says where the time between them
// went, on the loop's one goroutine. The loop reads the monotonic clock a
// few times a step and twice per sampled row (between sampling and
// emitting); a snapshot is as of the loop's last turn, the current idle
// wait included, so one taken while the engine is idle is exact.
type StepTimes struct {
	Steps int64
	Phase [NumStepPhases]time.Duration
	// Waiting is the part of Phase[PhaseIdle] that is the idle wait in
	// progress when the snapshot was taken (zero while the engine works).
	// Phase[PhaseIdle]-Waiting is the same in every snapshot of one idle
	// spell: a counter that must not move while nothing happens (a
	// sleeping server's metrics) reports that.
	Waiting time.Duration
}

// Total is the sum of the phases: the loop's time since New, as of the
// snapshot.
func (t StepTimes) Total() time.Duration {
	var d time.Duration
	for _, p := range t.Phase {
		d += p
	}
	return d
}

// Sub returns t - u, phase by phase: the time between two snapshots.
func (t StepTimes) Sub(u StepTimes) StepTimes {
	t.Steps -= u.Steps
	for i := range t.Phase {
		t.Phase[i] -= u.Phase[i]
	}
	t.Waiting -= u.Waiting
	return t
}

// Add returns t + u, phase by phase (the times of several engines, or of
// one engine's successive lives).
func (t StepTimes) Add(u StepTimes) StepTimes {
	t.Steps += u.Steps
	for i := range t.Phase {
		t.Phase[i] += u.Phase[i]
	}
	t.Waiting += u.Waiting
	return t
}

// stepClock is the loop's account of its time: mark gives the time since
// the previous mark to a phase. Only the loop goroutine uses it.
type stepClock struct {
	last time.Time
	t    StepTimes
}

func (c *stepClock) mark(p StepPhase) {
	now := time.Now()
	c.t.Phase[p] += now.Sub(c.last)
	c.last = now
}
