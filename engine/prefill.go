package engine

import (
	"slices"
	"time"
)

// Chunked prefill: how many prompt tokens a step takes while other slots
// generate.
//
// A step's decode time grows with its tokens, and on a CPU a prompt token
// deep in a long prompt costs several times one at the start (its
// attention reads every token before it, and small batches do not reach
// the matrix kernels' speed). Were a long prompt decoded in whole batches
// beside generating slots, their streams would stall for seconds; in
// chunks of a fixed number of tokens, the steps would grow as the prompt
// does. So the engine measures what steps cost and sizes each chunk for a
// time: a step with prompt tokens should take about Options.PrefillSlowdown
// times a step of the generating slots alone when the prefill began (while
// the same slots generate: a new one starts the count again), the prompt
// taking at least half of the slowdown's share over their step now.
//
// prefillPacer keeps the two figures this needs: the median time of the
// last steps without prompt tokens, and a moving average of the time a
// unit of prompt work adds to a step (a token at position p is
// prefillUnit+p units: one for the weights and as much again for each
// prefillUnit tokens it attends to, so that one estimate holds from the
// start of a prompt to its end). A step of the generating slots alone
// costs more as their own sequences grow, so during a long prefill every
// prefillProbe-th step takes no prompt tokens: it measures that step
// afresh. Without it, the generating slots' growth over a prefill of
// seconds would be charged to the prompt's units, and the chunks would
// shrink to a token a step.
// Prompts of at most Options.PrefillChunk units' worth go whole, whatever
// the budget (a new request's short prompt does not wait behind a long
// one), and until both figures are known a chunk is PrefillChunk tokens at
// the start of a sequence.
type prefillPacer struct {
	slowdown float64 // target step time over the generating step time
	initial  int     // units of a chunk before the costs are known
	unit     float64 // seconds a unit of prompt work adds to a step (0: unknown)
	// The last generating steps' times: their median is the generating
	// step (genStep), since a step slowed by something else (a request
	// being parsed beside it, another process) would pull a mean up, and
	// the chunks with it.
	recent        [prefillRecent]float64
	nRecent, next int
	mixed         int  // steps with long-prompt work since the last without
	probing       bool // the step being run is a probe
	// The generating step when the prefill began, beside anchorN
	// generating slots (0: no prefill): the target is slowdown times it,
	// not the generating step now, which grows with the slots' sequences.
	anchor  float64
	anchorN int
}

// prefillRecent is how many generating steps genStep is the median of:
// enough that one slow step does not move it, few enough that during a
// prefill (a generating step every prefillProbe steps) it follows the
// slots' growth within seconds.
const prefillRecent = 9

// prefillProbe is how often, during a long prefill, a step is left to the
// generating slots alone.
const prefillProbe = 8

// prefillEMA is the weight of a new measure in the moving average of a
// unit's cost: steps are noisy (another process, a thread descheduled),
// and the cost of a unit drifts slowly as a prompt goes deeper.
const prefillEMA = 0.25

// prefillUnit is the cost of a prompt token at position 0.
const prefillUnit = 1024

// testStepTime, when set, replaces a step's measured decode time in what
// the pacer sees, so that its chunks follow a cost model instead of the
// machine's noise. Tests set it before New and clear it after Close (the
// loop reads it only between the two). Nil outside tests.
var testStepTime func(measured time.Duration, longUnits int) time.Duration

func newPrefillPacer(chunk int, slowdown float64) *prefillPacer {
	return &prefillPacer{slowdown: slowdown, initial: chunk * prefillUnit}
}

// genStep returns the median time of the last steps without prompt
// tokens, in seconds (0: none yet). It sorts a copy, so it is worked out
// only when a long prompt needs it, not at every step.
func (p *prefillPacer) genStep() float64 {
	if p.nRecent == 0 {
		return 0
	}
	var buf [prefillRecent]float64
	sorted := buf[:p.nRecent]
	copy(sorted, p.recent[:p.nRecent])
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// probe reports whether the next step beside generating slots should take
// no long-prompt work, to measure a generating step afresh.
func (p *prefillPacer) probe() bool {
	p.probing = p.slowdown > 0 && p.mixed >= prefillProbe-1
	return p.probing
}

// budget returns the units of long-prompt work the next step beside nGen
// generating slots may take.
func (p *prefillPacer) budget(nGen int) int {
	gen := p.genStep()
	if nGen != p.anchorN {
		p.anchor, p.anchorN = gen, nGen
	}
	if gen <= 0 || p.unit <= 0 || p.slowdown <= 0 {
		return p.initial
	}
	// The prompt's share of the step: what the target leaves over the
	// generating step now, but never below half of what it left when the
	// prefill began, relative to that step now: were the slots to grow
	// past the target, the prompt would still move on.
	b := max(p.slowdown*p.anchor-gen, (p.slowdown-1)/2*gen) / p.unit
	// At least a token at the start of a sequence; at most a whole batch
	// of them (the caller caps by the batch's room).
	return int(min(max(b, prefillUnit), 1<<30))
}

// observe records the decode time of a step in which slots generated:
// units is how much long-prompt work it took (0 for none) and short
// whether it also took a short prompt whole (its cost is not a chunk's,
// so the step teaches nothing).
func (p *prefillPacer) observe(d time.Duration, units int, short bool) {
	if short {
		return
	}
	t := d.Seconds()
	if units == 0 {
		if p.probing {
			p.probing = false
		} else {
			p.anchorN = 0 // a plain step: the prefill is over
		}
		p.mixed = 0
		p.recent[p.next] = t
		p.next = (p.next + 1) % prefillRecent
		p.nRecent = min(p.nRecent+1, prefillRecent)
		return
	}
	p.mixed++
	if gen := p.genStep(); gen > 0 {
		// The extra time over a generating step, never below a tenth of
		// it: a step that came out faster than the median says little.
		extra := max(t-gen, gen/10)
		p.unit = ema(p.unit, extra/float64(units))
	}
}

func ema(avg, x float64) float64 {
	if avg <= 0 {
		return x
	}
	return avg + prefillEMA*(x-avg)
}

// prefillFit returns how many prompt tokens from position pos, at most
// room, fit in budget units and what they cost.
func prefillFit(pos, budget, room int) (n, cost int) {
	for n < room && cost+prefillUnit+pos+n <= budget {
		cost += prefillUnit + pos + n
		n++
	}
	return n, cost
}

// prefillCost returns the units of n prompt tokens from position pos.
func prefillCost(pos, n int) int {
	return n*(prefillUnit+pos) + n*(n-1)/2
}
