package sampling

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/x/llama"
)

// Sampler is one sampler llama.cpp's common sampler chains by name: its
// canonical name, its letter in a sampling sequence ("edskypmxt"), the
// aliases it takes besides the canonical name's kebab-case and joined
// forms, and how it joins a chain.
type Sampler struct {
	Name    string
	Letter  rune
	Aliases []string
	// add appends the sampler to b when p turns it on.
	add func(b *builder, p *Params)
}

// builder is a chain under construction.
type builder struct {
	env      Env
	ss       []llama.Sampler
	greedy   bool // temperature <= 0: the samplers that only reshape the distribution are left out
	history  bool // a sampler looks at the tokens before (the prompt must be accepted)
	adaptive bool // adaptive-p takes the final pick
}

// window is a token window: negative means the whole slot context.
func (b *builder) window(n int) int {
	if n < 0 {
		return b.env.NCtx
	}
	return n
}

// Samplers lists the samplers of a chain. It is read-only.
var Samplers = []Sampler{
	{Name: "penalties", Letter: 'e', add: func(b *builder, p *Params) {
		rp := p.RepeatPenalty
		if rp <= 0 {
			rp = 1
		}
		if p.RepeatLastN != 0 && (rp != 1 || p.FrequencyPenalty != 0 || p.PresencePenalty != 0) {
			b.ss = append(b.ss, llama.Penalties(b.window(p.RepeatLastN), rp, p.FrequencyPenalty, p.PresencePenalty))
			b.history = true
		}
	}},
	{Name: "dry", Letter: 'd', add: func(b *builder, p *Params) {
		if p.DRYMultiplier > 0 {
			b.ss = append(b.ss, llama.DRY(p.DRYMultiplier, p.DRYBase, p.DRYAllowedLength, b.window(p.DRYPenaltyLastN), p.DRYSequenceBreakers))
			b.history = true
		}
	}},
	{Name: "top_n_sigma", Letter: 's', add: func(b *builder, p *Params) {
		if !b.greedy && p.TopNSigma > 0 {
			b.ss = append(b.ss, llama.TopNSigma(p.TopNSigma))
		}
	}},
	{Name: "top_k", Letter: 'k', add: func(b *builder, p *Params) {
		if !b.greedy && p.TopK > 0 {
			b.ss = append(b.ss, llama.TopK(p.TopK))
		}
	}},
	{Name: "typ_p", Letter: 'y', Aliases: []string{"typ"}, add: func(b *builder, p *Params) {
		if !b.greedy && p.TypicalP < 1 {
			b.ss = append(b.ss, llama.Typical(p.TypicalP, p.MinKeep))
		}
	}},
	{Name: "top_p", Letter: 'p', Aliases: []string{"nucleus"}, add: func(b *builder, p *Params) {
		if !b.greedy && p.TopP < 1 {
			b.ss = append(b.ss, llama.TopP(p.TopP, p.MinKeep))
		}
	}},
	{Name: "min_p", Letter: 'm', add: func(b *builder, p *Params) {
		if !b.greedy && p.MinP > 0 {
			b.ss = append(b.ss, llama.MinP(p.MinP, p.MinKeep))
		}
	}},
	{Name: "xtc", Letter: 'x', add: func(b *builder, p *Params) {
		if p.XTCProbability > 0 && p.XTCThreshold <= 0.5 {
			b.ss = append(b.ss, llama.XTC(p.XTCProbability, p.XTCThreshold, p.MinKeep, p.Seed))
		}
	}},
	{Name: "temperature", Letter: 't', Aliases: []string{"temp"}, add: func(b *builder, p *Params) {
		if !b.greedy {
			b.ss = append(b.ss, llama.TempExt(p.Temperature, p.DynatempRange, p.DynatempExponent))
		}
	}},
	// infill (fill-in-the-middle): ends the text when end of generation
	// outweighs the text tokens, merges tokens that start alike and drops
	// unlikely ones.
	{Name: "infill", Letter: 'i', add: func(b *builder, _ *Params) { b.ss = append(b.ss, llama.Infill()) }},
	{Name: "adaptive_p", Letter: 'a', add: func(b *builder, _ *Params) { b.adaptive = true }},
}

// samplerNames maps every accepted name (lower case) to its row of Samplers.
var samplerNames = func() map[string]*Sampler {
	m := map[string]*Sampler{}
	for i := range Samplers {
		s := &Samplers[i]
		for _, n := range append([]string{s.Name, strings.ReplaceAll(s.Name, "_", "-"), strings.ReplaceAll(s.Name, "_", "")}, s.Aliases...) {
			m[n] = s
		}
	}
	return m
}()

// LookupSampler returns the canonical name of a sampler named name, one
// of its aliases (any case).
func LookupSampler(name string) (string, bool) {
	s, ok := samplerNames[strings.ToLower(name)]
	if !ok {
		return "", false
	}
	return s.Name, true
}

// SamplerByLetter returns the canonical name of the sampler of letter r
// in a sampling sequence.
func SamplerByLetter(r rune) (string, bool) {
	for i := range Samplers {
		if Samplers[i].Letter == r {
			return Samplers[i].Name, true
		}
	}
	return "", false
}

// ParseSamplers returns the canonical names of a list of sampler names or
// aliases (see LookupSampler), in order, and the names no sampler has,
// which it skips as llama.cpp does: lists written for other versions of
// llama.cpp name samplers it no longer has ("tfs_z"). Params.Samplers
// itself takes only known names (see Limit).
func ParseSamplers(names []string) (list, skipped []string) {
	for _, n := range names {
		if name, ok := LookupSampler(n); ok {
			list = append(list, name)
		} else {
			skipped = append(skipped, n)
		}
	}
	return list, skipped
}

// ParseSamplerSeq is ParseSamplers for a sampling sequence, one letter per
// sampler (llama.cpp's --sampler-seq, and a request's samplers given as a
// string); it skips the letters no sampler has and returns them, each as
// a string of its own.
func ParseSamplerSeq(seq string) (list, skipped []string) {
	for _, c := range seq {
		if name, ok := SamplerByLetter(c); ok {
			list = append(list, name)
		} else {
			skipped = append(skipped, string(c))
		}
	}
	return list, skipped
}

// Env is what a chain needs besides Params: the slot's context size (the
// window of -1) and the model's end-of-generation tokens (banned by
// IgnoreEOS).
type Env struct {
	NCtx int
	EOG  []llama.Token
}

// Chain returns p's sampler chain, as llama.cpp's common sampler builds it
// but for the grammar (see GrammarSampler): logit bias, then the samplers of
// p.Samplers in order and the final pick (dist, or adaptive-p when named);
// mirostat replaces them; temperature <= 0 picks greedily. Samplers that
// p turns off are left out. extra, samplers of the caller's, go before
// the final pick. history says whether the chain should be fed the prompt
// (penalties and DRY look at it).
func (p *Params) Chain(env Env, extra ...llama.Sampler) (ss []llama.Sampler, history bool) {
	b := &builder{env: env}
	bias := map[llama.Token]float32{}
	for t, v := range p.LogitBias {
		bias[t] = v
	}
	if p.IgnoreEOS {
		for _, t := range env.EOG {
			bias[t] = float32(math.Inf(-1))
		}
	}
	if len(bias) > 0 {
		b.ss = append(b.ss, llama.LogitBias(bias))
	}
	switch p.Mirostat {
	case 1:
		b.ss = append(b.ss, llama.Temp(p.Temperature), llama.Mirostat(p.MirostatTau, p.MirostatEta, 100, p.Seed))
	case 2:
		b.ss = append(b.ss, llama.Temp(p.Temperature), llama.MirostatV2(p.MirostatTau, p.MirostatEta, p.Seed))
	default:
		b.greedy = p.Greedy()
		for _, name := range p.Samplers {
			if s, ok := samplerNames[strings.ToLower(name)]; ok {
				s.add(b, p)
			}
		}
		switch {
		case b.greedy:
			b.ss = append(b.ss, llama.Greedy())
		case b.adaptive:
			b.ss = append(b.ss, llama.AdaptiveP(p.AdaptiveTarget, p.AdaptiveDecay, p.Seed))
		default:
			b.ss = append(b.ss, llama.Dist(p.Seed))
		}
	}
	b.ss = slices.Insert(b.ss, len(b.ss)-1, extra...)
	return b.ss, b.history
}

// GrammarSampler returns p's grammar sampler (nil without a grammar): lazy, with
// its triggers, when p.GrammarLazy is set. The grammar is p.ParsedGrammar
// when that is p.Grammar parsed, or else parsed here (llama.ParseGrammar,
// which gives up when ctx ends); a malformed one is its error.
func (p *Params) GrammarSampler(ctx context.Context) (llama.Sampler, error) {
	if p.Grammar == "" {
		return nil, nil
	}
	g := p.ParsedGrammar
	if g == nil || g.Source() != p.Grammar || g.Root() != "root" {
		var err error
		if g, err = llama.ParseGrammar(ctx, p.Grammar, "root"); err != nil {
			return nil, err
		}
	}
	if !p.GrammarLazy {
		return g.Sampler(), nil
	}
	var pats []string
	var toks []llama.Token
	for _, tr := range p.GrammarTriggers {
		switch {
		case tr.Word != "":
			pats = append(pats, regexp.QuoteMeta(tr.Word))
		case tr.Pattern != "" && tr.PatternFull:
			pat := tr.Pattern
			if !strings.HasPrefix(pat, "^") {
				pat = "^" + pat
			}
			if !strings.HasSuffix(pat, "$") {
				pat += "$"
			}
			pats = append(pats, pat)
		case tr.Pattern != "":
			pats = append(pats, tr.Pattern)
		case tr.Token >= 0:
			toks = append(toks, tr.Token)
		}
	}
	return g.LazySampler(pats, toks), nil
}

// Greedy reports whether p's chain picks the likeliest token left by its
// filters (temperature 0 or less, no mirostat), where llama.cpp's chain
// gives that token probability 1 and the others 0.
func (p *Params) Greedy() bool {
	return p.Mirostat != 1 && p.Mirostat != 2 && p.Temperature <= 0
}
