package server

// Parsing of llama.cpp's generation parameters (the /completion request
// fields) into an engine.Request. A request body is first decoded into reqFields, a
// map of raw JSON values, so that a value of the wrong type is reported by
// its field name instead of as a generic decoding error.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/x/llama/engine"

	"github.com/x/llama"
	"github.com/x/llama/internal/jsonschema"
	"github.com/x/llama/sampling"
)

// reqFields is a JSON object whose values are decoded on demand. A JSON
// null counts as absent.
type reqFields map[string]json.RawMessage

// parseFields decodes a JSON object body.
func parseFields(body []byte) (reqFields, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, badRequest("the request body is empty")
	}
	if body[0] != '{' {
		return nil, badRequest("the request body must be a JSON object")
	}
	var f reqFields
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, badRequest("malformed JSON: %v", err)
	}
	if f == nil {
		f = reqFields{}
	}
	return f, nil
}

// has reports whether key is present and not null.
func (f reqFields) has(key string) bool {
	v, ok := f[key]
	return ok && !isNull(v)
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// kind returns the JSON kind of a present value: 'o', 'a', 's', 'n', 'b'
// or 0 when absent or null.
func (f reqFields) kind(key string) byte {
	if !f.has(key) {
		return 0
	}
	return jsonKind(f[key])
}

func jsonKind(v json.RawMessage) byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	switch v[0] {
	case '{':
		return 'o'
	case '[':
		return 'a'
	case '"':
		return 's'
	case 't', 'f':
		return 'b'
	case 'n':
		return 0
	}
	return 'n'
}

// decode decodes a present value into dst, naming the field on failure.
func (f reqFields) decode(key string, dst any, want string) error {
	if err := json.Unmarshal(f[key], dst); err != nil {
		return badRequest("%q must be %s", key, want)
	}
	return nil
}

// float reads a number into dst when present.
func (f reqFields) float(key string, dst *float32) error {
	if !f.has(key) {
		return nil
	}
	var v float64
	if err := f.decode(key, &v, "a number"); err != nil {
		return err
	}
	return checkFloat(key, v, dst)
}

// int reads an integer into dst when present; it must fit in [lo, hi].
func (f reqFields) int(key string, dst *int, lo, hi int64) error {
	if !f.has(key) {
		return nil
	}
	n, err := f.integer(key)
	if err != nil {
		return err
	}
	return checkInt(key, n, dst, lo, hi)
}

// integer reads a present integer (a float with no fraction is accepted).
func (f reqFields) integer(key string) (int64, error) {
	return rawInteger(f[key], key)
}

func rawInteger(raw json.RawMessage, name string) (int64, error) {
	if jsonKind(raw) != 'n' {
		return 0, badRequest("%q must be an integer", name)
	}
	var num json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&num); err != nil {
		return 0, badRequest("%q must be an integer", name)
	}
	if n, err := strconv.ParseInt(num.String(), 10, 64); err == nil {
		return n, nil
	}
	x, err := strconv.ParseFloat(num.String(), 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, badRequest("%q must be an integer in range, got %s", name, num.String())
	}
	return int64(x), nil
}

// bool reads a boolean into dst when present.
func (f reqFields) bool(key string, dst *bool) error {
	if !f.has(key) {
		return nil
	}
	return f.decode(key, dst, "a boolean")
}

// str reads a string into dst when present.
func (f reqFields) str(key string, dst *string) error {
	if !f.has(key) {
		return nil
	}
	return f.decode(key, dst, "a string")
}

// strs reads a string or an array of strings when present.
func (f reqFields) strs(key string, dst *[]string) error {
	if !f.has(key) {
		return nil
	}
	if f.kind(key) == 's' {
		var s string
		if err := f.decode(key, &s, "a string or an array of strings"); err != nil {
			return err
		}
		*dst = []string{s}
		return nil
	}
	return f.decode(key, dst, "a string or an array of strings")
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
	ResponseFields    []string
	// Verbose adds llama-server's __verbose debug object to OpenAI-shaped
	// answers ("verbose"; default Options.Verbose).
	Verbose bool
	// Settings is generation_settings as the native endpoint reports it.
	Settings map[string]any
}

// genValue is a generation parameter that a dialect sets from a typed field
// of its own (Anthropic's temperature, a transcription form's max_tokens),
// under llama.cpp's name for it. It is checked as the same field in JSON
// would be.
type genValue struct {
	Name  string
	Float float64
	Int   int64
	Bool  bool
	Strs  []string
}

// genInput is the generation part of a request: llama.cpp's fields as
// JSON (native, OpenAI and Responses bodies carry them), and typed values
// set by a dialect's converter, which take the place of the JSON field of
// the same name.
type genInput struct {
	Fields reqFields
	Set    []genValue
}

// value returns the typed value named key.
func (g genInput) value(key string) (genValue, bool) {
	for _, v := range g.Set {
		if v.Name == key {
			return v, true
		}
	}
	return genValue{}, false
}

// has reports whether key is given, typed or as JSON.
func (g genInput) has(key string) bool {
	_, ok := g.value(key)
	return ok || g.Fields.has(key)
}

// float reads a number into dst when present.
func (g genInput) float(key string, dst *float32) error {
	v, ok := g.value(key)
	if !ok {
		return g.Fields.float(key, dst)
	}
	return checkFloat(key, v.Float, dst)
}

// checkFloat stores v in dst if it fits a float32.
func checkFloat(key string, v float64, dst *float32) error {
	if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
		return badRequest("%q is out of range", key)
	}
	*dst = float32(v)
	return nil
}

// int reads an integer in [lo, hi] into dst when present.
func (g genInput) int(key string, dst *int, lo, hi int64) error {
	v, ok := g.value(key)
	if !ok {
		return g.Fields.int(key, dst, lo, hi)
	}
	return checkInt(key, v.Int, dst, lo, hi)
}

// checkInt stores n in dst if it is in [lo, hi].
func checkInt(key string, n int64, dst *int, lo, hi int64) error {
	if n < lo || n > hi {
		return badRequest("%q must be between %d and %d, got %d", key, lo, hi, n)
	}
	*dst = int(n)
	return nil
}

// bool reads a boolean into dst when present.
func (g genInput) bool(key string, dst *bool) error {
	v, ok := g.value(key)
	if !ok {
		return g.Fields.bool(key, dst)
	}
	*dst = v.Bool
	return nil
}

// strs reads a string or an array of strings when present.
func (g genInput) strs(key string, dst *[]string) error {
	v, ok := g.value(key)
	if !ok {
		return g.Fields.strs(key, dst)
	}
	*dst = slices.Clone(v.Strs)
	return nil
}

// parseGeneration reads every generation parameter of f into an engine.Request with
// the server's defaults for what f does not set. The prompt is left to the
// caller. Errors are *httpError (400).
func parseGeneration(f reqFields, inst *instance, defaultNPredict int) (*engine.Request, genOptions, error) {
	return inst.generation(genInput{Fields: f}, defaultNPredict)
}

// generation is parseGeneration of a request's generation part g.
func (inst *instance) generation(g genInput, defaultNPredict int) (*engine.Request, genOptions, error) {
	f := g.Fields
	opt := genOptions{Verbose: inst.Opts.Verbose}
	t := inst.Opts.baseRequest(defaultNPredict)
	p := &t.Params
	for i := range genParams {
		if err := genParams[i].parse(g, t); err != nil {
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
	if f.has("seed") {
		n, err := f.integer("seed")
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
	if err := f.strs("dry_sequence_breakers", &p.DRYSequenceBreakers); err != nil {
		return nil, opt, err
	}
	if f.has("dry_sequence_breakers") && len(p.DRYSequenceBreakers) == 0 {
		return nil, opt, badRequest(`"dry_sequence_breakers" must not be empty`)
	}
	if err := g.bool("ignore_eos", &p.IgnoreEOS); err != nil {
		return nil, opt, err
	}
	if err := g.bool("backend_sampling", &p.BackendSampling); err != nil {
		return nil, opt, err
	}
	if err := g.bool("cache_prompt", &t.CachePrompt); err != nil {
		return nil, opt, err
	}
	// n_cache_reuse, as in llama.cpp, replaces the server's --cache-reuse
	// for this request: 0 (or less) turns reuse off.
	if f.has("n_cache_reuse") {
		if err := f.int("n_cache_reuse", &t.CacheReuse, math.MinInt32, math.MaxInt32); err != nil {
			return nil, opt, err
		}
		if t.CacheReuse <= 0 {
			t.CacheReuse = -1
		}
	}
	if err := g.strs("stop", &t.Stop); err != nil {
		return nil, opt, err
	}
	t.Stop = nonEmpty(t.Stop)
	if len(t.Stop) == 0 {
		t.Stop = slices.Clone(inst.Opts.Stop)
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"stream", &opt.Stream}, {"return_tokens", &opt.ReturnTokens}, {"timings_per_token", &opt.TimingsPerToken}, {"post_sampling_probs", &opt.PostSamplingProbs}, {"verbose", &opt.Verbose}} {
		if err := g.bool(b.key, b.dst); err != nil {
			return nil, opt, err
		}
	}
	var progress bool
	if err := f.bool("return_progress", &progress); err != nil {
		return nil, opt, err
	}
	t.ReturnProgress = progress && opt.Stream
	// A whole answer is read at its end: the loop need not wake the reader per token.
	t.WakeAtEnd = !opt.Stream
	if f.has("response_fields") {
		if err := f.decode("response_fields", &opt.ResponseFields, "an array of strings"); err != nil {
			return nil, opt, err
		}
	}
	if err := parseSamplers(f, p); err != nil {
		return nil, opt, err
	}
	if err := parseLogitBias(f, inst.Model, p); err != nil {
		return nil, opt, err
	}
	if err := parseLoRA(f, inst, t); err != nil {
		return nil, opt, err
	}
	if err := inst.limitTask(t); err != nil {
		return nil, opt, err
	}
	if err := parseGrammar(f, inst.Model, p); err != nil {
		return nil, opt, err
	}
	if err := parseSpeculative(f, t); err != nil {
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
// see sampling.LookupSampler) or a string of their letters.
func parseSamplers(f reqFields, p *sampling.Params) error {
	switch f.kind("samplers") {
	case 0:
		return nil
	case 's':
		var s string
		if err := f.decode("samplers", &s, "an array of sampler names"); err != nil {
			return err
		}
		p.Samplers = nil
		for _, c := range s {
			name, ok := sampling.SamplerByLetter(c)
			if !ok {
				return badRequest("unknown sampler %q in \"samplers\"", string(c))
			}
			p.Samplers = append(p.Samplers, name)
		}
		return nil
	}
	var names []string
	if err := f.decode("samplers", &names, "an array of sampler names"); err != nil {
		return err
	}
	p.Samplers = nil
	for _, n := range names {
		name, ok := sampling.LookupSampler(n)
		if !ok {
			return badRequest("unknown sampler %q in \"samplers\"", n)
		}
		p.Samplers = append(p.Samplers, name)
	}
	return nil
}

// parseLogitBias reads logit_bias in llama.cpp's array form
// ([[token or text, bias or false], ...]) or OpenAI's object form
// ({"token id or text": bias}).
func parseLogitBias(f reqFields, m *llama.Model, p *sampling.Params) error {
	type entry struct {
		key  json.RawMessage
		bias json.RawMessage
	}
	var entries []entry
	switch f.kind("logit_bias") {
	case 0:
		return nil
	case 'a':
		var pairs [][]json.RawMessage
		if err := f.decode("logit_bias", &pairs, "an array of [token, bias] pairs or an object"); err != nil {
			return err
		}
		for _, pr := range pairs {
			if len(pr) != 2 {
				return badRequest(`"logit_bias" entries must be [token, bias] pairs`)
			}
			entries = append(entries, entry{pr[0], pr[1]})
		}
	case 'o':
		var obj map[string]json.RawMessage
		if err := f.decode("logit_bias", &obj, "an object"); err != nil {
			return err
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
		switch jsonKind(e.bias) {
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
		switch jsonKind(e.key) {
		case 'n':
			id, err := rawInteger(e.key, "logit_bias")
			if err != nil {
				return err
			}
			if id < 0 || id >= int64(m.VocabSize()) {
				return badRequest(`"logit_bias": token id %d is out of range [0, %d)`, id, m.VocabSize())
			}
			bias[llama.Token(id)] = b
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

func parseLoRA(f reqFields, inst *instance, t *engine.Request) error {
	if !f.has("lora") {
		return nil
	}
	var items []struct {
		ID    *int     `json:"id"`
		Scale *float32 `json:"scale"`
	}
	if err := f.decode("lora", &items, `an array of {"id", "scale"} objects`); err != nil {
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
func parseGrammar(f reqFields, m *llama.Model, p *sampling.Params) error {
	if f.has("grammar") && f.has("json_schema") {
		return badRequest(`use either "grammar" or "json_schema", not both`)
	}
	var g string
	if err := f.str("grammar", &g); err != nil {
		return err
	}
	if f.has("json_schema") {
		if k := f.kind("json_schema"); k != 'o' && k != 'b' {
			return badRequest(`"json_schema" must be a JSON Schema object`)
		}
		var err error
		g, err = schemaGrammar(f["json_schema"])
		if err != nil {
			return err
		}
	}
	if g == "" {
		return nil
	}
	if err := checkGrammar(m, g); err != nil {
		return err
	}
	p.Grammar = g
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

// checkGrammar checks g with sampling.CheckGrammar, as a 400.
func checkGrammar(m *llama.Model, g string) error {
	return samplingError(sampling.CheckGrammar(m, g))
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
		"grammar":          p.Grammar, "samplers": p.Samplers, "timings_per_token": opt.TimingsPerToken,
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
	switch jsonKind(raw) {
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
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("%q: %v", name, err)
	}
	if len(items) == 0 {
		return nil, badRequest("%q must not be empty", name)
	}
	single := false
	for _, it := range items {
		if jsonKind(it) == 'n' {
			single = true
			break
		}
	}
	if err := inst.checkPromptItems(items, single); err != nil {
		return nil, err
	}
	if single {
		toks, err := mixedPrompt(items, name, inst)
		if err != nil {
			return nil, err
		}
		return [][]llama.Token{toks}, nil
	}
	var out [][]llama.Token
	for i, it := range items {
		sub := fmt.Sprintf("%s[%d]", name, i)
		switch jsonKind(it) {
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
	switch jsonKind(ps) {
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
		switch jsonKind(it) {
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
