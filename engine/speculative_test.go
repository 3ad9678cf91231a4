package engine

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

// specRepeatPrompt is a prompt that makes stories260K repeat text: its own
// greedy continuation of "Once upon a time", then "Once upon a time" again,
// which it continues by retelling the same story.
func specRepeatPrompt(t testing.TB) string {
	t.Helper()
	_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	m := e.Model()
	r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once upon a time", true), 120))
	return "Once upon a time" + r.text + " Once upon a time"
}

// specCases are the drafters tested: stories260K as its own draft model
// (every draft should be accepted) and the n-gram self-speculation types.
func specCases(t testing.TB) []struct {
	name string
	opts SpeculativeOptions
} {
	return []struct {
		name string
		opts SpeculativeOptions
	}{
		{"draft-simple", SpeculativeOptions{Types: []string{SpecDraftSimple}, DraftModel: engModelPath(t),
			DraftModelOptions: llama.ModelOptions{CPUOnly: true}, DraftThreads: 1, NMax: 8}},
		{"ngram-simple", SpeculativeOptions{Types: []string{SpecNgramSimple}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16, Adapt: llama.DraftAdapt{Off: true}}},
		{"ngram-simple adapted", SpeculativeOptions{Types: []string{SpecNgramSimple}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16}},
		{"ngram-map-k", SpeculativeOptions{Types: []string{SpecNgramMapK}, NgramMapKSizeN: 4, NgramMapKSizeM: 16, Adapt: llama.DraftAdapt{Off: true}}},
		{"ngram-map-k adapted", SpeculativeOptions{Types: []string{SpecNgramMapK}, NgramMapKSizeN: 4, NgramMapKSizeM: 16}},
		{"ngram-map-k4v", SpeculativeOptions{Types: []string{SpecNgramMapK4V}, NgramMapK4VSizeN: 3, NgramMapK4VSizeM: 8, Adapt: llama.DraftAdapt{Off: true}}},
		{"ngram-mod", SpeculativeOptions{Types: []string{SpecNgramMod}, NgramModNMatch: 4, NgramModNMin: 1, NgramModNMax: 16, Adapt: llama.DraftAdapt{Off: true}}},
		{"ngram-cache", SpeculativeOptions{Types: []string{"ngram-cache"}, Adapt: llama.DraftAdapt{Off: true}}},
		{"several", SpeculativeOptions{Types: []string{"ngram-simple,draft-simple"}, DraftModel: engModelPath(t),
			DraftModelOptions: llama.ModelOptions{CPUOnly: true}, NgramSimpleSizeN: 4, NgramSimpleSizeM: 16}},
	}
}

// TestEngineSpeculativeSameTokens: with each drafter, 4 greedy tasks run at
// once on 4 slots (their drafts checked in shared decodes) give the tokens
// of plain generation, with and without a grammar, and count their drafts.
func TestEngineSpeculativeSameTokens(t *testing.T) {
	rep := specRepeatPrompt(t)
	m, plain := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 2048}, Parallel: 4})
	type job struct {
		prompt  string
		grammar string
		n       int
	}
	jobs := []job{
		{rep, "", 100},
		{rep + " there was", "", 90},
		{"Once upon a time", "", 80},
		{rep, `root ::= [a-z .,]+`, 60},
	}
	task := func(j job) *Request {
		tk := engGreedyTask(engTokenize(t, m, j.prompt, true), j.n)
		tk.Params.Grammar = j.grammar
		return tk
	}
	want := make([]engResult, len(jobs))
	for i, j := range jobs {
		want[i] = engRun(t, plain, task(j))
	}
	for _, tc := range specCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 2048}, Parallel: 4, Speculative: tc.opts})
			got := make([]engResult, len(jobs))
			var wg sync.WaitGroup
			for i, j := range jobs {
				ch, err := e.Submit(t.Context(), task(j))
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i] = engCollect(t, ch)
				}()
			}
			wg.Wait()
			drafted := 0
			for i := range jobs {
				require.NoError(t, got[i].done.Err)
				require.Equal(t, want[i].tokens, got[i].tokens, "job %d", i)
				require.Equal(t, want[i].text, got[i].text, "job %d", i)
				assert.Equal(t, want[i].done.Stop, got[i].done.Stop)
				assert.Equal(t, want[i].done.Generated, got[i].done.Generated)
				tm := got[i].done.Timings
				assert.LessOrEqual(t, tm.DraftNAccepted, tm.DraftN)
				assert.LessOrEqual(t, tm.DraftNAccepted, tm.PredictedN)
				drafted += tm.DraftN
			}
			// The repetition job drafts, and many of its drafts are right
			// (adapted drafting drafts less, and still some).
			tm := got[0].done.Timings
			require.Positive(t, tm.DraftN)
			if tc.opts.Adapt.Off || tc.opts.Types[0] == SpecDraftSimple {
				assert.Greater(t, tm.DraftNAccepted, 20, "%+v", tm)
			} else {
				assert.Positive(t, tm.DraftNAccepted, "%+v", tm)
			}
			if tc.opts.Types[0] == SpecDraftSimple {
				// The model drafting for itself is always right (a draft
				// may still end past the last token kept).
				assert.Greater(t, float64(tm.DraftNAccepted)/float64(tm.DraftN), 0.9, "%+v", tm)
			}
			mt := e.Metrics()
			assert.EqualValues(t, drafted, mt.DraftTokensTotal)
			assert.Positive(t, mt.DraftsTotal)
			assert.Positive(t, mt.DraftAcceptedTotal)
			sum := int64(0)
			for _, n := range mt.DraftAcceptedPerPos {
				sum += n
			}
			assert.Equal(t, mt.DraftAcceptedTotal, sum)
			for _, sl := range e.SlotsInfo() {
				assert.True(t, sl.Speculative)
			}
		})
	}
}

// TestEngineSpeculativeLimits: drafts respect n_predict, stop strings, a
// small context and the request's speculative.n_max; top probabilities
// (n_probs) are those of plain generation.
func TestEngineSpeculativeLimits(t *testing.T) {
	rep := specRepeatPrompt(t)
	spec := SpeculativeOptions{Types: []string{SpecNgramSimple}, NgramSimpleSizeN: 3, NgramSimpleSizeM: 16}
	m, plain := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 2048}})
	_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 2048}, Speculative: spec})
	toks := engTokenize(t, m, rep, true)
	_, small := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: len(toks) + 40}, Speculative: spec})
	_, smallPlain := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: len(toks) + 40}})
	_, shift := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: len(toks) + 40}, ContextShift: true, Speculative: spec})
	_, shiftPlain := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: len(toks) + 40}, ContextShift: true})
	tests := []struct {
		name        string
		plain, spec *Engine
		edit        func(*Request)
	}{
		{"n_predict", plain, e, func(tk *Request) { tk.NPredict = 37 }},
		{"stop string", plain, e, func(tk *Request) { tk.Stop = []string{"park"} }},
		{"n_probs", plain, e, func(tk *Request) { tk.Params.NProbs = 3 }},
		{"n_max 2", plain, e, func(tk *Request) { tk.SpecNMax = 2 }},
		{"n_min 100", plain, e, func(tk *Request) { tk.SpecNMin = 100 }},
		{"context full", smallPlain, small, func(tk *Request) { tk.NPredict = -1 }},
		{"context shift", shiftPlain, shift, func(tk *Request) { tk.NPredict = 120; tk.NKeep = 8 }},
		{"ignore eos", plain, e, func(tk *Request) { tk.Params.IgnoreEOS = true }},
		{"seeded", plain, e, func(tk *Request) { tk.Params.Temperature, tk.Params.Seed = 0.8, 42 }},
		{"seeded penalties", plain, e, func(tk *Request) {
			tk.Params.Temperature, tk.Params.Seed, tk.Params.RepeatPenalty, tk.Params.DRYMultiplier = 0.5, 7, 1.1, 0.8
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() *Request {
				tk := engGreedyTask(toks, 100)
				tc.edit(tk)
				return tk
			}
			want := engRun(t, tc.plain, mk())
			got := engRun(t, tc.spec, mk())
			require.Equal(t, want.tokens, got.tokens)
			require.Equal(t, want.text, got.text)
			assert.Equal(t, want.done.Stop, got.done.Stop)
			assert.Equal(t, want.done.StoppingWord, got.done.StoppingWord)
			assert.Equal(t, want.done.Truncated, got.done.Truncated)
			// The same candidates; their probabilities come from logits of
			// a larger batch, equal to float rounding.
			for i := range want.events {
				wp, gp := want.events[i].Probs, got.events[i].Probs
				require.Len(t, gp, len(wp), "token %d", i)
				for k := range wp {
					assert.Equal(t, wp[k].Token, gp[k].Token, "token %d", i)
					assert.InDelta(t, wp[k].Prob, gp[k].Prob, 0.01, "token %d", i)
				}
			}
			tm := got.done.Timings
			switch tc.name {
			case "n_max 2":
				require.Positive(t, tm.DraftN)
				assert.LessOrEqual(t, tm.DraftN, 2*(len(got.tokens)-tm.DraftNAccepted))
			case "n_min 100":
				assert.Zero(t, tm.DraftN)
			default:
				assert.Positive(t, tm.DraftN)
			}
		})
	}
}

func TestSpeculativeOptionsErrors(t *testing.T) {
	m := engStoriesModel(t)
	tests := []struct {
		opts SpeculativeOptions
		is   error
		msg  string
	}{
		{SpeculativeOptions{Types: []string{"draft-eagle3"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"ngram-simple,draft-mtp"}}, llama.ErrUnsupported, "no MTP blocks"},
		{SpeculativeOptions{Types: []string{"draft-mtp,draft-simple"}, DraftModel: engModelPath(t)}, llama.ErrInvalid, "cannot be combined"},
		{SpeculativeOptions{Types: []string{"draft-dflash"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"draft-dspark"}}, llama.ErrUnsupported, "not supported"},
		{SpeculativeOptions{Types: []string{"bogus"}}, llama.ErrInvalid, "unknown speculative type"},
		{SpeculativeOptions{Types: []string{"draft-simple"}}, llama.ErrInvalid, "needs a draft model"},
		{SpeculativeOptions{Types: []string{"draft-simple"}, DraftModel: testenv.Model(t, "llama-2-tiny-random.gguf")}, llama.ErrInvalid, "vocabulary"},
		{SpeculativeOptions{Types: []string{"ngram-cache"}, LookupCacheStatic: "/nonexistent/lookup.bin"}, nil, "nonexistent"},
		// The draft context gets its own thread pools.
		{SpeculativeOptions{Types: []string{"draft-simple"}, DraftModel: engModelPath(t), DraftThreadPool: &llama.ThreadPoolOptions{Priority: 9}}, llama.ErrInvalid, "draft context: llama: new context: thread priority 9"},
		{SpeculativeOptions{Types: []string{"draft-simple"}, DraftModel: engModelPath(t), DraftThreadPoolBatch: &llama.ThreadPoolOptions{Poll: 500}}, llama.ErrInvalid, "draft context: llama: new context: polling level 500"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.opts.Types, tc.opts.DraftModel != ""), func(t *testing.T) {
			e, err := New(m, Options{Context: llama.ContextOptions{ContextSize: 256, Threads: 1}, Speculative: tc.opts})
			if e != nil {
				e.Close()
			}
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	// "none" wins over the other names, as llama.cpp; a draft model
	// without a type is loaded, checked and not used, as llama-server.
	for _, o := range []SpeculativeOptions{
		{Types: []string{"ngram-simple", "none"}},
		{DraftModel: engModelPath(t), DraftModelOptions: llama.ModelOptions{CPUOnly: true}},
	} {
		assert.Equal(t, "none", o.TypesString())
		e, err := New(m, Options{Context: llama.ContextOptions{ContextSize: 256, Threads: 1}, Speculative: o})
		require.NoError(t, err)
		assert.False(t, e.SlotsInfo()[0].Speculative)
		require.NoError(t, e.Close())
	}
	o := SpeculativeOptions{Types: []string{"draft-simple", "ngram-map-k,ngram-simple"}}
	assert.Equal(t, "none,draft-simple,ngram-map-k,ngram-simple", o.TypesString(), "llama-server's list: its default, then the names as given")
}

// TestEngineSpeculativeLookupFiles: ngram-cache drafts from llama.cpp
// lookup files (-lcs, -lcd) made of a text the model then writes, and the
// output stays that of plain generation.
func TestEngineSpeculativeLookupFiles(t *testing.T) {
	m, plain := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}})
	prompt := engTokenize(t, m, "Once upon a time", true)
	want := engRun(t, plain, engGreedyTask(prompt, 120))
	// Statistics of the text to come: drafts from the first token on.
	stats := draft.NewNgramStats()
	all := append(append([]llama.Token(nil), prompt...), want.tokens...)
	stats.Update(all, 1, 4, len(all))
	dir := t.TempDir()
	static, dynamic := dir+"/static.bin", dir+"/dynamic.bin"
	require.NoError(t, stats.Save(static))
	require.NoError(t, stats.Save(dynamic))
	tests := []struct {
		name string
		opts SpeculativeOptions
	}{
		{"static", SpeculativeOptions{Types: []string{SpecNgramCache}, LookupCacheStatic: static, Adapt: llama.DraftAdapt{Off: true}}},
		{"static and dynamic", SpeculativeOptions{Types: []string{SpecNgramCache}, LookupCacheStatic: static, LookupCacheDynamic: dynamic, Adapt: llama.DraftAdapt{Off: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}, Speculative: tc.opts})
			got := engRun(t, e, engGreedyTask(prompt, 120))
			require.Equal(t, want.tokens, got.tokens)
			tm := got.done.Timings
			assert.Positive(t, tm.DraftNAccepted, "%+v", tm)
		})
	}
}

// A request's SpecPMin replaces the draft model's PMin: with 1 the draft
// model stops at any token it is not certain of, so it drafts less; the
// tokens stay those of plain generation.
func TestEngineSpeculativePMin(t *testing.T) {
	rep := specRepeatPrompt(t)
	m, plain := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 2048}})
	spec := SpeculativeOptions{Types: []string{SpecDraftSimple}, DraftModel: engModelPath(t),
		DraftModelOptions: llama.ModelOptions{CPUOnly: true}, DraftThreads: 1, NMax: 8, Adapt: llama.DraftAdapt{Off: true}}
	_, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 2048}, Speculative: spec})
	toks := engTokenize(t, m, rep, true)
	want := engRun(t, plain, engGreedyTask(toks, 80))
	drafted := map[string]int{}
	for _, tc := range []struct {
		name string
		pmin *float32
	}{{"server's", nil}, {"zero", new(float32(0))}, {"one", new(float32(1))}} {
		tk := engGreedyTask(toks, 80)
		tk.SpecPMin = tc.pmin
		got := engRun(t, e, tk)
		require.Equal(t, want.tokens, got.tokens, tc.name)
		drafted[tc.name] = got.done.Timings.DraftN
	}
	assert.Equal(t, drafted["server's"], drafted["zero"], "the server's p_min is 0")
	assert.Less(t, drafted["one"], drafted["zero"], "%v", drafted)
}

// A draft model's context is the main context's size, whatever the draft
// was trained on: here an unset size gives the main model (stories260K)
// its 2048 tokens a slot and the draft (trained on 512) the same.
func TestSpeculativeDraftContextFollowsMain(t *testing.T) {
	draftPath := filepath.Join(t.TempDir(), "draft.gguf")
	require.NoError(t, gguf.WriteTinyModel(draftPath, gguf.TinyModelOptions{VocabFrom: engModelPath(t), NCtx: 512}))
	_, e := newEngTestEngine(t, Options{Parallel: 2, Speculative: SpeculativeOptions{Types: []string{SpecDraftSimple}, DraftModel: draftPath}})
	require.NotNil(t, e.spec)
	assert.Equal(t, 2*2048, e.lctx.Size())
	assert.Equal(t, e.lctx.Size(), e.spec.draftC.Size())
	assert.Equal(t, 2048, e.SlotContext())
}

// mtpEngineModel writes a GLM-4.5-layout model whose layers pass their
// input on and whose MTP head so drafts what it says (see
// gguf.TinyModelOptions.PassThrough), and loads it with its head when mtp.
func mtpEngineModel(t testing.TB, mtp bool) *llama.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "glm.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "glm4moe", NLayer: 2, NextN: 1, Seed: 7, PassThrough: true,
		VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")}))
	m, err := llama.LoadModel(t.Context(), path, llama.ModelOptions{MTP: mtp})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// TestEngineSpeculativeMTP drafts with the model's MTP head (draft-mtp):
// three requests at once on three slots, then requests that reuse a slot's
// cache (a prompt continuing the last, a shorter one that keeps part of
// it) give plain generation's tokens, and the head's drafts are accepted.
// A model loaded without its head refuses draft-mtp.
func TestEngineSpeculativeMTP(t *testing.T) {
	m := mtpEngineModel(t, true)
	opts := Options{Context: llama.ContextOptions{ContextSize: 3072, Threads: 1}, Parallel: 3}
	plain, err := New(m, opts)
	require.NoError(t, err)
	prompts := []string{"Once upon a time", "The cat sat on the mat.", "One day, a boy found a box."}
	want := map[string]engResult{}
	for _, p := range prompts {
		want[p] = engRun(t, plain, engGreedyTask(engTokenize(t, m, p, true), 64))
	}
	long := prompts[0] + want[prompts[0]].text + " and"
	want[long] = engRun(t, plain, engGreedyTask(engTokenize(t, m, long, true), 40))
	require.NoError(t, plain.Close())

	opts.Speculative = SpeculativeOptions{Types: []string{SpecDraftMTP}, NMax: 4, Adapt: llama.DraftAdapt{Off: true}}
	e, err := New(m, opts)
	require.NoError(t, err)
	defer e.Close()
	check := func(p string, r engResult) {
		t.Helper()
		require.NoError(t, r.done.Err)
		assert.Equal(t, want[p].tokens, r.tokens, "%q", p)
		tm := r.done.Timings
		assert.Positive(t, tm.DraftN, "%q", p)
		assert.Greater(t, tm.DraftNAccepted, tm.DraftN/2, "%q: %+v", p, tm)
	}
	got := engRunAll(t, e, m, prompts, 64)
	for i, p := range prompts {
		check(p, got[i])
	}
	// The cache: a prompt continuing the first, then the first again.
	for _, p := range []string{long, prompts[0]} {
		tk := engGreedyTask(engTokenize(t, m, p, true), 64)
		if p == long {
			tk.NPredict = 40
		}
		tk.CachePrompt = true
		check(p, engRun(t, e, tk))
	}

	_, err = New(mtpEngineModel(t, false), opts)
	require.ErrorIs(t, err, llama.ErrInvalid)
	assert.Contains(t, err.Error(), "ModelOptions.MTP")

	// The head in a file of its own beside a model without it: named as
	// the draft model, it turns draft-mtp on by itself, and drafts as the
	// head inside the model did.
	dir := t.TempDir()
	trunk, side := filepath.Join(dir, "trunk.gguf"), filepath.Join(dir, "mtp.gguf")
	for path, only := range map[string]string{trunk: "trunk", side: "mtp"} {
		require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{Arch: "glm4moe", NLayer: 2, NextN: 1, Seed: 7, PassThrough: true,
			Only: only, VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")}))
	}
	tm, err := llama.LoadModel(t.Context(), trunk, llama.ModelOptions{})
	require.NoError(t, err)
	defer tm.Close()
	so := SpeculativeOptions{DraftModel: side, NMax: 4, Adapt: llama.DraftAdapt{Off: true}}
	assert.True(t, so.InferTypes())
	assert.Equal(t, "draft-mtp", so.TypesString())
	opts.Speculative = SpeculativeOptions{DraftModel: side, NMax: 4, Adapt: llama.DraftAdapt{Off: true}}
	se, err := New(tm, opts)
	require.NoError(t, err)
	defer se.Close()
	r := engRun(t, se, engGreedyTask(engTokenize(t, tm, prompts[0], true), 64))
	assert.Equal(t, want[prompts[0]].tokens, r.tokens)
	assert.Equal(t, got[0].done.Timings.DraftN, r.done.Timings.DraftN, "the same drafts as the head inside the model")
	assert.Equal(t, got[0].done.Timings.DraftNAccepted, r.done.Timings.DraftNAccepted)
	// A draft model that is no MTP head leaves the types alone.
	so = SpeculativeOptions{DraftModel: engModelPath(t)}
	assert.False(t, so.InferTypes())
	assert.Equal(t, "none", so.TypesString())
}

// TestEngineSpeculativeMTPHybrid: on Qwen3.5's hybrid layout the engine
// keeps draft-mtp's NMax recurrent snapshots, so that rejected drafts are
// taken back: two slots at once give plain generation's tokens, with most
// drafts partly kept (the head drafts what the model says), with the
// n-gram type beside it (its drafts longer than the snapshots go in after
// a checkpoint).
func TestEngineSpeculativeMTPHybrid(t *testing.T) {
	m, err := llama.LoadModel(t.Context(), modeltest.TinyQwen35Path(t, gguf.TinyModelOptions{NextN: 1, PassThrough: true}), llama.ModelOptions{MTP: true})
	require.NoError(t, err)
	defer m.Close()
	opts := Options{Context: llama.ContextOptions{ContextSize: 2048, Threads: 1}, Parallel: 2}
	plain, err := New(m, opts)
	require.NoError(t, err)
	prompts := []string{"Once upon a time", "Hi there"}
	want := make([]engResult, len(prompts))
	for i, p := range prompts {
		want[i] = engRun(t, plain, engGreedyTask(engTokenize(t, m, p, true), 64))
	}
	require.NoError(t, plain.Close())
	opts.Speculative = SpeculativeOptions{Types: []string{SpecNgramSimple, SpecDraftMTP}, NMax: 4, Adapt: llama.DraftAdapt{Off: true}}
	e, err := New(m, opts)
	require.NoError(t, err)
	defer e.Close()
	got := engRunAll(t, e, m, prompts, 64)
	for i := range prompts {
		assertPartlyKept(t, want[i], got[i], prompts[i])
	}
	assert.Equal(t, "none,ngram-simple,draft-mtp", opts.Speculative.TypesString())
}

// TestEngineSpeculativeRecurrent: on Qwen3.5's hybrid layout without an
// MTP head, whose recurrent state cannot take a token back, each draft
// goes in after a checkpoint of the slot's state (as llama-server's); a
// rejection restores it and decodes the kept tokens again. Two slots at
// once give plain generation's tokens, and requests that continue them
// from the slots' memory do too.
func TestEngineSpeculativeRecurrent(t *testing.T) {
	m, err := llama.LoadModel(t.Context(), modeltest.TinyQwen35Path(t, gguf.TinyModelOptions{}), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	opts := Options{Context: llama.ContextOptions{ContextSize: 2048, Threads: 1}, Parallel: 2}
	prompts := []string{"Once upon a time", "Hi there"}
	run := func(e *Engine) (first, then []engResult) {
		first = engRunAll(t, e, m, prompts, 64)
		for i, p := range prompts {
			// The slot's memory holds the prompt and all but the last
			// token generated: a longer prompt takes it up.
			more := append(engTokenize(t, m, p, true), first[i].tokens...)
			more = append(more, engTokenize(t, m, " and then", false)...)
			task := engGreedyTask(more, 16)
			task.CachePrompt = true
			then = append(then, engRun(t, e, task))
		}
		return first, then
	}
	plain, err := New(m, opts)
	require.NoError(t, err)
	want, wantThen := run(plain)
	require.NoError(t, plain.Close())

	opts.Speculative = SpeculativeOptions{Types: []string{SpecNgramSimple}, Adapt: llama.DraftAdapt{Off: true},
		NewDrafters: func(_ int, r *Request) []llama.Drafter {
			for i, p := range prompts {
				if toks := engTokenize(t, m, p, true); slices.Equal(r.Prompt, toks) {
					return []llama.Drafter{&modeltest.ScriptDrafter{Prompt: toks, Plain: want[i].tokens}}
				}
			}
			return nil
		}}
	e, err := New(m, opts)
	require.NoError(t, err)
	defer e.Close()
	assert.Zero(t, e.lctx.Memory().RollbackLimit(), "no snapshots without draft-mtp")
	got, gotThen := run(e)
	for i := range prompts {
		assertPartlyKept(t, want[i], got[i], prompts[i])
		assert.Equal(t, wantThen[i].tokens, gotThen[i].tokens, "continued from the slot's memory")
		assert.Greater(t, gotThen[i].done.Timings.CacheN, 64, "the continuation reuses the slot's memory")
	}
}

// assertPartlyKept asserts that got, a run with drafts, gave plain
// generation's tokens (want's), some drafted tokens kept and some taken
// back.
func assertPartlyKept(t *testing.T, want, got engResult, prompt string) {
	t.Helper()
	require.NoError(t, got.done.Err)
	assert.Equal(t, want.tokens, got.tokens, "%q", prompt)
	tm := got.done.Timings
	assert.Positive(t, tm.DraftNAccepted, "%+v", tm)
	assert.Less(t, tm.DraftNAccepted, tm.DraftN, "some drafts are taken back: %+v", tm)
}

// engRunAll submits a greedy task of n tokens for each prompt at once and
// collects their results.
func engRunAll(t *testing.T, e *Engine, m *llama.Model, prompts []string, n int) []engResult {
	t.Helper()
	got := make([]engResult, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		st, err := e.Submit(t.Context(), engGreedyTask(engTokenize(t, m, p, true), n))
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = engCollect(t, st) }()
	}
	wg.Wait()
	return got
}
