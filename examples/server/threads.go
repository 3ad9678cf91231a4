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

// cpuRange takes a -Cr value: lo-hi, either end optional.
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

// over returns base with what f gives set over it (base's CPUs are not
// shared with the result).
func (f *threadFlags) over(base llama.ThreadPoolOptions) llama.ThreadPoolOptions {
	o := base
	o.CPUs = slices.Clone(base.CPUs)
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
	return o
}

func (f *threadFlags) given() bool {
	return f.cpus != nil || f.strict != nil || f.prio != nil || f.poll != nil
}

// threadPools sets the engine's pools from the flags. As llama.cpp's
// defaults go, the batch pool is the generation pool's settings with the
// -batch flags over them, the draft model's the target's with the -draft
// flags over them, and its batches' the draft's with the -batch-draft
// flags over those.
func (c *config) threadPools() {
	e := &c.opts.Engine
	sd := &e.Speculative
	e.Context.ThreadPool = c.threads.over(e.Context.ThreadPool)
	if c.threadsBatch.given() {
		b := c.threadsBatch.over(e.Context.ThreadPool)
		e.Context.ThreadPoolBatch = &b
	}
	draft := e.Context.ThreadPool
	if c.threadsDraft.given() {
		draft = c.threadsDraft.over(e.Context.ThreadPool)
		sd.DraftThreadPool = &draft
	}
	if c.threadsDraftBatch.given() {
		b := c.threadsDraftBatch.over(draft)
		sd.DraftThreadPoolBatch = &b
	}
}
