package server

// The table of llama.cpp's numeric generation parameters. Each is named
// once: the sampling ones in sampling.Table (their JSON names, ranges,
// finiteness and clamps, which the command line and the engine's limits
// read too), the request ones (n_keep, t_max_predict_ms, id_slot,
// n_predict) here. genParams joins both, with where each value goes in an
// engine.Request. Its default is what Options.baseRequest holds
// (sampling.Defaults, or Options.Sampling, and the server's n_keep). The
// table is read by decoding (a body's values of its names become
// wire.Gen.Params), by parsing (generation: a sampling value is checked
// and stored by its sampling.Param, nothing here restates its range), by
// the echo of generation_settings, /props and /slots, and by limitTask.
//
// Adding a numeric sampling parameter therefore takes its row of
// sampling.Table and its field in sampling.Params; the server reads,
// checks and echoes it from there. Parameters whose JSON is not a plain
// number (seed, stop, samplers, logit_bias, lora, grammar, json_schema,
// dry_sequence_breakers, n_cache_reuse, the speculative.* bounds) are
// fields of wire.Gen with parsers of their own in params.go and
// spec_params.go.

import (
	"math"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
	"github.com/x/llama/server/internal/wire"
)

// genParam is one numeric generation parameter.
type genParam struct {
	// Names are its JSON names, read in order (a later one wins); the
	// generation_settings echo shows the value under each.
	Names []string
	// Sampling is its row of sampling.Table, which checks and stores its
	// values (nil: a parameter of the request, below).
	Sampling *sampling.Param
	// Float or Int is where its value goes (exactly one is set).
	Float func(*engine.Request) *float32
	Int   func(*engine.Request) *int
	// Lo and Hi bound an integer of the request.
	Lo, Hi int64
	// Props: GET /props shows its default.
	Props bool
}

// genParams is the table, in the order requests are read: the sampling
// parameters, then those of the request.
var genParams = func() []genParam {
	var out []genParam
	for i := range sampling.Table {
		sp := &sampling.Table[i]
		gp := genParam{Names: []string{sp.Name}, Sampling: sp, Props: sp.Name != "n_probs"}
		if sp.Float != nil {
			gp.Float = func(r *engine.Request) *float32 { return sp.Float(&r.Params) }
		} else {
			gp.Int = func(r *engine.Request) *int { return sp.Int(&r.Params) }
		}
		out = append(out, gp)
	}
	return append(out,
		genParam{Names: []string{"n_keep"}, Int: func(r *engine.Request) *int { return &r.NKeep }, Lo: -1, Hi: math.MaxInt32, Props: true},
		genParam{Names: []string{"t_max_predict_ms"}, Int: func(r *engine.Request) *int { return &r.TMaxPredictMs }, Lo: 0, Hi: math.MaxInt32},
		// id_slot must also name an existing slot (see generation).
		genParam{Names: []string{"id_slot"}, Int: func(r *engine.Request) *int { return &r.SlotID }, Lo: -1, Hi: math.MaxInt32},
		// n_predict wins over max_tokens (OpenAI's name); -1 takes the
		// server's n_predict (see generation). /props shows Options.NPredict.
		genParam{Names: []string{"max_tokens", "n_predict"}, Int: func(r *engine.Request) *int { return &r.NPredict }, Lo: -1, Hi: maxNPredict},
	)
}()

// parse reads the parameter from vals into t: a sampling parameter through
// its sampling.Param (which checks its range and keeps the default for the
// values that keep it), a request parameter within [Lo, Hi].
func (p *genParam) parse(vals wire.Params, t *engine.Request) error {
	for _, name := range p.Names {
		o, ok := vals[name]
		if !ok || !o.Set {
			continue
		}
		var err error
		switch {
		case p.Sampling == nil:
			err = o.Int(p.Int(t), p.Lo, p.Hi)
		case p.Float != nil:
			var v float64
			if v, err = o.Float64(); err == nil {
				err = samplingError(p.Sampling.Set(&t.Params, v))
			}
		default:
			var n int64
			if n, err = o.Integer(); err == nil {
				err = samplingError(p.Sampling.SetInt(&t.Params, n))
			}
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
	t := engine.NewRequest(nil)
	t.Params, t.CachePrompt, t.NKeep = o.defaultSampling(), !o.NoCachePrompt, o.NKeep
	if defaultNPredict != 0 {
		t.NPredict = defaultNPredict
	}
	return t
}

// defaultSampling returns the sampling parameters requests start from:
// o.Sampling (a copy) or sampling.Defaults.
func (o *Options) defaultSampling() sampling.Params {
	if o.Sampling == nil {
		return sampling.Defaults()
	}
	return o.Sampling.Clone()
}
