package sampling

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Param is one numeric sampling parameter: its names (llama-server's JSON
// field, its command-line flags), where its value goes in Params, the
// values it may take and how the limits bound it.
type Param struct {
	// Name is the JSON field of requests, generation_settings and /props.
	Name string
	// Flags are llama-server's command-line spellings (none: no flag);
	// Env its environment variable ("" none) and Help its help text.
	Flags []string
	Env   string
	Help  string
	// Float or Int is where its value goes (exactly one is set).
	Float func(*Params) *float32
	Int   func(*Params) *int
	// Lo and Hi bound an integer.
	Lo, Hi int64
	// Finite: the value must be a finite number.
	Finite bool
	// Keep reports the values that leave the setting as it was (nil: none).
	Keep func(v float64) bool
	// Clamp bounds an integer to a slot context of nCtx tokens and a
	// vocabulary of nVocab tokens (nil: not clamped).
	Clamp func(v, nCtx, nVocab int) int
	// flag adjusts or refuses a value given on the command line, beyond
	// the checks above (nil: none).
	flag func(v float64) (float64, error)
}

// ClampWindow bounds a window size to [lo, hi]; -1 (the whole context)
// becomes hi.
func ClampWindow(v, lo, hi int) int {
	if v == -1 || v > hi {
		return hi
	}
	if v < lo {
		return lo
	}
	return v
}

// MaxNProbs bounds n_probs (NProbs), as the vocabulary does: each
// entry is a token's text and probability, kept until the answer is
// sent, and a row's entries are sorted. llama-server allows the whole
// vocabulary: 32,000 entries a token made a 100-token answer 287 MB of
// JSON and 2 GB of memory. OpenAI's top_logprobs stops at 20.
const MaxNProbs = 256

// windowClamp bounds a window of tokens to the slot context.
func windowClamp(v, nCtx, _ int) int { return ClampWindow(v, 0, nCtx) }

// Table lists the numeric sampling parameters, in the order requests are
// read. It is read-only.
var Table = []Param{
	{Name: "temperature", Flags: []string{"--temp", "--temperature"}, Help: "temperature (default 0.8)",
		Float: func(p *Params) *float32 { return &p.Temperature }, Finite: true,
		flag: func(v float64) (float64, error) { return max(v, 0), nil }},
	{Name: "dynatemp_range", Flags: []string{"--dynatemp-range"}, Help: "dynamic temperature range (default 0: off)",
		Float: func(p *Params) *float32 { return &p.DynatempRange }, Finite: true},
	{Name: "dynatemp_exponent", Flags: []string{"--dynatemp-exp"}, Help: "dynamic temperature exponent (default 1)",
		Float: func(p *Params) *float32 { return &p.DynatempExponent }, Finite: true},
	{Name: "top_p", Flags: []string{"--top-p"}, Help: "top-p (default 0.95, 1: off)",
		Float: func(p *Params) *float32 { return &p.TopP }, Finite: true},
	{Name: "min_p", Flags: []string{"--min-p"}, Help: "min-p (default 0.05, 0: off)",
		Float: func(p *Params) *float32 { return &p.MinP }, Finite: true},
	{Name: "typical_p", Flags: []string{"--typical", "--typical-p"}, Help: "locally typical sampling p (default 1: off)",
		Float: func(p *Params) *float32 { return &p.TypicalP }, Finite: true},
	{Name: "xtc_probability", Flags: []string{"--xtc-probability"}, Help: "XTC probability (default 0: off)",
		Float: func(p *Params) *float32 { return &p.XTCProbability }, Finite: true},
	{Name: "xtc_threshold", Flags: []string{"--xtc-threshold"}, Help: "XTC threshold (default 0.1, above 0.5: off)",
		Float: func(p *Params) *float32 { return &p.XTCThreshold }, Finite: true},
	{Name: "top_n_sigma", Flags: []string{"--top-nsigma", "--top-n-sigma"}, Help: "top-n-sigma (default -1: off)",
		Float: func(p *Params) *float32 { return &p.TopNSigma }, Finite: true},
	{Name: "mirostat_tau", Flags: []string{"--mirostat-ent"}, Help: "Mirostat target entropy tau (default 5)",
		Float: func(p *Params) *float32 { return &p.MirostatTau }, Finite: true},
	{Name: "mirostat_eta", Flags: []string{"--mirostat-lr"}, Help: "Mirostat learning rate eta (default 0.1)",
		Float: func(p *Params) *float32 { return &p.MirostatEta }, Finite: true},
	{Name: "repeat_penalty", Flags: []string{"--repeat-penalty"}, Help: "repeat penalty (default 1: off)",
		Float: func(p *Params) *float32 { return &p.RepeatPenalty }, Finite: true,
		flag: func(v float64) (float64, error) {
			if v <= 0 || math.IsInf(1/float64(float32(v)), 0) {
				return 0, fmt.Errorf("repeat-penalty must be finite and greater than 0")
			}
			return v, nil
		}},
	{Name: "presence_penalty", Flags: []string{"--presence-penalty"}, Help: "presence penalty (default 0: off)",
		Float: func(p *Params) *float32 { return &p.PresencePenalty }, Finite: true},
	{Name: "frequency_penalty", Flags: []string{"--frequency-penalty"}, Help: "frequency penalty (default 0: off)",
		Float: func(p *Params) *float32 { return &p.FrequencyPenalty }, Finite: true},
	{Name: "dry_multiplier", Flags: []string{"--dry-multiplier"}, Help: "DRY multiplier (default 0: off)",
		Float: func(p *Params) *float32 { return &p.DRYMultiplier }, Finite: true},
	// A dry_base below 1 keeps the default, as in llama.cpp.
	{Name: "dry_base", Flags: []string{"--dry-base"}, Help: "DRY base (default 1.75; below 1 keeps the default)",
		Float: func(p *Params) *float32 { return &p.DRYBase }, Finite: true,
		Keep: func(v float64) bool { return v < 1 }},
	{Name: "adaptive_target", Flags: []string{"--adaptive-target"},
		Help:  "adaptive-p: pick tokens near this probability, 0 to 1, when adaptive_p is among the samplers (default -1: off)",
		Float: func(p *Params) *float32 { return &p.AdaptiveTarget }},
	{Name: "adaptive_decay", Flags: []string{"--adaptive-decay"}, Help: "adaptive-p: decay of the target's adaptation, 0 to 0.99 (default 0.9)",
		Float: func(p *Params) *float32 { return &p.AdaptiveDecay }},

	{Name: "top_k", Flags: []string{"--top-k"}, Env: "LLAMA_ARG_TOP_K", Help: "top-k (default 40, 0: off)",
		Int: func(p *Params) *int { return &p.TopK }, Lo: math.MinInt32, Hi: math.MaxInt32,
		Clamp: func(v, _, nVocab int) int { return min(v, nVocab) }},
	{Name: "mirostat", Flags: []string{"--mirostat"}, Help: "Mirostat: 0 off (default), 1, or 2 (Mirostat 2.0)",
		Int: func(p *Params) *int { return &p.Mirostat }, Lo: 0, Hi: 2},
	{Name: "repeat_last_n", Flags: []string{"--repeat-last-n"}, Help: "tokens the penalties look back (default 64, 0: off, -1: the context)",
		Int: func(p *Params) *int { return &p.RepeatLastN }, Lo: -1, Hi: math.MaxInt32, Clamp: windowClamp},
	{Name: "dry_allowed_length", Flags: []string{"--dry-allowed-length"}, Help: "DRY allowed length (default 2)",
		Int: func(p *Params) *int { return &p.DRYAllowedLength }, Lo: 0, Hi: math.MaxInt32, Clamp: windowClamp},
	{Name: "dry_penalty_last_n", Flags: []string{"--dry-penalty-last-n"}, Help: "tokens DRY looks back (default 64, 0: off, -1: the context)",
		Int: func(p *Params) *int { return &p.DRYPenaltyLastN }, Lo: -1, Hi: math.MaxInt32, Clamp: windowClamp},
	{Name: "n_probs", Int: func(p *Params) *int { return &p.NProbs }, Lo: 0, Hi: math.MaxInt32,
		Clamp: func(v, _, nVocab int) int { return ClampWindow(v, 0, min(nVocab, MaxNProbs)) }},
	{Name: "min_keep", Int: func(p *Params) *int { return &p.MinKeep }, Lo: 0, Hi: math.MaxInt32,
		Clamp: func(v, _, nVocab int) int { return ClampWindow(v, 0, nVocab) }},
}

// Set stores v, read for the parameter from a request, in p: out of range
// (or not a float32) is an *Error naming the parameter.
func (t *Param) Set(p *Params, v float64) error {
	if t.Int != nil {
		if v != math.Trunc(v) || v < float64(t.Lo) || v > float64(t.Hi) {
			return &Error{Param: t.Name, Msg: fmt.Sprintf("%q must be between %d and %d, got %v", t.Name, t.Lo, t.Hi, v)}
		}
		return t.SetInt(p, int64(v))
	}
	if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
		return &Error{Param: t.Name, Msg: fmt.Sprintf("%q is out of range", t.Name)}
	}
	// The value is a float32 (as llama.cpp reads it) before Keep sees it.
	if f := float32(v); t.Keep == nil || !t.Keep(float64(f)) {
		*t.Float(p) = f
	}
	return nil
}

// SetInt stores n, an integer read for the parameter from a request, in p:
// out of range is an *Error naming the parameter. A float parameter takes
// n as a number.
func (t *Param) SetInt(p *Params, n int64) error {
	if t.Int == nil {
		return t.Set(p, float64(n))
	}
	if n < t.Lo || n > t.Hi {
		return &Error{Param: t.Name, Msg: fmt.Sprintf("%q must be between %d and %d, got %d", t.Name, t.Lo, t.Hi, n)}
	}
	if t.Keep == nil || !t.Keep(float64(n)) {
		*t.Int(p) = int(n)
	}
	return nil
}

// flagName names the parameter in a command-line error.
func (t *Param) flagName() string {
	if len(t.Flags) == 0 {
		return t.Name
	}
	return strings.TrimLeft(t.Flags[0], "-")
}

// SetFlag stores a value given on the command line (text s) in p.
func (t *Param) SetFlag(p *Params, s string) error {
	s = strings.TrimSpace(s)
	var v float64
	if t.Int != nil {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		if n < t.Lo || n > t.Hi {
			return fmt.Errorf("%s must be between %d and %d", t.flagName(), t.Lo, t.Hi)
		}
		v = float64(n)
	} else {
		f, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		if t.Finite && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return fmt.Errorf("%s must be finite", t.flagName())
		}
		v = f
	}
	if t.flag != nil {
		var err error
		if v, err = t.flag(v); err != nil {
			return err
		}
	}
	return t.Set(p, v)
}

// Value returns the parameter's value in p.
func (t *Param) Value(p *Params) any {
	if t.Int != nil {
		return *t.Int(p)
	}
	return *t.Float(p)
}

// LookupParam returns the row of Table named name (its JSON name).
func LookupParam(name string) (*Param, bool) {
	for i := range Table {
		if Table[i].Name == name {
			return &Table[i], true
		}
	}
	return nil, false
}
