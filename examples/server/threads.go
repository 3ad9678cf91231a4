package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/x/llama"
)

// threadFlags is what -C, -Cr, --cpu-strict, --prio and --poll (or their
// -batch forms) set of a compute thread pool; nil fields were not given.
type threadFlags struct {
	cpus       map[int]bool // -C and -Cr together (llama.cpp ORs them)
	strict     *bool
	prio, poll *int
}

// maxCPUs is ggml's most threads, and the CPUs a mask may name.
const maxCPUs = 512

func (f *threadFlags) addCPUs(lo, hi int) {
	if f.cpus == nil {
		f.cpus = map[int]bool{}
	}
	for i := lo; i <= hi; i++ {
		f.cpus[i] = true
	}
}

// mask takes a -C value: hex digits (optional 0x), the last digit for CPUs
// 0-3; as llama.cpp, only the first 128 digits count.
func (f *threadFlags) mask(_ *config, v string) error {
	if err := cpuMask(nil, v); err != nil {
		return err
	}
	s := strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X")
	s = s[:min(len(s), maxCPUs/4)]
	for i, r := range s {
		d, _ := strconv.ParseUint(string(r), 16, 8)
		base := 4 * (len(s) - 1 - i)
		for bit := range 4 {
			if d&(1<<bit) != 0 {
				f.addCPUs(base+bit, base+bit)
			}
		}
	}
	if f.cpus == nil {
		f.cpus = map[int]bool{} // given, even if empty
	}
	return nil
}

// cpuRangeOf takes a -Cr value: lo-hi, either end optional.
func (f *threadFlags) cpuRange(_ *config, v string) error {
	if err := cpuRange(nil, v); err != nil {
		return err
	}
	lo, hi, _ := strings.Cut(v, "-")
	a, b := 0, maxCPUs-1
	if lo != "" {
		a, _ = strconv.Atoi(lo)
	}
	if hi != "" {
		b, _ = strconv.Atoi(hi)
	}
	if a < 0 || a >= maxCPUs || b >= maxCPUs {
		return errors.New("invalid range: CPUs are 0 to 511")
	}
	f.addCPUs(a, b)
	return nil
}

func (f *threadFlags) setStrict(_ *config, v string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not a non-negative integer", v)
	}
	on := n != 0
	f.strict = &on
	return nil
}

func (f *threadFlags) setPrio(c *config, v string) error {
	if err := prio(c, v); err != nil {
		return err
	}
	n, _ := parseInt(v)
	f.prio = &n
	return nil
}

// setPoll takes a polling level (llama.cpp's std::stoul: any unsigned;
// ggml spins about that many milliseconds, so above 100 is refused).
func (f *threadFlags) setPoll(_ *config, v string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not a non-negative integer", v)
	}
	if n > 100 {
		return fmt.Errorf("polling level %d above 100", n)
	}
	p := int(n)
	f.poll = &p
	return nil
}

// apply sets what f gives onto o.
func (f *threadFlags) apply(o *llama.ThreadPoolOptions) {
	if f.cpus != nil {
		o.CPUs = nil
		for cpu := range f.cpus {
			o.CPUs = append(o.CPUs, cpu)
		}
		slices.Sort(o.CPUs)
	}
	if f.strict != nil {
		o.StrictCPU = *f.strict
	}
	if f.prio != nil {
		o.Priority = llama.ThreadPriority(*f.prio)
	}
	if f.poll != nil {
		o.Poll = *f.poll
		if o.Poll == 0 {
			o.Poll = -1 // llama.cpp's 0: no polling
		}
	}
}

func (f *threadFlags) given() bool {
	return f.cpus != nil || f.strict != nil || f.prio != nil || f.poll != nil
}

// threadPools sets the engine's pools from the flags: the batch pool is the
// generation pool's settings with its own flags over them (llama.cpp's
// -batch defaults are the plain flags').
func (c *config) threadPools() {
	e := &c.opts.Engine
	c.threads.apply(&e.ThreadPool)
	if c.threadsBatch.given() {
		b := e.ThreadPool
		b.CPUs = slices.Clone(b.CPUs)
		c.threadsBatch.apply(&b)
		e.ThreadPoolBatch = &b
	}
	// The draft model's: the target's with the -draft flags over them,
	// and its batches' the draft's with the -batch-draft flags over those.
	sd := &e.Speculative
	if c.threadsDraft.given() {
		d := e.ThreadPool
		d.CPUs = slices.Clone(d.CPUs)
		c.threadsDraft.apply(&d)
		sd.DraftThreadPool = &d
	}
	if c.threadsDraftBatch.given() {
		b := e.ThreadPool
		if sd.DraftThreadPool != nil {
			b = *sd.DraftThreadPool
		}
		b.CPUs = slices.Clone(b.CPUs)
		c.threadsDraftBatch.apply(&b)
		sd.DraftThreadPoolBatch = &b
	}
}
