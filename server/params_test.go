package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"testing"

	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
	"github.com/x/llama/server/internal/openai"
	"github.com/x/llama/server/internal/wire"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

func testInstance(t *testing.T) *instance {
	t.Helper()
	s, _ := newTestServer(t, Options{})
	return defaultInstance(t, s)
}

func TestParseGeneration(t *testing.T) {
	inst := testInstance(t)
	m := inst.Model
	tok := func(s string) []llama.Token {
		toks, err := m.Tokenize(s, llama.TokenizeOptions{})
		require.NoError(t, err)
		return toks
	}
	def := sampling.Defaults()
	cases := []struct {
		name  string
		body  string
		check func(t *testing.T, task *engine.Request, opt genOptions)
	}{
		{"defaults", `{}`, func(t *testing.T, task *engine.Request, opt genOptions) {
			assert.Equal(t, def.Temperature, task.Params.Temperature)
			assert.Equal(t, def.Samplers, task.Params.Samplers)
			assert.Equal(t, -1, task.NPredict)
			assert.True(t, task.CachePrompt)
			assert.Equal(t, -1, task.SlotID)
			assert.Equal(t, llama.DefaultSeed, task.Params.Seed)
			assert.False(t, opt.Stream)
		}},
		{"sampling numbers", `{"temperature":0.5,"top_k":7,"top_p":0.5,"min_p":0.1,"typical_p":0.9,"xtc_probability":0.2,"xtc_threshold":0.3,"top_n_sigma":1.5,"dynatemp_range":0.2,"dynatemp_exponent":1.1,"mirostat":2,"mirostat_tau":4,"mirostat_eta":0.2,"repeat_last_n":32,"repeat_penalty":1.1,"presence_penalty":0.3,"frequency_penalty":0.4,"dry_multiplier":0.8,"dry_base":2,"dry_allowed_length":3,"dry_penalty_last_n":16,"dry_sequence_breakers":["x"],"seed":7,"adaptive_target":0.4,"adaptive_decay":0.8,"ignore_eos":true,"n_probs":4,"n_keep":2,"t_max_predict_ms":100,"id_slot":1,"cache_prompt":false}`,
			func(t *testing.T, task *engine.Request, opt genOptions) {
				p := task.Params
				assert.Equal(t, sampling.Params{
					Temperature: 0.5, DynatempRange: 0.2, DynatempExponent: 1.1, TopK: 7, TopP: 0.5, MinP: 0.1, TypicalP: 0.9,
					XTCProbability: 0.2, XTCThreshold: 0.3, TopNSigma: 1.5, Mirostat: 2, MirostatTau: 4, MirostatEta: 0.2,
					RepeatLastN: 32, RepeatPenalty: 1.1, PresencePenalty: 0.3, FrequencyPenalty: 0.4, DRYMultiplier: 0.8,
					DRYBase: 2, DRYAllowedLength: 3, DRYPenaltyLastN: 16, DRYSequenceBreakers: []string{"x"}, Seed: 7,
					AdaptiveTarget: 0.4, AdaptiveDecay: 0.8, Samplers: def.Samplers, IgnoreEOS: true, NProbs: 4,
				}, p)
				assert.Equal(t, 2, task.NKeep)
				assert.Equal(t, 100, task.TMaxPredictMs)
				assert.Equal(t, 1, task.SlotID)
				assert.False(t, task.CachePrompt)
			}},
		{"-1 means the context", `{"repeat_last_n":-1,"dry_penalty_last_n":-1,"seed":-1}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, 512, task.Params.RepeatLastN)
			assert.Equal(t, 512, task.Params.DRYPenaltyLastN)
			assert.Equal(t, llama.DefaultSeed, task.Params.Seed)
		}},
		{"n_predict wins over max_tokens", `{"max_tokens":5,"n_predict":7}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, 7, task.NPredict)
		}},
		{"max_tokens", `{"max_tokens":5}`, func(t *testing.T, task *engine.Request, _ genOptions) { assert.Equal(t, 5, task.NPredict) }},
		{"stop string", `{"stop":"END"}`, func(t *testing.T, task *engine.Request, _ genOptions) { assert.Equal(t, []string{"END"}, task.Stop) }},
		{"stop list drops empty", `{"stop":["a","","b"]}`, func(t *testing.T, task *engine.Request, _ genOptions) { assert.Equal(t, []string{"a", "b"}, task.Stop) }},
		{"samplers by name and alias", `{"samplers":["top-k","nucleus","temp","typ","minp"]}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, []string{"top_k", "top_p", "temperature", "typ_p", "min_p"}, task.Params.Samplers)
		}},
		{"samplers as letters", `{"samplers":"kpt"}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, []string{"top_k", "top_p", "temperature"}, task.Params.Samplers)
		}},
		{"logit_bias arrays", `{"logit_bias":[[12,1.5],[13,false]]}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, float32(1.5), task.Params.LogitBias[12])
			assert.True(t, math.IsInf(float64(task.Params.LogitBias[13]), -1))
		}},
		{"logit_bias text", `{"logit_bias":[[" Lily",-2]]}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			toks := tok(" Lily")
			require.NotEmpty(t, toks)
			for _, x := range toks {
				assert.Equal(t, float32(-2), task.Params.LogitBias[x])
			}
		}},
		{"logit_bias object", `{"logit_bias":{"12":3,"14":false}}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, float32(3), task.Params.LogitBias[12])
			assert.True(t, math.IsInf(float64(task.Params.LogitBias[14]), -1))
		}},
		{"grammar", `{"grammar":"root ::= \"a\""}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, `root ::= "a"`, task.Params.Grammar)
		}},
		{"json_schema", `{"json_schema":{"type":"boolean"}}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Contains(t, task.Params.Grammar, "root ::=")
			assert.Contains(t, task.Params.Grammar, "true")
		}},
		{"lora empty list", `{"lora":[]}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.NotNil(t, task.LoRA)
			assert.Empty(t, task.LoRA)
		}},
		{"response options", `{"stream":true,"return_tokens":true,"timings_per_token":true,"post_sampling_probs":true,"response_fields":["content"]}`, func(t *testing.T, task *engine.Request, opt genOptions) {
			assert.True(t, opt.Stream && opt.ReturnTokens && opt.TimingsPerToken && opt.PostSamplingProbs)
			assert.True(t, task.PostSamplingProbs)
			assert.Equal(t, wire.StringList{"content"}, opt.ResponseFields)
		}},
		{"n_cache_reuse absent: the server's", `{}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, 0, task.CacheReuse)
		}},
		{"n_cache_reuse", `{"n_cache_reuse":16}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, 16, task.CacheReuse)
		}},
		{"n_cache_reuse 0 turns reuse off", `{"n_cache_reuse":0}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, -1, task.CacheReuse)
		}},
		{"n_cache_reuse negative turns reuse off", `{"n_cache_reuse":-3}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, -1, task.CacheReuse)
		}},
		{"nulls are absent", `{"temperature":null,"stop":null,"grammar":null}`, func(t *testing.T, task *engine.Request, _ genOptions) {
			assert.Equal(t, def.Temperature, task.Params.Temperature)
			assert.Nil(t, task.Stop)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task, opt, err := parseGeneration([]byte(c.body), inst, 0)
			require.NoError(t, err)
			c.check(t, task, opt)
		})
	}

	// The server's n_predict is the default; a request's own wins (as
	// llama-server v0.4.0), -1 meaning the server's.
	for body, want := range map[string]int{`{"n_predict":100}`: 100, `{}`: 10, `{"n_predict":-1}`: 10, `{"max_tokens":3}`: 3} {
		task, _, err := parseGeneration([]byte(body), inst, 10)
		require.NoError(t, err)
		assert.Equal(t, want, task.NPredict, body)
	}

	for _, bad := range []string{
		`{"id_slot":2}`, `{"top_k":"x"}`, `{"samplers":5}`, `{"min_keep":-1}`, `{"logit_bias":5}`,
		`{"logit_bias":[[1]]}`, `{"logit_bias":[[1,true]]}`, `{"logit_bias":[[{},1]]}`, `{"lora":[{"id":0}]}`,
		`{"dry_sequence_breakers":[]}`, `{"n_probs":-1}`, `{"temperature":1e40}`, `{"response_fields":"content"}`,
		`{"n_cache_reuse":"8"}`, `{"n_cache_reuse":1.5}`, `{"n_cache_reuse":1e12}`,
	} {
		_, _, err := parseGeneration([]byte(bad), inst, 0)
		require.Error(t, err, bad)
		assert.Equal(t, http.StatusBadRequest, classify(err).Status, bad)
	}
}

func TestParsePrompts(t *testing.T) {
	inst := testInstance(t)
	bos := inst.Model.SpecialTokens().BOS
	once, err := inst.tokenizePrompt("Once")
	require.NoError(t, err)
	require.Equal(t, bos, once[0])
	for _, c := range []struct {
		name, raw string
		want      [][]llama.Token
	}{
		{"string", `"Once"`, [][]llama.Token{once}},
		{"tokens", `[5, 6]`, [][]llama.Token{{5, 6}}},
		{"mixed", `["Once", 5]`, [][]llama.Token{append(append([]llama.Token{}, once...), 5)}},
		{"mixed token first", `[5, "Once"]`, [][]llama.Token{append([]llama.Token{5}, once[1:]...)}},
		{"several", `["Once", [5, 6], ["Once", 7]]`, [][]llama.Token{once, {5, 6}, append(append([]llama.Token{}, once...), 7)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parsePrompts([]byte(c.raw), "prompt", inst)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// TestGenParamsTable checks every entry of the parameter table the same
// way: given as JSON or as a dialect's typed value, an in-range value
// reaches the request and the generation_settings echo under each name,
// and an out-of-range one is a 400 naming the field.
func TestGenParamsTable(t *testing.T) {
	inst := testInstance(t)
	props := defaultGenerationParams(inst.Opts)
	for i := range genParams {
		gp := &genParams[i]
		for _, name := range gp.Names {
			t.Run(name, func(t *testing.T) {
				type input struct {
					how string
					g   wire.Gen
				}
				fromJSON := func(body string) wire.Gen {
					var g wire.Gen
					require.NoError(t, wire.Decode([]byte(body), &g))
					return g
				}
				typed := func(set func(*wire.Params)) wire.Gen {
					var g wire.Gen
					set(&g.Params)
					return g
				}
				var ok, bad []input
				var want any
				var wantErr string
				if gp.Float != nil {
					want = float32(1.25)
					ok = []input{{"json", fromJSON(`{"` + name + `":1.25}`)}, {"typed", typed(func(p *wire.Params) { p.SetFloat(name, 1.25) })}}
					bad = []input{{"json", fromJSON(`{"` + name + `":1e40}`)}, {"typed", typed(func(p *wire.Params) { p.SetFloat(name, 1e40) })}}
					wantErr = `"` + name + `" is out of range`
				} else {
					want = 0
					ok = []input{{"json", fromJSON(`{"` + name + `":0}`)}, {"typed", typed(func(p *wire.Params) { p.SetInt(name, 0) })}}
					lo, hi := gp.Lo, gp.Hi
					if gp.Sampling != nil {
						lo, hi = gp.Sampling.Lo, gp.Sampling.Hi
					}
					over := hi + 1
					bad = []input{{"json", fromJSON(fmt.Sprintf(`{%q:%d}`, name, over))}, {"typed", typed(func(p *wire.Params) { p.SetInt(name, over) })}}
					wantErr = fmt.Sprintf(`%q must be between %d and %d, got %d`, name, lo, hi, over)
				}
				for _, in := range ok {
					task, opt, err := inst.generation(&in.g, 0)
					require.NoError(t, err, in.how)
					if gp.Float != nil {
						assert.Equal(t, want, *gp.Float(task), in.how)
					} else {
						assert.Equal(t, want, *gp.Int(task), in.how)
					}
					for _, n := range gp.Names {
						assert.Equal(t, want, opt.Settings[n], "%s: generation_settings[%q]", in.how, n)
					}
				}
				for _, in := range bad {
					_, _, err := inst.generation(&in.g, 0)
					require.Error(t, err, in.how)
					he := classify(err)
					assert.Equal(t, http.StatusBadRequest, he.Status, in.how)
					assert.Equal(t, wantErr, he.Msg, in.how)
				}
				if gp.Props {
					assert.Contains(t, props, name, "/props default_generation_settings.params")
				}
			})
		}
	}
}

// TestRequestFieldTypes keeps every field of the typed bodies one whose
// decoding cannot fail (wire.Decode reports a wrong type only through
// the field types): an optional field type, or raw JSON read by a named
// function.
func TestRequestFieldTypes(t *testing.T) {
	raw := reflect.TypeFor[json.RawMessage]()
	named := reflect.TypeFor[wire.NamedField]()
	var check func(t *testing.T, typ reflect.Type)
	check = func(t *testing.T, typ reflect.Type) {
		for i := range typ.NumField() {
			sf := typ.Field(i)
			switch {
			case sf.Anonymous:
				check(t, sf.Type)
			case sf.Type == reflect.TypeFor[wire.Params]():
			case sf.Tag.Get("json") == "":
				t.Errorf("%s.%s has no json name", typ.Name(), sf.Name)
			default:
				assert.True(t, sf.Type == raw || reflect.PointerTo(sf.Type).Implements(named),
					"%s.%s is a %s: use wire.Opt[T], wire.Num, wire.Strs or json.RawMessage", typ.Name(), sf.Name, sf.Type)
			}
		}
	}
	for _, body := range []any{completionBody{}, openai.CompletionBody{}, infillBody{}, openai.ChatBody{}, respBody{}} {
		check(t, reflect.TypeOf(body))
	}
}

// parseGeneration (for these tests) reads every generation parameter of body into an
// engine.Request with the server's defaults for what it does not set. The
// prompt is left to the caller. Errors are *httpError (400).
func parseGeneration(body []byte, inst *instance, defaultNPredict int) (*engine.Request, genOptions, error) {
	var g wire.Gen
	if err := wire.Decode(body, &g); err != nil {
		return nil, genOptions{}, err
	}
	return inst.generation(&g, defaultNPredict)
}
