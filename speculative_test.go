package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
)

type genResult struct {
	pieces []llama.Piece
	reason llama.StopReason
	stats  llama.SpeculativeStats
}

func runGen(t *testing.T, c *llama.Context, prompt string, o llama.GenerateOptions) genResult {
	t.Helper()
	toks, err := c.Model().Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	require.NoError(t, err)
	g := c.GenerateTokens(context.Background(), toks, o)
	var r genResult
	for p, err := range g.Seq() {
		require.NoError(t, err)
		r.pieces = append(r.pieces, p)
	}
	r.reason, r.stats = g.Reason(), g.Speculative()
	return r
}

// TestSpeculativeSameOutput holds speculative generation against plain
// generation: for every drafter and every kind of ending (EOG, MaxTokens,
// stop strings, a full context, a grammar, seeded sampling) the pieces and
// the stop reason are the same, token for token.
func TestSpeculativeSameOutput(t *testing.T) {
	m := stories(t)
	target := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	draftCtx := newCtx(t, m, llama.ContextOptions{ContextSize: 256})

	drafters := map[string]func(t *testing.T) []llama.Drafter{
		"draft model": func(t *testing.T) []llama.Drafter {
			d, err := draft.NewModel(m, draftCtx, draft.ModelOptions{NMax: 8})
			require.NoError(t, err)
			return []llama.Drafter{d}
		},
		"ngram simple": func(*testing.T) []llama.Drafter { return []llama.Drafter{&draft.NgramSimple{SizeN: 2, SizeM: 8}} },
		"ngram map-k":  func(*testing.T) []llama.Drafter { return []llama.Drafter{&draft.NgramMap{SizeN: 2, SizeM: 8}} },
		"ngram cache":  func(*testing.T) []llama.Drafter { return []llama.Drafter{&draft.NgramCache{}} },
		"ngram map-k4v": func(*testing.T) []llama.Drafter {
			return []llama.Drafter{&draft.NgramMap{SizeN: 2, SizeM: 4, Values: true}}
		},
		"ngram mod": func(*testing.T) []llama.Drafter {
			return []llama.Drafter{&draft.NgramMod{Table: draft.NewNgramModTable(3), NMin: 1, NMax: 8}}
		},
		"ngram then draft model": func(t *testing.T) []llama.Drafter {
			d, err := draft.NewModel(m, draftCtx, draft.ModelOptions{NMax: 4})
			require.NoError(t, err)
			return []llama.Drafter{&draft.NgramSimple{SizeN: 3, SizeM: 6}, d}
		},
	}
	grammar, err := llama.ParseGrammar(context.Background(), `root ::= [a-z ,.]+`, "root")
	require.NoError(t, err)
	cases := []struct {
		name    string
		prompt  string
		opts    llama.GenerateOptions
		sampler func() []llama.Sampler
	}{
		{name: "greedy to the end", prompt: "Once upon a time", opts: llama.GenerateOptions{MaxTokens: 400}},
		{name: "max tokens", prompt: "Lily and Tom", opts: llama.GenerateOptions{MaxTokens: 37}},
		{name: "stop string", prompt: "Once upon a time", opts: llama.GenerateOptions{MaxTokens: 300, Stop: []string{"ball", "park"}}},
		{name: "full context", prompt: "The dog", opts: llama.GenerateOptions{IgnoreEOG: true}},
		{name: "grammar", prompt: "Once upon a time", opts: llama.GenerateOptions{MaxTokens: 60},
			sampler: func() []llama.Sampler { return []llama.Sampler{grammar.Sampler(), llama.Greedy()} }},
		{name: "seeded sampling", prompt: "One day", opts: llama.GenerateOptions{MaxTokens: 120},
			sampler: func() []llama.Sampler {
				return []llama.Sampler{llama.TopK(40), llama.TopP(0.9, 1), llama.Temp(0.8), llama.Dist(42)}
			}},
	}
	for _, tc := range cases {
		chain := func() *llama.SamplerChain {
			if tc.sampler == nil {
				return nil
			}
			s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, tc.sampler()...)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			return s
		}
		plainOpts := tc.opts
		plainOpts.Sampler = chain()
		plain := runGen(t, target, tc.prompt, plainOpts)
		require.NotEmpty(t, plain.pieces)
		for name, mk := range drafters {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				o := tc.opts
				o.Sampler = chain()
				o.Speculative = &llama.Speculative{Drafters: mk(t)}
				got := runGen(t, target, tc.prompt, o)
				require.Equal(t, plain.pieces, got.pieces)
				require.Equal(t, plain.reason, got.reason)
				assert.LessOrEqual(t, got.stats.Accepted, got.stats.Drafted)
				t.Logf("%d pieces, %d drafts, %d drafted, %d accepted", len(got.pieces), got.stats.Drafts, got.stats.Drafted, got.stats.Accepted)
			})
		}
	}
	// The target as its own draft agrees with nearly every drafted token.
	d, err := draft.NewModel(m, draftCtx, draft.ModelOptions{NMax: 8})
	require.NoError(t, err)
	self := runGen(t, target, "Once upon a time", llama.GenerateOptions{MaxTokens: 200, Speculative: &llama.Speculative{Drafters: []llama.Drafter{d}}})
	require.Greater(t, self.stats.Drafted, 100)
	assert.GreaterOrEqual(t, float64(self.stats.Accepted)/float64(self.stats.Drafted), 0.95)
	// Memory holds exactly the prompt and the tokens decoded, as without drafts.
	_, hi, err := target.Memory().PosRange(0)
	require.NoError(t, err)
	toks, _ := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	assert.Equal(t, len(toks)+200-1, hi, "the last token is decoded after its piece, rejected drafts are gone")
}

// TestSpeculativeNgramRepetition: on output that repeats the prompt, n-gram
// drafts are accepted. Drafting as llama.cpp does (Adapt.Off), a good part
// of them; adapted, fewer drafts are checked (stories260K's retelling
// strays often enough that most drafts keep less than half their tokens),
// with the same output.
func TestSpeculativeNgramRepetition(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 512})
	// stories260K continues a story it has just read by retelling it.
	plain := runGen(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 120})
	text := ""
	for _, p := range plain.pieces {
		text += p.Text
	}
	prompt := "Once upon a time" + text + " Once upon a time"
	want := runGen(t, c, prompt, llama.GenerateOptions{MaxTokens: 100})
	for _, mk := range []func() llama.Drafter{
		func() llama.Drafter { return &draft.NgramSimple{SizeN: 4, SizeM: 16} },
		func() llama.Drafter { return &draft.NgramMap{SizeN: 4, SizeM: 16} },
		func() llama.Drafter { return &draft.NgramCache{} },
	} {
		fixed := runGen(t, c, prompt, llama.GenerateOptions{MaxTokens: 100,
			Speculative: &llama.Speculative{Drafters: []llama.Drafter{mk()}, Adapt: llama.DraftAdapt{Off: true}}})
		require.Equal(t, want.pieces, fixed.pieces)
		assert.Greater(t, fixed.stats.Accepted, 20, "%T: %+v", mk(), fixed.stats)
		adapted := runGen(t, c, prompt, llama.GenerateOptions{MaxTokens: 100,
			Speculative: &llama.Speculative{Drafters: []llama.Drafter{mk()}}})
		require.Equal(t, want.pieces, adapted.pieces)
		assert.Positive(t, adapted.stats.Accepted, "%T: %+v", mk(), adapted.stats)
		assert.Less(t, adapted.stats.Drafts, fixed.stats.Drafts, "%T: %+v, fixed %+v", mk(), adapted.stats, fixed.stats)
		t.Logf("%T: adapted %+v, fixed %+v", mk(), adapted.stats, fixed.stats)
	}
}

// beginRecorder is a DraftBeginner that records its Begin calls.
type beginRecorder struct {
	draft.NgramSimple
	begins [][]llama.Token
}

func (b *beginRecorder) Begin(prompt []llama.Token) {
	b.begins = append(b.begins, append([]llama.Token(nil), prompt...))
}

// TestSpeculativeBegin: generation begins each sequence in a
// DraftBeginner with the prompt, once, before drafting, whether the
// drafter is adapted (wrapped in an AdaptiveDrafter) or not.
func TestSpeculativeBegin(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
	for _, off := range []bool{false, true} {
		rec := &beginRecorder{NgramSimple: draft.NgramSimple{SizeN: 2, SizeM: 4}}
		var want [][]llama.Token
		for _, prompt := range []string{"Once upon a time", "Lily and Tom went"} {
			toks, err := m.Tokenize(prompt, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
			require.NoError(t, err)
			want = append(want, toks)
			require.NoError(t, c.Memory().Clear())
			runGen(t, c, prompt, llama.GenerateOptions{MaxTokens: 20,
				Speculative: &llama.Speculative{Drafters: []llama.Drafter{rec}, Adapt: llama.DraftAdapt{Off: off}}})
		}
		assert.Equal(t, want, rec.begins, "adapt off: %v", off)
	}
}
