package llama

import (
	"runtime"
	"sync/atomic"

	"github.com/x/llama/internal/capi"
)

// A SampleJob is one sampling of Context.SampleParallel: Chain picks a
// token from the logits of batch entry Index of the last Decode (-1: the
// last entry), as Chain.Sample(ctx, Index) would, and the result goes to
// Token and Err.
type SampleJob struct {
	Chain *SamplerChain
	Index int

	Token Token
	Err   error
}

// SampleParallel runs the jobs' samplings, up to workers of them at once:
// on the calling goroutine and on at most workers-1 others (workers of 0
// or less: runtime.GOMAXPROCS(0)). Each job's outcome is what
// Job.Chain.Sample(c, Job.Index) would give; several jobs of one chain run
// one after another, in the order of jobs, and chains holding Go samplers
// (Custom, grammars) run on the calling goroutine. It returns an error
// only when c itself cannot be used (closed, or in use by another call);
// the jobs' own errors are in their Err.
//
// A job that panics (in the package's own code: Go samplers, whose panics
// are their chain's errors, run on the calling goroutine) fails with a
// *PanicError in its Err; the other jobs are unaffected.
//
// It is for the step of a continuous-batching loop: after one Decode of
// several sequences, each sequence's chain samples its own row, and with a
// large vocabulary that is worth spreading over the cores the decode's
// threads leave waiting. It returns when every job is done.
func (c *Context) SampleParallel(jobs []SampleJob, workers int) error {
	if err := c.lock("sample"); err != nil {
		return err
	}
	defer c.unlock()
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Lock the chains of the jobs that may run anywhere; a chain seen a
	// second time, or held by another call, or with Go samplers, waits
	// for the calling goroutine after the parallel part.
	par := make([]int, 0, len(jobs))
	var later []int
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.Chain == nil:
			j.Token, j.Err = NoToken, errorf(CodeInvalid, "sample", "nil *SamplerChain")
		case !j.Chain.hasGo && j.Chain.mu.TryLock():
			if j.Chain.ptr == 0 {
				j.Chain.mu.Unlock()
				j.Token, j.Err = NoToken, closedErr("sample", "sampler chain")
				continue
			}
			par = append(par, i)
		default:
			later = append(later, i)
		}
	}
	// run samples job i, whose chain the caller has locked, and unlocks it.
	run := func(i int) { runJob(c, &jobs[i]) }
	if n := min(workers, len(par)); n <= 1 {
		for _, i := range par {
			run(i)
		}
	} else {
		// llama.cpp puts the rows of outputs a decode computed out of order
		// back in place on the first read of any; that read writes, so it
		// is done here, before the rows are read at once.
		capi.GetLogits(c.ptr)
		// Jobs are claimed one at a time, so that a helper that starts
		// late takes less; the caller waits only for the jobs a helper
		// has claimed, not for a helper still to be scheduled.
		var next, left atomic.Int32
		left.Store(int32(len(par)))
		done := make(chan struct{})
		work := func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(par) {
					return
				}
				run(par[k])
				if left.Add(-1) == 0 {
					close(done)
				}
			}
		}
		for range n - 1 {
			go work()
		}
		work()
		<-done
	}
	for _, i := range later {
		if err := jobs[i].Chain.lock("sample"); err != nil {
			jobs[i].Token, jobs[i].Err = NoToken, err
			continue
		}
		run(i)
	}
	return nil
}

// runJob samples j, whose chain the caller has locked, and unlocks it. A
// panic becomes the job's error (a *PanicError): on a helper goroutine it
// would end the process, and the caller waits for every job it counts.
func runJob(c *Context, j *SampleJob) {
	defer j.Chain.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			j.Token, j.Err = NoToken, NewPanicError("sample", v)
		}
	}()
	j.Token, j.Err = j.Chain.sampleLocked(c, j.Index, true)
}
