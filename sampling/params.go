// Package sampling is the one home of llama.cpp's per-request sampling
// settings: the parameter struct (Params), the table that names its
// numeric parameters and the samplers with their aliases (from which the
// server's JSON fields, the command-line flags of examples/server and
// /props derive), the limits that keep a request's values within what a
// context and a vocabulary can use, and the builder of the sampler chain.
//
// Adding a sampler takes a row of Samplers (its names and how it joins the
// chain), a row of Table per numeric setting it reads, the field in Params,
// and, when llama.cpp's constructor is not bound yet, its binding in the
// root package.
package sampling

import (
	"slices"

	"github.com/x/llama"
)

// Params are the sampling settings of one request, as llama.cpp's common
// sampler and llama-server's /completion take them. Start from Defaults:
// the zero value is not llama.cpp's default but temperature 0 (greedy
// picks) with no sampler in the chain.
type Params struct {
	Temperature         float32 // <= 0: greedy
	DynatempRange       float32
	DynatempExponent    float32
	TopK                int // <= 0: off
	TopP                float32
	MinP                float32
	TypicalP            float32
	XTCProbability      float32
	XTCThreshold        float32
	TopNSigma           float32
	Mirostat            int // 0, 1 or 2
	MirostatTau         float32
	MirostatEta         float32
	RepeatLastN         int // -1: the context
	RepeatPenalty       float32
	PresencePenalty     float32
	FrequencyPenalty    float32
	DRYMultiplier       float32
	DRYBase             float32
	DRYAllowedLength    int
	DRYPenaltyLastN     int // -1: the context
	DRYSequenceBreakers []string
	Seed                uint32 // llama.DefaultSeed: random; it repeats draws, not text batched with other requests (see llama.Dist)
	// AdaptiveTarget and AdaptiveDecay configure the adaptive-p sampler,
	// used in place of the final random pick when Samplers names
	// "adaptive_p" (target < 0: disabled).
	AdaptiveTarget float32
	AdaptiveDecay  float32
	LogitBias      map[llama.Token]float32
	// Samplers is the order of samplers by llama.cpp's names or their
	// aliases (see Samplers and LookupSampler): "penalties", "dry",
	// "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc",
	// "temperature", "infill", "adaptive_p".
	Samplers []string
	// Grammar is a GBNF grammar ("" none). With GrammarLazy it applies only
	// after one of GrammarTriggers fires.
	Grammar string
	// ParsedGrammar, when its Source is Grammar, is Grammar already parsed
	// (by llama.ParseGrammar or CheckedGrammar): GrammarSampler uses it
	// instead of parsing Grammar again. Otherwise it is ignored.
	ParsedGrammar   *llama.Grammar
	GrammarLazy     bool
	GrammarTriggers []GrammarTrigger
	PreservedTokens []string
	IgnoreEOS       bool
	NProbs          int // return the top n token probabilities per token
	// MinKeep is the fewest tokens typ_p, top_p, min_p and xtc leave
	// (0: one), as llama.cpp's min_keep.
	MinKeep int
	// BackendSampling samples inside the decode's graph (llama-server's
	// --backend-sampling and backend_sampling): the engine attaches the
	// request's chain to its slot's sequence (llama.Context.SetSampler)
	// when llama.cpp can run all of it there; with a grammar, NProbs,
	// media, a speculative draft or a sampler it cannot run (typical, XTC,
	// DRY, mirostat, top-n-sigma, adaptive-p), the request samples
	// on the CPU. Seeded outputs differ from the CPU's (the random draws
	// are made differently).
	BackendSampling bool
}

// DefaultSamplers is llama.cpp's default order of samplers.
var DefaultSamplers = []string{"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"}

// Defaults returns llama-server's defaults (common_params_sampling).
func Defaults() Params {
	return Params{
		Temperature: 0.8, DynatempExponent: 1, TopK: 40, TopP: 0.95, MinP: 0.05, TypicalP: 1,
		XTCThreshold: 0.1, TopNSigma: -1, MirostatTau: 5, MirostatEta: 0.1, RepeatLastN: 64,
		RepeatPenalty: 1, DRYBase: 1.75, DRYAllowedLength: 2, DRYPenaltyLastN: 64,
		DRYSequenceBreakers: []string{"\n", ":", "\"", "*"}, Seed: llama.DefaultSeed,
		AdaptiveTarget: -1, AdaptiveDecay: 0.9,
		Samplers: slices.Clone(DefaultSamplers),
	}
}

// Clone returns a copy of p that shares no slice or map with it.
func (p Params) Clone() Params {
	p.DRYSequenceBreakers = slices.Clone(p.DRYSequenceBreakers)
	p.Samplers = slices.Clone(p.Samplers)
	p.GrammarTriggers = slices.Clone(p.GrammarTriggers)
	p.PreservedTokens = slices.Clone(p.PreservedTokens)
	if p.LogitBias != nil {
		b := make(map[llama.Token]float32, len(p.LogitBias))
		for k, v := range p.LogitBias {
			b[k] = v
		}
		p.LogitBias = b
	}
	return p
}

// GrammarTrigger starts a lazy grammar: a word (literal text), a regular
// expression Pattern matched against the generated text (PatternFull: the
// whole text must match), or a Token. It is bound to a model (Token); a
// chat template's triggers are chat.Trigger, text until
// engine.ChatTriggers binds them.
type GrammarTrigger struct {
	Word        string
	Pattern     string
	PatternFull bool
	Token       llama.Token // llama.NoToken when unused
}
