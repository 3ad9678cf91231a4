package server

// Parsing of llama.cpp's generation parameters (the /completion request
// fields, wire.Gen, decoded by wire.Decode) into an engine.Request.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"

	"github.com/x/llama"
	"github.com/x/llama/internal/jsonschema"
	"github.com/x/llama/sampling"
)

// rawInteger reads a JSON integer (a float with no fraction is one),
// naming the field name in its errors.
func rawInteger(raw json.RawMessage, name string) (int64, error) {
	var num json.Number
	if wire.Kind(raw) != 'n' || json.Unmarshal(raw, &num) != nil {
		return 0, badRequest("%q must be an integer", name)
	}
	return wire.NumInteger(num, name)
}

// maxNPredict bounds n_predict (llama.cpp keeps it in an int32).
const maxNPredict = math.MaxInt32

// genOptions are the per-request settings that shape the response rather
// than the generation.
type genOptions struct {
	Stream            bool
	ReturnTokens      bool
	TimingsPerToken   bool
	PostSamplingProbs bool
	ResponseFields    wire.StringList
	// Verbose adds llama-server's __verbose debug object to OpenAI-shaped
	// answers ("verbose"; default Options.Verbose).
	Verbose bool
	// Settings is generation_settings as the native endpoint reports it.
	Settings map[string]any
}

// generation reads the generation parameters g into an engine.Request
// with the server's defaults for what g does not set.
func (inst *instance) generation(g *wire.Gen, defaultNPredict int) (*engine.Request, genOptions, error) {
	opt := genOptions{Verbose: inst.Opts.Verbose}
	t := inst.Opts.baseRequest(defaultNPredict)
	p := &t.Params
	for i := range genParams {
		if err := genParams[i].parse(g.Params, t); err != nil {
			return nil, opt, err
		}
	}
	if n := inst.Engine.Slots(); n > 0 && t.SlotID >= n {
		return nil, opt, badRequest(`"id_slot" %d is out of range (%d slots)`, t.SlotID, n)
	}
	// The server's n_predict is a default, not a cap: a request's -1 (or
	// no value) takes it, as llama-server's slot does.
	if t.NPredict == -1 && defaultNPredict != 0 {
		t.NPredict = defaultNPredict
	}
	if g.Seed.Set {
		n, err := g.Seed.Integer()
		if err != nil {
			return nil, opt, err
		}
		switch {
		case n == -1:
			p.Seed = llama.DefaultSeed
		case n >= 0 && n <= math.MaxUint32:
			p.Seed = uint32(n)
		default:
			return nil, opt, badRequest(`"seed" must be -1 or between 0 and %d`, uint32(math.MaxUint32))
		}
	}
	if err := g.DRYSequenceBreakers.Read(&p.DRYSequenceBreakers); err != nil {
		return nil, opt, err
	}
	if g.DRYSequenceBreakers.Set && len(p.DRYSequenceBreakers) == 0 {
		return nil, opt, badRequest(`"dry_sequence_breakers" must not be empty`)
	}
	for _, b := range []struct {
		o   *wire.Opt[bool]
		dst *bool
	}{{&g.IgnoreEOS, &p.IgnoreEOS}, {&g.BackendSampling, &p.BackendSampling}, {&g.CachePrompt, &t.CachePrompt}} {
		if err := b.o.Read(b.dst, "a boolean"); err != nil {
			return nil, opt, err
		}
	}
	// n_cache_reuse, as in llama.cpp, replaces the server's --cache-reuse
	// for this request: 0 (or less) turns reuse off.
	if g.NCacheReuse.Set {
		if err := g.NCacheReuse.Int(&t.CacheReuse, math.MinInt32, math.MaxInt32); err != nil {
			return nil, opt, err
		}
		if t.CacheReuse <= 0 {
			t.CacheReuse = -1
		}
	}
	if err := g.Stop.Read(&t.Stop); err != nil {
		return nil, opt, err
	}
	t.Stop = nonEmpty(t.Stop)
	if len(t.Stop) == 0 {
		t.Stop = slices.Clone(inst.Opts.Stop)
	}
	var progress bool
	for _, b := range []struct {
		o   *wire.Opt[bool]
		dst *bool
	}{{&g.Stream, &opt.Stream}, {&g.ReturnTokens, &opt.ReturnTokens}, {&g.TimingsPerToken, &opt.TimingsPerToken},
		{&g.PostSamplingProbs, &opt.PostSamplingProbs}, {&g.Verbose, &opt.Verbose}, {&g.ReturnProgress, &progress}} {
		if err := b.o.Read(b.dst, "a boolean"); err != nil {
			return nil, opt, err
		}
	}
	t.ReturnProgress = progress && opt.Stream
	t.PostSamplingProbs = opt.PostSamplingProbs
	// A whole answer is read at its end: the loop need not wake the reader per token.
	t.WakeAtEnd = !opt.Stream
	if err := g.ResponseFields.Read(&opt.ResponseFields, fmt.Sprintf("an array of at most %d strings", wire.MaxStrings)); err != nil {
		return nil, opt, err
	}
	if err := parseSamplers(g.Samplers, p); err != nil {
		return nil, opt, err
	}
	if err := parseLogitBias(g.LogitBias, inst.Model, p); err != nil {
		return nil, opt, err
	}
	if err := parseLoRA(&g.LoRA, inst, t); err != nil {
		return nil, opt, err
	}
	if err := inst.limitTask(t); err != nil {
		return nil, opt, err
	}
	if err := parseGrammar(g, inst.Model, p); err != nil {
		return nil, opt, err
	}
	if err := parseLazy(g, inst.Model, p); err != nil {
		return nil, opt, err
	}
	if err := parseSpeculative(g, t); err != nil {
		return nil, opt, err
	}
	opt.Settings = generationSettings(t, opt, inst)
	return t, opt, nil
}

// withTemplateKwargs returns a request's template variables with the
// server's defaults (ChatTemplateKwargs) for those it does not set.
func (o Options) withTemplateKwargs(req map[string]any) map[string]any {
	if len(o.ChatTemplateKwargs) == 0 {
		return req
	}
	out := maps.Clone(o.ChatTemplateKwargs)
	maps.Copy(out, req)
	return out
}

func nonEmpty(ss []string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// parseSamplers reads samplers: an array of sampler names (or aliases,
// see sampling.ParseSamplers) or a string of their letters
// (sampling.ParseSamplerSeq). A name or letter no sampler has is skipped,
// as llama-server does: front ends send lists written for other versions
// of llama.cpp (SillyTavern's default names "tfs_z", a sampler llama.cpp
// no longer has), and llama-server answers them.
func parseSamplers(raw json.RawMessage, p *sampling.Params) error {
	switch wire.Kind(raw) {
	case 0:
		return nil
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		if n := utf8.RuneCountInString(s); n > wire.MaxStrings {
			return badRequest(`"samplers" has %d letters; at most %d are read`, n, wire.MaxStrings)
		}
		p.Samplers, _ = sampling.ParseSamplerSeq(s)
	default:
		names, err := wire.DecodeStrings(raw, wire.MaxStrings)
		if err == wire.ErrTooMany {
			return badRequest(`"samplers" has more than %d names`, wire.MaxStrings)
		} else if err != nil {
			return badRequest(`"samplers" must be an array of sampler names`)
		}
		p.Samplers, _ = sampling.ParseSamplers(names)
	}
	return nil
}

// parseLogitBias reads logit_bias in llama.cpp's array form
// ([[token or text, bias or false], ...]) or OpenAI's object form
// ({"token id or text": bias}). Token ids outside the vocabulary are
// skipped, as llama-server skips them.
func parseLogitBias(raw json.RawMessage, m *llama.Model, p *sampling.Params) error {
	type entry struct {
		key  json.RawMessage
		bias json.RawMessage
	}
	var entries []entry
	switch wire.Kind(raw) {
	case 0:
		return nil
	case 'a':
		var pairs [][]json.RawMessage
		if json.Unmarshal(raw, &pairs) != nil {
			return badRequest(`"logit_bias" must be an array of [token, bias] pairs or an object`)
		}
		for _, pr := range pairs {
			if len(pr) != 2 {
				return badRequest(`"logit_bias" entries must be [token, bias] pairs`)
			}
			entries = append(entries, entry{pr[0], pr[1]})
		}
	case 'o':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return badRequest(`"logit_bias" must be an object`)
		}
		for k, v := range obj {
			key, _ := json.Marshal(k)
			if _, err := strconv.Atoi(k); err == nil {
				key = json.RawMessage(k)
			}
			entries = append(entries, entry{key, v})
		}
	default:
		return badRequest(`"logit_bias" must be an array of [token, bias] pairs or an object`)
	}
	bias := map[llama.Token]float32{}
	for _, e := range entries {
		var b float32
		switch wire.Kind(e.bias) {
		case 'b':
			var on bool
			_ = json.Unmarshal(e.bias, &on)
			if on {
				return badRequest(`"logit_bias": a bias of true is not allowed (use a number, or false to ban a token)`)
			}
			b = float32(math.Inf(-1))
		case 'n':
			var v float64
			if err := json.Unmarshal(e.bias, &v); err != nil || math.Abs(v) > math.MaxFloat32 {
				return badRequest(`"logit_bias" biases must be numbers or false`)
			}
			b = float32(v)
		default:
			return badRequest(`"logit_bias" biases must be numbers or false`)
		}
		switch wire.Kind(e.key) {
		case 'n':
			id, err := rawInteger(e.key, "logit_bias")
			if err != nil {
				return err
			}
			// An id the vocabulary has not is skipped, as llama-server
			// does: front ends bias ids from a tokenizer of their own
			// (SillyTavern's, tiktoken's), which may be larger.
			if id >= 0 && id < int64(m.VocabSize()) {
				bias[llama.Token(id)] = b
			}
		case 's':
			var s string
			_ = json.Unmarshal(e.key, &s)
			toks, err := tokenizeText(m, s, llama.TokenizeOptions{})
			if err != nil {
				return badRequest(`"logit_bias": %v`, err)
			}
			for _, t := range toks {
				bias[t] = b
			}
		default:
			return badRequest(`"logit_bias" keys must be token ids or strings`)
		}
	}
	p.LogitBias = bias
	return nil
}

func parseLoRA(lora *wire.Opt[[]wire.LoraItem], inst *instance, t *engine.Request) error {
	var items []wire.LoraItem
	if err := lora.Read(&items, `an array of {"id", "scale"} objects`); err != nil || !lora.Set {
		return err
	}
	n := len(inst.Engine.Adapters())
	t.LoRA = []engine.LoRAScale{}
	for _, it := range items {
		if it.ID == nil || it.Scale == nil {
			return badRequest(`"lora" entries need "id" and "scale"`)
		}
		if *it.ID < 0 || *it.ID >= n {
			return badRequest(`"lora": adapter id %d is out of range (%d loaded)`, *it.ID, n)
		}
		t.LoRA = append(t.LoRA, engine.LoRAScale{ID: *it.ID, Scale: *it.Scale})
	}
	return nil
}

// parseGrammar reads grammar or json_schema and checks the grammar with
// llama.cpp's parser.
func parseGrammar(f *wire.Gen, m *llama.Model, p *sampling.Params) error {
	if err := checkSchemaField(f); err != nil {
		return err
	}
	var g string
	if err := f.Grammar.Read(&g, "a string"); err != nil {
		return err
	}
	if len(f.JSONSchema) > 0 {
		var err error
		g, err = schemaGrammar(f.JSONSchema)
		if err != nil {
			return err
		}
	}
	if g == "" {
		return nil
	}
	gr, err := checkGrammar(m, g)
	if err != nil {
		return err
	}
	p.Grammar, p.ParsedGrammar = g, gr
	return nil
}

// Limits of a lazy grammar's fields.
const (
	maxTriggers       = 64
	maxPreserved      = 256
	maxTriggerBytes   = 4096
	maxPreservedBytes = 256
)

// parseLazy reads grammar_lazy, grammar_triggers and preserved_tokens as
// llama-server does: a trigger word that is one token must be a preserved
// token, and then triggers as that token; a lazy grammar needs a trigger.
func parseLazy(f *wire.Gen, m *llama.Model, p *sampling.Params) error {
	if err := f.GrammarLazy.Read(&p.GrammarLazy, "a boolean"); err != nil {
		return err
	}
	var preserved []string
	if err := f.PreservedTokens.Read(&preserved, "an array of strings"); err != nil {
		return err
	}
	if len(preserved) > maxPreserved {
		return badRequest(`"preserved_tokens" has %d entries; at most %d are allowed`, len(preserved), maxPreserved)
	}
	kept := map[llama.Token]bool{}
	p.PreservedTokens = nil
	for _, s := range preserved {
		if len(s) > maxPreservedBytes {
			return badRequest(`"preserved_tokens": an entry has %d bytes; at most %d are allowed`, len(s), maxPreservedBytes)
		}
		if t, ok := m.SingleToken(s); ok {
			kept[t] = true
			p.PreservedTokens = append(p.PreservedTokens, s)
		}
	}
	var triggers []wire.Trigger
	if err := f.GrammarTriggers.Read(&triggers, "an array of triggers"); err != nil {
		return err
	}
	if len(triggers) > maxTriggers {
		return badRequest(`"grammar_triggers" has %d entries; at most %d are allowed`, len(triggers), maxTriggers)
	}
	p.GrammarTriggers = nil
	for i, tr := range triggers {
		if tr.Type == nil || tr.Value == nil {
			return badRequest(`"grammar_triggers"[%d] needs "type" and "value"`, i)
		}
		v := *tr.Value
		if len(v) > maxTriggerBytes {
			return badRequest(`"grammar_triggers"[%d]: the value has %d bytes; at most %d are allowed`, i, len(v), maxTriggerBytes)
		}
		g := sampling.GrammarTrigger{Token: llama.NoToken}
		switch *tr.Type {
		case 0:
			if tr.Token == nil {
				return badRequest(`"grammar_triggers"[%d]: a token trigger needs "token"`, i)
			}
			if err := m.CheckToken(llama.Token(*tr.Token)); err != nil {
				return badRequest(`"grammar_triggers"[%d]: token %d is not in the vocabulary`, i, *tr.Token)
			}
			g.Token = llama.Token(*tr.Token)
		case 1:
			if v == "" {
				return badRequest(`"grammar_triggers"[%d]: an empty word`, i)
			}
			if t, ok := m.SingleToken(v); ok {
				if !kept[t] {
					return badRequest("Grammar trigger word should be marked as preserved token: %s", v)
				}
				g.Token = t
			} else {
				g.Word = v
			}
		case 2, 3:
			if v == "" {
				return badRequest(`"grammar_triggers"[%d]: an empty pattern`, i)
			}
			if err := llama.CheckTriggerPattern(v); err != nil {
				return badRequest(`"grammar_triggers"[%d]: %v`, i, err)
			}
			g.Pattern, g.PatternFull = v, *tr.Type == 3
		default:
			return badRequest(`"grammar_triggers"[%d]: unknown type %d (0 token, 1 word, 2 pattern, 3 full pattern)`, i, *tr.Type)
		}
		p.GrammarTriggers = append(p.GrammarTriggers, g)
	}
	if p.GrammarLazy && len(p.GrammarTriggers) == 0 {
		return badRequest("Error: no triggers set for lazy grammar!")
	}
	return nil
}

// checkSchemaField checks the body's "json_schema" beside its "grammar":
// at most one of them, and a schema an object or a boolean.
func checkSchemaField(f *wire.Gen) error {
	if len(f.JSONSchema) == 0 {
		return nil
	}
	if f.Grammar.Set {
		return badRequest(`use either "grammar" or "json_schema", not both`)
	}
	if k := wire.Kind(f.JSONSchema); k != 'o' && k != 'b' {
		return badRequest(`"json_schema" must be a JSON Schema object`)
	}
	return nil
}

// schemaGrammar converts a JSON Schema to GBNF, as a 400 on failure.
func schemaGrammar(schema json.RawMessage) (string, error) {
	if err := checkSchemaSize(schema); err != nil {
		return "", err
	}
	g, err := jsonschema.ToGBNF(schema)
	if err != nil {
		return "", badRequest("invalid json_schema: %v", err)
	}
	return g, nil
}

// checkGrammar checks g with sampling.CheckedGrammar, as a 400, and
// returns it parsed (for sampling.Params.ParsedGrammar).
func checkGrammar(m *llama.Model, g string) (*llama.Grammar, error) {
	gr, err := sampling.CheckedGrammar(m, g)
	return gr, samplingError(err)
}

// samplingError is err, a *sampling.Error, as a 400 (other errors and nil
// as they are).
func samplingError(err error) error {
	var se *sampling.Error
	if errors.As(err, &se) {
		return badRequest("%s", se.Msg)
	}
	return err
}

// generationSettings is the generation_settings object of native responses.
func generationSettings(t *engine.Request, opt genOptions, inst *instance) map[string]any {
	p := t.Params
	lora := []map[string]any{}
	for _, l := range t.LoRA {
		lora = append(lora, map[string]any{"id": l.ID, "scale": l.Scale})
	}
	// llama-server's shape: {"bias", "token"} objects, -inf as null; with
	// ignore_eos the end-of-generation tokens' -inf biases are listed too.
	type biasEntry struct {
		Bias  *float32    `json:"bias"`
		Token llama.Token `json:"token"`
	}
	bias := []biasEntry{}
	for tok, b := range p.LogitBias {
		e := biasEntry{Token: tok}
		if !math.IsInf(float64(b), -1) {
			e.Bias = &b
		}
		bias = append(bias, e)
	}
	if p.IgnoreEOS {
		for _, tok := range inst.eogTokens() {
			if _, ok := p.LogitBias[tok]; !ok {
				bias = append(bias, biasEntry{Token: tok})
			}
		}
	}
	sort.Slice(bias, func(i, j int) bool { return bias[i].Token < bias[j].Token })
	out := map[string]any{
		"seed": p.Seed, "dry_sequence_breakers": p.DRYSequenceBreakers,
		"stop": nonNilStrings(t.Stop), "ignore_eos": p.IgnoreEOS, "stream": opt.Stream, "logit_bias": bias,
		"backend_sampling": p.BackendSampling,
		"grammar":          p.Grammar, "samplers": nonNilStrings(p.Samplers), "timings_per_token": opt.TimingsPerToken,
		"post_sampling_probs": opt.PostSamplingProbs, "lora": lora, "cache_prompt": t.CachePrompt,
		"n_ctx": inst.slotContext(), "model": inst.Name, "speculative.types": inst.Opts.Engine.Speculative.TypesString(),
	}
	for i := range genParams {
		genParams[i].echo(t, out)
	}
	return out
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// parsePrompts reads a prompt field: a string, an array of token ids, a
// mixed array of strings and token ids (one prompt), or an array of those
// (several prompts). Strings are tokenized with the model's BOS; token ids
// must be in the vocabulary.
func parsePrompts(raw json.RawMessage, name string, inst *instance) ([][]llama.Token, error) {
	switch wire.Kind(raw) {
	case 's':
		var s string
		_ = json.Unmarshal(raw, &s)
		toks, err := inst.tokenizePrompt(s)
		if err != nil {
			return nil, err
		}
		return [][]llama.Token{toks}, nil
	case 'o':
		toks, err := objectPrompt(raw, name, inst)
		if err != nil {
			return nil, err
		}
		return [][]llama.Token{toks}, nil
	case 'a':
	default:
		return nil, badRequest("%q must be a string, an array of token ids, an object with a prompt_string, or an array of prompts", name)
	}
	// raw was decoded with the body: valid JSON, its shape exact.
	sh := wire.ShapeOf(raw)
	if sh.Entries == 0 {
		return nil, badRequest("%q must not be empty", name)
	}
	if err := inst.checkPromptItems(sh.Entries, sh.Numbers); err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("%q: %v", name, err)
	}
	if sh.Numbers > 0 { // one prompt of token ids and texts
		toks, err := mixedPrompt(items, name, inst)
		if err != nil {
			return nil, err
		}
		return [][]llama.Token{toks}, nil
	}
	var out [][]llama.Token
	for i, it := range items {
		sub := fmt.Sprintf("%s[%d]", name, i)
		switch wire.Kind(it) {
		case 's':
			var s string
			_ = json.Unmarshal(it, &s)
			toks, err := inst.tokenizePrompt(s)
			if err != nil {
				return nil, err
			}
			out = append(out, toks)
		case 'a':
			var parts []json.RawMessage
			_ = json.Unmarshal(it, &parts)
			toks, err := mixedPrompt(parts, sub, inst)
			if err != nil {
				return nil, err
			}
			out = append(out, toks)
		case 'o':
			toks, err := objectPrompt(it, sub, inst)
			if err != nil {
				return nil, err
			}
			out = append(out, toks)
		default:
			return nil, badRequest("%q must be a string, an array of token ids or an object with a prompt_string", sub)
		}
	}
	return out, nil
}

// objectPrompt reads a prompt object, {"prompt_string": text or mixed
// array, "multimodal_data": [base64...]}, as llama.cpp accepts it; there is
// no multimodal projector here, so multimodal data is a 400.
func objectPrompt(raw json.RawMessage, name string, inst *instance) ([]llama.Token, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, badRequest("%q: %v", name, err)
	}
	ps, ok := obj["prompt_string"]
	if !ok {
		return nil, badRequest("%q: a prompt object needs a \"prompt_string\"", name)
	}
	if _, mm := obj["multimodal_data"]; mm {
		return nil, badRequest("%q: multimodal data provided, but the model does not support multimodal requests", name)
	}
	sub := name + ".prompt_string"
	switch wire.Kind(ps) {
	case 's':
		var s string
		_ = json.Unmarshal(ps, &s)
		return inst.tokenizePrompt(s)
	case 'a':
		var parts []json.RawMessage
		if err := json.Unmarshal(ps, &parts); err != nil || len(parts) == 0 {
			return nil, badRequest("%q must be a string or a non-empty array of token ids and strings", sub)
		}
		return mixedPrompt(parts, sub, inst)
	}
	return nil, badRequest("%q must be a string or an array of token ids and strings", sub)
}

// mixedPrompt joins token ids and strings into one prompt; only a leading
// string gets the BOS token.
func mixedPrompt(items []json.RawMessage, name string, inst *instance) ([]llama.Token, error) {
	var toks []llama.Token
	vocab := int64(inst.Model.VocabSize())
	for i, it := range items {
		switch wire.Kind(it) {
		case 'n':
			id, err := rawInteger(it, name)
			if err != nil {
				return nil, err
			}
			if id < 0 || id >= vocab {
				return nil, badRequest("%q: token id %d is out of range [0, %d)", name, id, vocab)
			}
			toks = append(toks, llama.Token(id))
		case 's':
			var s string
			_ = json.Unmarshal(it, &s)
			var t []llama.Token
			var err error
			if i == 0 {
				t, err = inst.tokenizePrompt(s)
			} else {
				t, err = tokenizeText(inst.Model, s, llama.TokenizeOptions{ParseSpecial: true})
			}
			if err != nil {
				return nil, badRequest("%q: %v", name, err)
			}
			toks = append(toks, t...)
		default:
			return nil, badRequest("%q must hold only token ids and strings", name)
		}
	}
	return toks, nil
}
