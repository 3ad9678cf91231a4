package sampling_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/sampling"
)

func storiesModel(t *testing.T) *llama.Model {
	t.Helper()
	return modeltest.Shared(t, "stories260K.gguf", true)
}

// cppDefaults reads the defaults of common_params_sampling in the pinned
// llama.cpp's common/common.h: field name to its initializer.
func cppDefaults(t *testing.T) map[string]string {
	src, err := os.ReadFile(filepath.Join(testenv.LlamaSrc(t), "common", "common.h"))
	require.NoError(t, err)
	s := string(src)
	i := strings.Index(s, "struct common_params_sampling {")
	require.GreaterOrEqual(t, i, 0)
	body := s[i : i+strings.Index(s[i:], "\n};")]
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+\w+\s+(\w+)\s*=\s*([-0-9.]+)f?\s*;`).FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	require.NotEmpty(t, out)
	return out
}

// TestDefaultsMatchLlamaCpp checks every numeric parameter of Defaults
// against llama.cpp's common_params_sampling.
func TestDefaultsMatchLlamaCpp(t *testing.T) {
	cpp := cppDefaults(t)
	// JSON name to common.h field, where they differ.
	field := map[string]string{"temperature": "temp", "typical_p": "typ_p", "repeat_penalty": "penalty_repeat",
		"presence_penalty": "penalty_present", "frequency_penalty": "penalty_freq", "repeat_last_n": "penalty_last_n"}
	d := sampling.Defaults()
	for i := range sampling.Table {
		p := &sampling.Table[i]
		t.Run(p.Name, func(t *testing.T) {
			f := p.Name
			if n, ok := field[f]; ok {
				f = n
			}
			raw, ok := cpp[f]
			require.True(t, ok, "common.h has no field %s", f)
			want, err := strconv.ParseFloat(raw, 64)
			require.NoError(t, err)
			got, _ := strconv.ParseFloat(fmt.Sprint(p.Value(&d)), 64)
			assert.InDelta(t, want, got, 1e-6)
		})
	}
}

// TestSamplersMatchLlamaCpp checks the samplers against llama.cpp's
// common sampler (common/sampling.cpp): the same canonical names, each
// with the same letter, and its misc aliases.
func TestSamplersMatchLlamaCpp(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.LlamaSrc(t), "common", "sampling.cpp"))
	require.NoError(t, err)
	names := map[string]string{} // COMMON_SAMPLER_TYPE_X to its name
	for _, m := range regexp.MustCompile(`case (COMMON_SAMPLER_TYPE_\w+):\s*return "(\w+)";`).FindAllStringSubmatch(string(src), -1) {
		names[m[1]] = m[2]
	}
	letters := map[string]rune{}
	for _, m := range regexp.MustCompile(`case (COMMON_SAMPLER_TYPE_\w+):\s*return '(.)';`).FindAllStringSubmatch(string(src), -1) {
		letters[names[m[1]]] = rune(m[2][0])
	}
	require.NotEmpty(t, letters)
	ours := map[string]rune{}
	for _, s := range sampling.Samplers {
		ours[s.Name] = s.Letter
	}
	assert.Equal(t, letters, ours)
	for _, m := range regexp.MustCompile(`alias_name_map.insert\(\{"(\w+)",\s*(COMMON_SAMPLER_TYPE_\w+)\}\)`).FindAllStringSubmatch(string(src), -1) {
		got, ok := sampling.LookupSampler(m[1])
		assert.True(t, ok, m[1])
		assert.Equal(t, names[m[2]], got, m[1])
	}
}

// TestLookupSampler checks the names of samplers: each canonical name, its
// kebab-case and joined forms and aliases, in any case, and its letter.
func TestLookupSampler(t *testing.T) {
	for _, s := range sampling.Samplers {
		names := append([]string{s.Name, strings.ReplaceAll(s.Name, "_", "-"), strings.ReplaceAll(s.Name, "_", ""), strings.ToUpper(s.Name)}, s.Aliases...)
		for _, n := range names {
			got, ok := sampling.LookupSampler(n)
			assert.True(t, ok, n)
			assert.Equal(t, s.Name, got, n)
		}
		got, ok := sampling.SamplerByLetter(s.Letter)
		assert.True(t, ok, string(s.Letter))
		assert.Equal(t, s.Name, got)
	}
	for _, n := range []string{"", "bogus", "top k", "top__k"} {
		_, ok := sampling.LookupSampler(n)
		assert.False(t, ok, n)
	}
	_, ok := sampling.SamplerByLetter('q')
	assert.False(t, ok)
}

func TestLimit(t *testing.T) {
	const nCtx, nVocab = 512, 1000
	long := strings.Repeat("é", sampling.MaxDRYBreakerRunes+5)
	deep := strings.Repeat("(", sampling.MaxGrammarDepth+1) + `"a"` + strings.Repeat(")", sampling.MaxGrammarDepth+1)
	for _, c := range []struct {
		name    string
		set     func(p *sampling.Params)
		check   func(t *testing.T, p *sampling.Params)
		errName string // the *Error's Param ("-": no error)
	}{
		{"defaults", func(*sampling.Params) {}, func(t *testing.T, p *sampling.Params) {
			assert.Equal(t, 64, p.DRYPenaltyLastN)
			assert.Equal(t, 64, p.RepeatLastN)
			assert.Equal(t, 40, p.TopK)
		}, "-"},
		{"-1 is the context", func(p *sampling.Params) { p.RepeatLastN, p.DRYPenaltyLastN = -1, -1 }, func(t *testing.T, p *sampling.Params) {
			assert.Equal(t, nCtx, p.RepeatLastN)
			assert.Equal(t, nCtx, p.DRYPenaltyLastN)
		}, "-"},
		{"windows and counts", func(p *sampling.Params) {
			p.RepeatLastN, p.DRYAllowedLength, p.TopK, p.NProbs = math.MaxInt32, math.MaxInt32, math.MaxInt32, math.MaxInt32
		}, func(t *testing.T, p *sampling.Params) {
			assert.Equal(t, nCtx, p.RepeatLastN)
			assert.Equal(t, nCtx, p.DRYAllowedLength)
			assert.Equal(t, nVocab, p.TopK)
			assert.Equal(t, min(nVocab, sampling.MaxNProbs), p.NProbs)
		}, "-"},
		{"long breaker cut", func(p *sampling.Params) { p.DRYSequenceBreakers = []string{"x", long} }, func(t *testing.T, p *sampling.Params) {
			assert.Equal(t, []string{"x", string([]rune(long)[:sampling.MaxDRYBreakerRunes])}, p.DRYSequenceBreakers)
		}, "-"},
		{"too many breakers", func(p *sampling.Params) { p.DRYSequenceBreakers = make([]string, sampling.MaxDRYBreakers+1) }, nil, "dry_sequence_breakers"},
		{"logit bias beyond the vocabulary", func(p *sampling.Params) {
			p.LogitBias = map[llama.Token]float32{}
			for i := range nVocab + 1 {
				p.LogitBias[llama.Token(i)] = 1
			}
		}, nil, "logit_bias"},
		{"NaN", func(p *sampling.Params) { p.TopP = float32(math.NaN()) }, nil, ""},
		{"infinite", func(p *sampling.Params) { p.Temperature = float32(math.Inf(1)) }, nil, ""},
		{"unknown sampler", func(p *sampling.Params) { p.Samplers = []string{"top_k", "bogus"} }, nil, "samplers"},
		{"too many samplers", func(p *sampling.Params) { p.Samplers = slices.Repeat([]string{"top_k"}, sampling.MaxSamplers+1) }, nil, "samplers"},
		{"alias", func(p *sampling.Params) { p.Samplers = []string{"Top-K", "nucleus", "temp"} }, func(t *testing.T, p *sampling.Params) {
			assert.Equal(t, []string{"Top-K", "nucleus", "temp"}, p.Samplers, "names are left as given")
		}, "-"},
		{"deep grammar", func(p *sampling.Params) { p.Grammar = "root ::= " + deep }, nil, "grammar"},
		{"huge grammar", func(p *sampling.Params) {
			p.Grammar = "root ::= \"" + strings.Repeat("a", sampling.MaxGrammarBytes) + "\""
		}, nil, "grammar"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := sampling.Defaults()
			c.set(&p)
			breakers := p.DRYSequenceBreakers
			before := append([]string(nil), breakers...)
			err := p.Limit(nCtx, nVocab)
			if c.errName != "-" {
				var se *sampling.Error
				require.ErrorAs(t, err, &se)
				assert.Equal(t, c.errName, se.Param)
				assert.ErrorIs(t, err, llama.ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, before, breakers, "the caller's breakers are not written to")
			c.check(t, &p)
			again := p.Clone()
			require.NoError(t, again.Limit(nCtx, nVocab))
			assert.Equal(t, p, again, "a second Limit changes nothing")
		})
	}
}

// TestParamSet checks the table's parsing of request values and flags.
func TestParamSet(t *testing.T) {
	for _, c := range []struct {
		name, param string
		value       any // float64 for Set, string for SetFlag
		want        any // the value after, or an error's text
		err         bool
	}{
		{"float", "top_p", 0.5, float32(0.5), false},
		{"float out of range", "top_p", 1e40, `"top_p" is out of range`, true},
		{"int", "top_k", 7.0, 7, false},
		{"int range", "mirostat", 3.0, `"mirostat" must be between 0 and 2, got 3`, true},
		{"int fraction", "top_k", 1.5, `"top_k" must be between -2147483648 and 2147483647, got 1.5`, true},
		{"keep", "dry_base", 0.5, float32(1.75), false},
		{"flag float", "min_p", "0.1", float32(0.1), false},
		{"flag not a number", "min_p", "x", `"x" is not a number`, true},
		{"flag not finite", "presence_penalty", "inf", "presence-penalty must be finite", true},
		{"flag negative temperature", "temperature", "-2", float32(0), false},
		{"flag repeat penalty 0", "repeat_penalty", "0", "repeat-penalty must be finite and greater than 0", true},
		{"flag int", "repeat_last_n", "-1", -1, false},
		{"flag int range", "repeat_last_n", "-2", "repeat-last-n must be between -1 and 2147483647", true},
		{"flag keep", "dry_base", "0.5", float32(1.75), false},
		{"no flag of its own", "n_probs", "-1", "n_probs must be between 0 and 2147483647", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, ok := sampling.LookupParam(c.param)
			require.True(t, ok)
			d := sampling.Defaults()
			var err error
			if s, ok := c.value.(string); ok {
				err = p.SetFlag(&d, s)
			} else {
				err = p.Set(&d, c.value.(float64))
			}
			if c.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, p.Value(&d))
		})
	}
}

// TestChain checks the chains Params build on a real model, by the names
// of their samplers.
func TestChain(t *testing.T) {
	m := storiesModel(t)
	eog := []llama.Token{m.SpecialTokens().EOS}
	for _, c := range []struct {
		name    string
		set     func(p *sampling.Params)
		want    string
		history bool
	}{
		{"defaults", func(*sampling.Params) {}, "[top-k top-p min-p temp-ext dist]", false},
		{"greedy", func(p *sampling.Params) { p.Temperature = 0 }, "[greedy]", false},
		{"order and aliases", func(p *sampling.Params) { p.Samplers = []string{"Temp", "nucleus", "top-k"} }, "[temp-ext top-p top-k dist]", false},
		{"penalties and DRY", func(p *sampling.Params) { p.RepeatPenalty, p.DRYMultiplier = 1.1, 0.8 },
			"[penalties dry top-k top-p min-p temp-ext dist]", true},
		{"every optional sampler", func(p *sampling.Params) {
			p.TopNSigma, p.TypicalP, p.XTCProbability = 1, 0.9, 0.5
		}, "[top-n-sigma top-k typical top-p min-p xtc temp-ext dist]", false},
		{"mirostat", func(p *sampling.Params) { p.Mirostat = 2 }, "[temp mirostat-v2]", false},
		{"infill", func(p *sampling.Params) { p.Samplers = []string{"top_k", "infill"} }, "[top-k infill dist]", false},
		{"adaptive-p", func(p *sampling.Params) { p.Samplers, p.AdaptiveTarget = []string{"top_k", "adaptive_p"}, 0.3 }, "[top-k adaptive-p]", false},
		{"ignore EOS", func(p *sampling.Params) { p.IgnoreEOS, p.Temperature = true, 0 }, "[logit-bias greedy]", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := sampling.Defaults()
			c.set(&p)
			require.NoError(t, p.Limit(256, m.VocabSize()))
			ss, history := p.Chain(sampling.Env{NCtx: 256, EOG: eog})
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, ss...)
			require.NoError(t, err)
			defer chain.Close()
			assert.Equal(t, c.want, chain.String())
			assert.Equal(t, c.history, history)
		})
	}
}

func TestCheckGrammar(t *testing.T) {
	m := storiesModel(t)
	for _, c := range []struct {
		name, grammar string
		err           string // "" none
	}{
		{"valid", `root ::= "Once" [a-z]*`, ""},
		{"malformed", `root ::= (`, "invalid grammar: "},
		{"never generated", `root ::= "\u0000\u0000"`, "invalid grammar: "},
		{"too deep", "root ::= " + strings.Repeat("(", sampling.MaxGrammarDepth+1) + `"a"` + strings.Repeat(")", sampling.MaxGrammarDepth+1), "nest deeper"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := sampling.CheckGrammar(m, c.grammar)
			if c.err == "" {
				assert.NoError(t, err)
				return
			}
			var se *sampling.Error
			require.ErrorAs(t, err, &se)
			assert.Contains(t, se.Msg, c.err)
			assert.ErrorIs(t, err, llama.ErrInvalid)
		})
	}
}

// TestParsedGrammar: the grammar CheckedGrammar returns is the one a
// chain is then built from, not parsed again (a canceled context, which
// stops a parse, does not stop it), and a ParsedGrammar of another text is
// ignored.
func TestParsedGrammar(t *testing.T) {
	m := storiesModel(t)
	const g = `root ::= "Once" [a-z]*`
	gr, err := sampling.CheckedGrammar(m, g)
	require.NoError(t, err)
	require.Equal(t, g, gr.Source())
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name    string
		grammar string
		err     bool
	}{
		{"checked", g, false},
		{"another grammar", `root ::= "Once" [a-y]*`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := sampling.Defaults()
			p.Grammar, p.ParsedGrammar = c.grammar, gr
			s, err := p.GrammarSampler(canceled)
			if c.err {
				require.ErrorIs(t, err, llama.ErrCanceled)
				return
			}
			require.NoError(t, err)
			chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{Filter: true}, s)
			require.NoError(t, err)
			chain.Close()
		})
	}
}

// TestCheckGrammarBlocks checks that CheckGrammar, which offers the
// vocabulary to the grammar a block at a time, finds the one allowed
// token in any block: the first, a middle one, and the last and shorter
// one (32,000 tokens are 7 blocks of 4,096 and one of 3,328).
func TestCheckGrammarBlocks(t *testing.T) {
	m := modeltest.Shared(t, "llama-2-tiny-random.gguf", true)
	require.Equal(t, 32000, m.VocabSize())
	for _, c := range []struct {
		id int
		ok bool
	}{{0, true}, {4095, true}, {4096, true}, {20000, true}, {28672, true}, {31999, true}, {32000, false}} {
		t.Run(strconv.Itoa(c.id), func(t *testing.T) {
			err := sampling.CheckGrammar(m, fmt.Sprintf("root ::= <[%d]>", c.id))
			if c.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "invalid grammar")
			}
		})
	}
}

// BenchmarkCheckGrammar is the check a request with a grammar or a JSON
// schema pays before its first token, on a 32,000-token vocabulary: a
// grammar that starts with common text ("{"), and one whose only token is
// the vocabulary's last, which costs the whole pass.
func BenchmarkCheckGrammar(b *testing.B) {
	m := modeltest.Shared(b, "llama-2-tiny-random.gguf", true)
	for _, c := range []struct{ name, grammar string }{
		{"object", `root ::= "{" ws "\"name\"" ws ":" ws "\"" [^"]* "\"" ws "}"` + "\nws ::= [ \t\n]*"},
		{"last token", "root ::= <[31999]>"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := sampling.CheckGrammar(m, c.grammar); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestParseSamplers checks the one sampler-list parser of the server's
// samplers field and examples/server's --samplers and --sampler-seq: known
// names in order, the unknown skipped and returned.
func TestParseSamplers(t *testing.T) {
	for _, c := range []struct {
		name    string
		names   []string
		seq     string
		want    []string
		skipped []string
	}{
		{"names and aliases", []string{"top_k", "Top-P", "temp"}, "", []string{"top_k", "top_p", "temperature"}, nil},
		{"none", nil, "", nil, nil},
		{"unknown names", []string{"tfs_z", "top_k", "magic"}, "", []string{"top_k"}, []string{"tfs_z", "magic"}},
		{"only unknown", []string{"magic"}, "", nil, []string{"magic"}},
		{"letters", nil, "kpt", []string{"top_k", "top_p", "temperature"}, nil},
		{"unknown letters", nil, "kqé", []string{"top_k"}, []string{"q", "é"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got, skipped []string
			if c.seq != "" {
				got, skipped = sampling.ParseSamplerSeq(c.seq)
			} else {
				got, skipped = sampling.ParseSamplers(c.names)
			}
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.skipped, skipped)
		})
	}
}

// TestParamSetInt checks integers read from requests: the range error
// names the value exactly, however large, and a float parameter takes
// the integer as a number.
func TestParamSetInt(t *testing.T) {
	for _, c := range []struct {
		name, param string
		n           int64
		want        any
		err         string
	}{
		{"int", "top_k", 7, 7, ""},
		{"int range", "mirostat", 3, nil, `"mirostat" must be between 0 and 2, got 3`},
		{"beyond float64's integers", "top_k", 9007199254740993, nil, `"top_k" must be between -2147483648 and 2147483647, got 9007199254740993`},
		{"float parameter", "top_p", 1, float32(1), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, ok := sampling.LookupParam(c.param)
			require.True(t, ok)
			d := sampling.Defaults()
			err := p.SetInt(&d, c.n)
			if c.err != "" {
				var se *sampling.Error
				require.ErrorAs(t, err, &se)
				assert.Equal(t, c.err, se.Msg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, p.Value(&d))
		})
	}
}
