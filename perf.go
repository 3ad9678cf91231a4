package llama

import (
	"github.com/x/llama/internal/capi"
)

// Perf holds a context's performance counters (with Perf in the options).
type Perf struct {
	LoadMs, PromptMs, EvalMs float64
	PromptTokens, EvalTokens int
	GraphReuses              int
}

// Perf returns the performance counters.
func (c *Context) Perf() (Perf, error) {
	if err := c.lock("perf"); err != nil {
		return Perf{}, err
	}
	defer c.unlock()
	d := capi.PerfContext(c.ptr)
	return Perf{LoadMs: d.TLoadMs, PromptMs: d.TPEvalMs, EvalMs: d.TEvalMs, PromptTokens: int(d.NPEval),
		EvalTokens: int(d.NEval), GraphReuses: int(d.NReused)}, nil
}

// ResetPerf zeroes the performance counters.
func (c *Context) ResetPerf() error {
	if err := c.lock("perf"); err != nil {
		return err
	}
	defer c.unlock()
	capi.PerfContextReset(c.ptr)
	return nil
}
