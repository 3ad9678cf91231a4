package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv/modeltest"
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

// TestSpeculativeRecurrent: on a hybrid model (Qwen3.5's layout), whose
// recurrent state takes back no more tokens than the context keeps
// snapshots, drafts longer than that go in after a checkpoint of the
// state, which a rejection restores before the kept tokens are decoded
// again. The pieces are plain generation's, and the memory after every
// kind of ending holds what plain generation leaves: a generation that
// continues from it (Keep) says the same.
func TestSpeculativeRecurrent(t *testing.T) {
	m := modeltest.LoadPath(t, modeltest.TinyQwen35Path(t, gguf.TinyModelOptions{}), llama.ModelOptions{})
	prompt, err := m.Tokenize("Once upon a time", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	run := func(t *testing.T, c *llama.Context, o llama.GenerateOptions) genResult {
		t.Helper()
		var r genResult
		g := c.GenerateTokens(t.Context(), prompt, o)
		for p, err := range g.Seq() {
			require.NoError(t, err)
			r.pieces = append(r.pieces, p)
		}
		r.reason, r.stats = g.Reason(), g.Speculative()
		return r
	}
	// then continues the sequence in memory with plain generation.
	then := func(t *testing.T, c *llama.Context) []llama.Piece {
		t.Helper()
		var out []llama.Piece
		g := c.GenerateTokens(t.Context(), []llama.Token{prompt[1]}, llama.GenerateOptions{Keep: true, MaxTokens: 12})
		for p, err := range g.Seq() {
			require.NoError(t, err)
			out = append(out, p)
		}
		return out
	}
	tokens := func(ps []llama.Piece) []llama.Token {
		var out []llama.Token
		for _, p := range ps {
			out = append(out, p.Token)
		}
		return out
	}
	plainCtx := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Threads: 1})
	full := run(t, plainCtx, llama.GenerateOptions{MaxTokens: 80, IgnoreEOG: true})
	require.Len(t, full.pieces, 80)
	for _, tc := range []struct {
		name      string
		snapshots int
		opts      llama.GenerateOptions
	}{
		{"checkpoints", 0, llama.GenerateOptions{MaxTokens: 80, IgnoreEOG: true}},
		{"checkpoints, max tokens inside a draft", 0, llama.GenerateOptions{MaxTokens: 43, IgnoreEOG: true}},
		{"checkpoints, stop string", 0, llama.GenerateOptions{MaxTokens: 80, IgnoreEOG: true, Stop: []string{full.pieces[50].Text}}},
		{"snapshots and checkpoints", 2, llama.GenerateOptions{MaxTokens: 80, IgnoreEOG: true}},
		{"snapshots", 5, llama.GenerateOptions{MaxTokens: 61, IgnoreEOG: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := run(t, plainCtx, tc.opts)
			wantThen := then(t, plainCtx)
			c := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Threads: 1, RecurrentSnapshots: tc.snapshots})
			assert.Equal(t, tc.snapshots, c.Memory().RollbackLimit())
			o := tc.opts
			o.Speculative = &llama.Speculative{Drafters: []llama.Drafter{&modeltest.ScriptDrafter{Prompt: prompt, Plain: tokens(full.pieces)}},
				Adapt: llama.DraftAdapt{Off: true}}
			got := run(t, c, o)
			require.Equal(t, tokens(want.pieces), tokens(got.pieces))
			require.Equal(t, want.reason, got.reason)
			assert.Positive(t, got.stats.Accepted)
			assert.Less(t, got.stats.Accepted, got.stats.Drafted)
			assert.Equal(t, tokens(wantThen), tokens(then(t, c)), "the memory after the generation")
		})
	}
	// The model drafting (greedily) for itself sampled: its draft context
	// is recurrent too, and goes back to its checkpoint before the last
	// draft where the target rejected part of it.
	t.Run("draft model", func(t *testing.T) {
		sampled := func() *llama.SamplerChain {
			s, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, llama.TopK(40), llama.Temp(0.8), llama.Dist(42))
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			return s
		}
		c := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Threads: 1})
		want := run(t, c, llama.GenerateOptions{MaxTokens: 80, IgnoreEOG: true, Sampler: sampled()})
		dc := newCtx(t, m, llama.ContextOptions{ContextSize: 512, Threads: 1, Perf: true})
		d, err := draft.NewModel(m, dc, draft.ModelOptions{NMax: 6})
		require.NoError(t, err)
		got := run(t, c, llama.GenerateOptions{MaxTokens: 80, IgnoreEOG: true, Sampler: sampled(),
			Speculative: &llama.Speculative{Drafters: []llama.Drafter{d}, Adapt: llama.DraftAdapt{Off: true}}})
		require.Equal(t, tokens(want.pieces), tokens(got.pieces))
		assert.Positive(t, got.stats.Accepted)
		assert.Less(t, got.stats.Accepted, got.stats.Drafted)
		// The draft context decodes each token of the history about once,
		// and the drafts: not the whole history again after a rejection.
		perf, err := dc.Perf()
		require.NoError(t, err)
		assert.Less(t, perf.PromptTokens+perf.EvalTokens, len(prompt)+80+got.stats.Drafted+got.stats.Drafts, "%+v", perf)
	})

	// The model's MTP head, drafting NMax 4 with snapshots of 4 (taken
	// back through them) and of 1 (through checkpoints and replays, which
	// the head is told of, and in whose steps nothing is drafted): the
	// same text either way. (TestMTP/replayed checks the head's drafts
	// after a replay.)
	mm := modeltest.LoadPath(t, modeltest.TinyQwen35Path(t, gguf.TinyModelOptions{NextN: 1, PassThrough: true}), llama.ModelOptions{MTP: true})
	var stats []llama.SpeculativeStats
	var texts [][]llama.Token
	for _, snaps := range []int{4, 1} {
		c := newCtx(t, mm, llama.ContextOptions{ContextSize: 512, Threads: 1, RecurrentSnapshots: snaps})
		d, err := draft.NewMTP(c, draft.MTPOptions{NMax: 4})
		require.NoError(t, err)
		defer d.Close()
		var toks []llama.Token
		g := c.GenerateTokens(t.Context(), prompt, llama.GenerateOptions{MaxTokens: 80, IgnoreEOG: true,
			Speculative: &llama.Speculative{Drafters: []llama.Drafter{d.Seq(0)}, Adapt: llama.DraftAdapt{Off: true}}})
		for p, err := range g.Seq() {
			require.NoError(t, err)
			toks = append(toks, p.Token)
		}
		stats, texts = append(stats, g.Speculative()), append(texts, toks)
	}
	assert.Equal(t, texts[0], texts[1])
	assert.Less(t, stats[1].Accepted, stats[1].Drafted, "some drafts are taken back")
	assert.Greater(t, stats[1].Accepted, stats[1].Drafted/2, "%+v", stats)

	// Without snapshots or a checkpoint a recurrent memory cannot take a
	// draft back: attention-only models report no limit.
	assert.Equal(t, -1, newCtx(t, stories(t), llama.ContextOptions{ContextSize: 64}).Memory().RollbackLimit())
}
