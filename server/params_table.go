package server

// The table of llama.cpp's numeric generation parameters. Each is named
// once here: its JSON names, where its value goes in an engine.Request,
// the range a request may give (out of range is a 400), whether it must
// be finite, and how the limits clamp it to the slot context and the
// vocabulary. Its default is what Options.baseRequest holds
// (engine.DefaultSamplingParams, or Options.Sampling, and the server's
// n_keep). The table is read by parsing (generation), by the echo of
// generation_settings and of /props, and by limitParams.
//
// Parameters whose JSON is not a plain number (seed, stop, samplers,
// logit_bias, lora, grammar, json_schema, dry_sequence_breakers,
// n_cache_reuse, the speculative.* bounds) have parsers of their own in
// params.go and spec_params.go.

import (
	"math"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// genParam is one numeric generation parameter.
type genParam struct {
	// Names are its JSON names, read in order (a later one wins); the
	// generation_settings echo shows the value under each.
	Names []string
	// Float or Int is where its value goes (exactly one is set).
	Float func(*engine.Request) *float32
	Int   func(*engine.Request) *int
	// Lo and Hi bound an integer.
	Lo, Hi int64
	// Finite: the value must be a finite number (checked after parsing,
	// so that a server default is checked too).
	Finite bool
	// Clamp bounds an integer to a slot context of nCtx tokens and a
	// vocabulary of nVocab tokens (nil: not clamped).
	Clamp func(v, nCtx, nVocab int) int
	// Props: GET /props shows its default.
	Props bool
}

// windowClamp bounds a window of tokens to the slot context; -1 is the
// whole context.
func windowClamp(v, nCtx, _ int) int { return clampWindow(v, 0, nCtx) }

// genParams is the table, in the order requests are read.
var genParams = []genParam{
	{Names: []string{"temperature"}, Float: func(r *engine.Request) *float32 { return &r.Params.Temperature }, Finite: true, Props: true},
	{Names: []string{"dynatemp_range"}, Float: func(r *engine.Request) *float32 { return &r.Params.DynatempRange }, Finite: true, Props: true},
	{Names: []string{"dynatemp_exponent"}, Float: func(r *engine.Request) *float32 { return &r.Params.DynatempExponent }, Finite: true, Props: true},
	{Names: []string{"top_p"}, Float: func(r *engine.Request) *float32 { return &r.Params.TopP }, Finite: true, Props: true},
	{Names: []string{"min_p"}, Float: func(r *engine.Request) *float32 { return &r.Params.MinP }, Finite: true, Props: true},
	{Names: []string{"typical_p"}, Float: func(r *engine.Request) *float32 { return &r.Params.TypicalP }, Finite: true, Props: true},
	{Names: []string{"xtc_probability"}, Float: func(r *engine.Request) *float32 { return &r.Params.XTCProbability }, Finite: true, Props: true},
	{Names: []string{"xtc_threshold"}, Float: func(r *engine.Request) *float32 { return &r.Params.XTCThreshold }, Finite: true, Props: true},
	{Names: []string{"top_n_sigma"}, Float: func(r *engine.Request) *float32 { return &r.Params.TopNSigma }, Finite: true, Props: true},
	{Names: []string{"mirostat_tau"}, Float: func(r *engine.Request) *float32 { return &r.Params.MirostatTau }, Finite: true, Props: true},
	{Names: []string{"mirostat_eta"}, Float: func(r *engine.Request) *float32 { return &r.Params.MirostatEta }, Finite: true, Props: true},
	{Names: []string{"repeat_penalty"}, Float: func(r *engine.Request) *float32 { return &r.Params.RepeatPenalty }, Finite: true, Props: true},
	{Names: []string{"presence_penalty"}, Float: func(r *engine.Request) *float32 { return &r.Params.PresencePenalty }, Finite: true, Props: true},
	{Names: []string{"frequency_penalty"}, Float: func(r *engine.Request) *float32 { return &r.Params.FrequencyPenalty }, Finite: true, Props: true},
	{Names: []string{"dry_multiplier"}, Float: func(r *engine.Request) *float32 { return &r.Params.DRYMultiplier }, Finite: true, Props: true},
	// A dry_base below 1 takes the server's (see generation).
	{Names: []string{"dry_base"}, Float: func(r *engine.Request) *float32 { return &r.Params.DRYBase }, Finite: true, Props: true},
	{Names: []string{"adaptive_target"}, Float: func(r *engine.Request) *float32 { return &r.Params.AdaptiveTarget }, Props: true},
	{Names: []string{"adaptive_decay"}, Float: func(r *engine.Request) *float32 { return &r.Params.AdaptiveDecay }, Props: true},

	{Names: []string{"top_k"}, Int: func(r *engine.Request) *int { return &r.Params.TopK }, Lo: math.MinInt32, Hi: math.MaxInt32, Props: true,
		Clamp: func(v, _, nVocab int) int { return min(v, nVocab) }},
	{Names: []string{"mirostat"}, Int: func(r *engine.Request) *int { return &r.Params.Mirostat }, Lo: 0, Hi: 2, Props: true},
	{Names: []string{"repeat_last_n"}, Int: func(r *engine.Request) *int { return &r.Params.RepeatLastN }, Lo: -1, Hi: math.MaxInt32, Props: true,
		Clamp: windowClamp},
	{Names: []string{"dry_allowed_length"}, Int: func(r *engine.Request) *int { return &r.Params.DRYAllowedLength }, Lo: 0, Hi: math.MaxInt32, Props: true,
		Clamp: windowClamp},
	{Names: []string{"dry_penalty_last_n"}, Int: func(r *engine.Request) *int { return &r.Params.DRYPenaltyLastN }, Lo: -1, Hi: math.MaxInt32, Props: true,
		Clamp: windowClamp},
	{Names: []string{"n_keep"}, Int: func(r *engine.Request) *int { return &r.NKeep }, Lo: -1, Hi: math.MaxInt32, Props: true,
		Clamp: func(v, nCtx, _ int) int { return min(v, nCtx) }},
	{Names: []string{"t_max_predict_ms"}, Int: func(r *engine.Request) *int { return &r.TMaxPredictMs }, Lo: 0, Hi: math.MaxInt32},
	// id_slot must also name an existing slot (see generation).
	{Names: []string{"id_slot"}, Int: func(r *engine.Request) *int { return &r.SlotID }, Lo: -1, Hi: math.MaxInt32},
	// n_predict wins over max_tokens (OpenAI's name); -1 takes the
	// server's n_predict (see generation). /props shows Options.NPredict.
	{Names: []string{"max_tokens", "n_predict"}, Int: func(r *engine.Request) *int { return &r.NPredict }, Lo: -1, Hi: maxNPredict},
	// /props shows 0: probabilities are asked per request.
	{Names: []string{"n_probs"}, Int: func(r *engine.Request) *int { return &r.Params.NProbs }, Lo: 0, Hi: math.MaxInt32,
		Clamp: func(v, _, nVocab int) int { return clampWindow(v, 0, nVocab) }},
}

// parse reads the parameter from g into t.
func (p *genParam) parse(g genInput, t *engine.Request) error {
	for _, name := range p.Names {
		var err error
		if p.Float != nil {
			err = g.float(name, p.Float(t))
		} else {
			err = g.int(name, p.Int(t), p.Lo, p.Hi)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// echo puts the parameter's value in t into out under each of its names.
func (p *genParam) echo(t *engine.Request, out map[string]any) {
	for _, name := range p.Names {
		if p.Float != nil {
			out[name] = *p.Float(t)
		} else {
			out[name] = *p.Int(t)
		}
	}
}

// baseRequest is the request every generation starts from: the server's
// sampling defaults, prompt cache and n_keep, and defaultNPredict (0: no
// limit, -1).
func (o *Options) baseRequest(defaultNPredict int) *engine.Request {
	t := &engine.Request{
		Kind:        engine.KindCompletion,
		Params:      o.defaultSampling(),
		NPredict:    -1,
		CachePrompt: !o.NoCachePrompt,
		NKeep:       o.NKeep,
		SlotID:      -1,
	}
	if defaultNPredict != 0 {
		t.NPredict = defaultNPredict
	}
	return t
}

// defaultGenerationParams is the default_generation_settings.params of /props.
func defaultGenerationParams(o Options) map[string]any {
	t := o.baseRequest(0)
	p := t.Params
	out := map[string]any{
		"n_predict": o.NPredict, "seed": p.Seed, "dry_sequence_breakers": p.DRYSequenceBreakers,
		"stop": nonNilStrings(o.Stop), "max_tokens": o.NPredict, "n_discard": 0,
		"ignore_eos": p.IgnoreEOS, "stream": true, "n_probs": 0, "min_keep": 0, "grammar": p.Grammar,
		"backend_sampling": p.BackendSampling,
		"samplers":         p.Samplers, "timings_per_token": false,
		"reasoning_format": o.ReasoningFormat, "speculative.types": o.Engine.Speculative.TypesString(),
	}
	for i := range genParams {
		if genParams[i].Props {
			genParams[i].echo(t, out)
		}
	}
	return out
}

// defaultSampling returns the sampling parameters requests start from:
// o.Sampling (a copy) or DefaultSamplingParams.
func (o *Options) defaultSampling() engine.SamplingParams {
	if o.Sampling == nil {
		return engine.DefaultSamplingParams()
	}
	p := *o.Sampling
	p.DRYSequenceBreakers = append([]string(nil), p.DRYSequenceBreakers...)
	p.Samplers = append([]string(nil), p.Samplers...)
	if p.LogitBias != nil {
		b := make(map[llama.Token]float32, len(p.LogitBias))
		for k, v := range p.LogitBias {
			b[k] = v
		}
		p.LogitBias = b
	}
	return p
}
