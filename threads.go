package llama

import (
	"runtime"
	"slices"

	"github.com/x/llama/internal/capi"
)

// ThreadPriority is the scheduling priority of a context's compute
// threads, as llama.cpp's --prio: on Linux, PriorityLow runs them under
// SCHED_BATCH and PriorityMedium, PriorityHigh and PriorityRealtime under
// SCHED_FIFO at 40, 80 and 90 (which needs CAP_SYS_NICE: NewContext fails
// without it). Real-time threads take their cores from every other thread
// of the machine while they compute and while they poll (see
// ThreadPoolOptions.Poll).
type ThreadPriority int

// The priorities, with ggml's numbering.
const (
	PriorityLow      ThreadPriority = -1
	PriorityNormal   ThreadPriority = 0 // inherited from the process (the default)
	PriorityMedium   ThreadPriority = 1
	PriorityHigh     ThreadPriority = 2
	PriorityRealtime ThreadPriority = 3
)

// ThreadPoolOptions sets how a context's compute threads run, as
// llama.cpp's --prio, --poll, --cpu-mask/--cpu-range and --cpu-strict.
// The zero value is ggml's defaults: inherited priority and placement,
// polling level 50.
//
// A decode computes on the calling goroutine's thread and on the pool's
// other threads. ggml places its own threads when it starts them; for
// the caller's, Decode and Encode lock the goroutine to its thread, apply
// Priority and CPUs for the call and restore what the thread had after
// it, so no other goroutine runs with them.
type ThreadPoolOptions struct {
	Priority ThreadPriority
	// Poll is how long the threads spin waiting for the next decode
	// before they sleep, from 1 to 100 (ggml's polling level: at its
	// default, 50, on the order of a hundred milliseconds on current
	// CPUs); 0: that default; negative: no polling (they sleep at once,
	// and the next decode wakes them).
	Poll int
	// CPUs the threads run on (Linux CPU numbers, below 512); nil: any.
	CPUs []int
	// StrictCPU pins each thread to one CPU of CPUs, in order (the
	// calling thread last), instead of letting every thread use them all.
	StrictCPU bool
}

// callerSchedule returns what o asks of the calling thread of an
// n-thread pool during a decode (nil: nothing).
func (o *ThreadPoolOptions) callerSchedule(n int) *schedule {
	if o.Priority == PriorityNormal && len(o.CPUs) == 0 {
		return nil
	}
	s := o.schedFor(n)
	return &s
}

func (o *ThreadPoolOptions) check() error {
	if o.Priority < PriorityLow || o.Priority > PriorityRealtime {
		return errorf(CodeInvalid, "new context", "thread priority %d out of range [-1, 3]", o.Priority)
	}
	if o.Poll > 100 {
		return errorf(CodeInvalid, "new context", "polling level %d above 100", o.Poll)
	}
	for _, cpu := range o.CPUs {
		if cpu < 0 || cpu >= len(capi.ThreadpoolParams{}.CPUMask) {
			return errorf(CodeInvalid, "new context", "CPU %d out of range [0, 512)", cpu)
		}
	}
	return nil
}

// checkThreads refuses a real-time pool of more threads than CPUs: ggml's
// threads wait for each other by spinning, and a SCHED_FIFO thread is not
// preempted by another of its priority, so two of them on one CPU would
// wait for each other for ever.
func (o *ThreadPoolOptions) checkThreads(n int) error {
	if o.Priority < PriorityMedium {
		return nil
	}
	cpus := runtime.NumCPU()
	if len(o.CPUs) > 0 {
		cpus = len(o.callerCPUs(0)) // the distinct CPUs (not strict: all)
	}
	if n > cpus {
		return errorf(CodeInvalid, "threads", "%d compute threads at priority %d on %d CPUs: real-time threads would wait for each other for ever; use as many CPUs as threads, or a lower priority", n, o.Priority, cpus)
	}
	return nil
}

// params returns ggml's threadpool parameters for n threads.
func (o *ThreadPoolOptions) params(n int, paused bool) capi.ThreadpoolParams {
	var p capi.ThreadpoolParams
	capi.ThreadpoolParamsInit(&p, int32(n))
	p.Paused = paused
	p.Prio = int32(o.Priority)
	switch {
	case o.Poll < 0:
		p.Poll = 0
	case o.Poll > 0:
		p.Poll = uint32(o.Poll)
	}
	for _, cpu := range o.CPUs {
		p.CPUMask[cpu] = true
	}
	p.StrictCPU = o.StrictCPU && len(o.CPUs) > 0
	return p
}

// callerCPUs returns the CPUs of the calling thread of an n-thread pool
// (nil: any): all of CPUs (distinct, sorted), or with StrictCPU the one
// ggml gives its thread 0, which it places after its n-1 workers, round
// the set CPUs in ascending order (n <= 0: all of them).
func (o *ThreadPoolOptions) callerCPUs(n int) []int {
	if len(o.CPUs) == 0 {
		return nil
	}
	cpus := slices.Clone(o.CPUs)
	slices.Sort(cpus)
	cpus = slices.Compact(cpus)
	if !o.StrictCPU || n <= 0 {
		return cpus
	}
	return []int{cpus[(n-1)%len(cpus)]}
}

// schedule is what a thread's scheduling is, or should become.
type schedule struct {
	setPolicy    bool // policy and prio apply (else unchanged)
	policy, prio int
	cpus         *cpuSet // the thread's CPUs; nil: unchanged
}

// cpuSet is a set of CPUs as the kernel takes it: a bit for each of 512
// (ggml's most), so that placing a thread for each decode converts
// nothing.
type cpuSet [512 / 64]uint64

func newCPUSet(cpus []int) *cpuSet {
	if cpus == nil {
		return nil
	}
	var set cpuSet
	for _, cpu := range cpus {
		set[cpu/64] |= 1 << (cpu % 64)
	}
	return &set
}

// schedFor returns what o asks of the calling thread of an n-thread
// pool.
func (o *ThreadPoolOptions) schedFor(n int) schedule {
	s := schedule{setPolicy: true, policy: schedOther, cpus: newCPUSet(o.callerCPUs(n))}
	switch o.Priority {
	case PriorityNormal:
		s.setPolicy = false // inherited: as the thread is
	case PriorityLow:
		s.policy = schedBatch
	case PriorityMedium:
		s.policy, s.prio = schedFIFO, 40
	case PriorityHigh:
		s.policy, s.prio = schedFIFO, 80
	case PriorityRealtime:
		s.policy, s.prio = schedFIFO, 90
	}
	return s
}

// pinCaller locks the goroutine to its thread and applies s to it,
// returning the function that restores the thread and unlocks it.
func pinCaller(s schedule) (restore func(), err error) {
	runtime.LockOSThread()
	old, err := getSchedule()
	if err == nil {
		if err = setSchedule(s); err != nil {
			_ = setSchedule(old)
		}
	}
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		if setSchedule(old) != nil {
			// The thread keeps what the decode had: the goroutine stays
			// on it rather than let Go run others there.
			return
		}
		runtime.UnlockOSThread()
	}, nil
}

// onScratchThread runs f locked to a thread and gives the thread its
// scheduling back after: ggml applies a pool's priority and placement to
// the thread that starts it, and Go would run other goroutines there. A
// panic of f is returned as a *PanicError (on a goroutine of its own, it
// would end the process); the thread then ends with the goroutine, its
// scheduling unknown.
func onScratchThread(f func()) error {
	done := make(chan error, 1)
	go func() {
		var perr error
		defer func() { done <- perr }()
		runtime.LockOSThread()
		old, err := getSchedule()
		func() {
			defer func() {
				if v := recover(); v != nil {
					perr = NewPanicError("threads", v)
				}
			}()
			f()
		}()
		if perr == nil && err == nil && setSchedule(old) == nil {
			runtime.UnlockOSThread()
		} // else the thread ends with the goroutine, still locked
	}()
	return <-done
}

// equal reports whether o and p ask the same of a pool.
func (o *ThreadPoolOptions) equal(p *ThreadPoolOptions) bool {
	return o.Priority == p.Priority && o.Poll == p.Poll && o.StrictCPU == p.StrictCPU && slices.Equal(o.CPUs, p.CPUs)
}
