package draft_test

// Drafters run on a server's loop with whatever history a request brings
// and whatever sizes its operator set: no history, no size and no max may
// make one panic or draft more than it was asked. The table test walks
// short histories and small sizes exhaustively; the fuzz targets
// (FuzzDraft*) take any history and any sizes, huge and negative ones too.

import (
	"context"
	"math"
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
)

// drafterCase makes a drafter of one kind from two sizes (an n-gram size
// and a draft size; kinds with one size take the second).
type drafterCase struct {
	name string
	make func(t testing.TB, n, m int) llama.Drafter
	// fromHistory: every drafted token is a token of the history.
	fromHistory bool
}

// draftModelCase drafts with stories260K for itself, on one draft context
// for the process (fuzzing makes a drafter per input; a context each would
// cost more than the drafts), never closed.
func draftModelCase() drafterCase {
	var (
		once sync.Once
		dctx *llama.Context
		derr error
	)
	return drafterCase{name: "draft model", make: func(t testing.TB, _, m int) llama.Drafter {
		model := stories(t)
		once.Do(func() {
			dctx, derr = model.NewContext(llama.ContextOptions{ContextSize: 128, BatchSize: 64, Threads: 1})
		})
		require.NoError(t, derr)
		d, err := draft.NewModel(model, dctx, draft.ModelOptions{NMax: m})
		require.NoError(t, err)
		return d
	}}
}

// recurrentDraftModelCase drafts with a random Qwen3.5-layout model for
// itself: its draft context's memory is recurrent, and goes back to a
// checkpoint where a history leaves the last draft. Model and context
// are made once for the process, never closed, as draftModelCase's.
func recurrentDraftModelCase() drafterCase {
	var (
		once  sync.Once
		model *llama.Model
		dctx  *llama.Context
		derr  error
	)
	return drafterCase{name: "recurrent draft model", make: func(t testing.TB, _, m int) llama.Drafter {
		once.Do(func() {
			var path string
			path, derr = gguf.BenchModelFile(filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf"), "qwen35-tiny-draft",
				gguf.TinyModelOptions{Arch: "qwen35", NLayer: 2}, gguf.F32)
			if derr != nil {
				return
			}
			if model, derr = llama.LoadModel(context.Background(), path, llama.ModelOptions{}); derr != nil {
				return
			}
			dctx, derr = model.NewContext(llama.ContextOptions{ContextSize: 128, BatchSize: 64, Threads: 1})
		})
		require.NoError(t, derr)
		d, err := draft.NewModel(model, dctx, draft.ModelOptions{NMax: m})
		require.NoError(t, err)
		return d
	}}
}

// modTables are the ngram-mod tables of the drafter cases, by n-gram size.
var modTables sync.Map

// modTable returns the shared table for n-grams of n tokens (as
// NewNgramModTable takes n).
func modTable(n int) *draft.NgramModTable {
	key := min(n, 1024)
	if n <= 0 {
		key = 24
	}
	if tb, ok := modTables.Load(key); ok {
		return tb.(*draft.NgramModTable)
	}
	tb, _ := modTables.LoadOrStore(key, draft.NewNgramModTable(key))
	return tb.(*draft.NgramModTable)
}

func drafterCases() []drafterCase {
	return []drafterCase{
		{name: "ngram simple", fromHistory: true, make: func(_ testing.TB, n, m int) llama.Drafter {
			return &draft.NgramSimple{SizeN: n, SizeM: m}
		}},
		{name: "ngram map", fromHistory: true, make: func(_ testing.TB, n, m int) llama.Drafter {
			return &draft.NgramMap{SizeN: n, SizeM: m}
		}},
		{name: "ngram map k4v", fromHistory: true, make: func(_ testing.TB, n, m int) llama.Drafter {
			return &draft.NgramMap{SizeN: n, SizeM: m, Values: true, MinHits: m % 3}
		}},
		{name: "ngram cache", fromHistory: true, make: func(_ testing.TB, _, m int) llama.Drafter {
			return &draft.NgramCache{NDraft: m}
		}},
		// Its table outlives a sequence: a shorter history may be drafted
		// tokens of a longer one seen before. The drafters of one n share
		// a table (16 MiB), as a server's slots do.
		{name: "ngram mod", make: func(_ testing.TB, n, m int) llama.Drafter {
			return &draft.NgramMod{Table: modTable(n), NMin: m, NMax: m}
		}},
		{name: "adaptive ngram simple", fromHistory: true, make: func(_ testing.TB, n, m int) llama.Drafter {
			return &llama.AdaptiveDrafter{Drafter: &draft.NgramSimple{SizeN: n, SizeM: m}, Adapt: llama.DraftAdapt{Start: m, MaxSkip: n}, NMin: n}
		}},
		{name: "adaptive off", fromHistory: true, make: func(_ testing.TB, n, m int) llama.Drafter {
			return &llama.AdaptiveDrafter{Drafter: &draft.NgramMap{SizeN: n, SizeM: m}, Adapt: llama.DraftAdapt{Off: true}}
		}},
		{name: "adaptive nil", make: func(_ testing.TB, n, m int) llama.Drafter {
			return &llama.AdaptiveDrafter{Adapt: llama.DraftAdapt{Start: m}}
		}},
		draftModelCase(),
		recurrentDraftModelCase(),
	}
}

// repetitive returns n tokens of a text that repeats itself, so that the
// n-gram drafters find earlier occurrences and draft.
func repetitive(n int) []llama.Token {
	out := make([]llama.Token, n)
	for i := range out {
		out[i] = llama.Token(10 + i%7)
	}
	return out
}

// checkDraft asks d for a draft after history and holds it to the
// Drafter contract: no error, at most max tokens (none for max <= 0),
// tokens of the history when fromHistory. It then tells d a verdict.
func checkDraft(t testing.TB, c drafterCase, d llama.Drafter, history []llama.Token, max, accepted int) []llama.Token {
	t.Helper()
	got, err := d.Draft(context.Background(), history, max)
	require.NoError(t, err, "%s: history %d, max %d", c.name, len(history), max)
	require.LessOrEqual(t, len(got), ourMax(max, 0), "%s: history %d, max %d", c.name, len(history), max)
	if c.fromHistory {
		for _, tok := range got {
			require.True(t, slices.Contains(history, tok), "%s drafted %d, not in the history", c.name, tok)
		}
	}
	d.Accepted(accepted)
	return got
}

func ourMax(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// TestDraftersAnyHistory runs each drafter over every history of 0 to 64
// tokens (a repeating text, as a generation that copies its prompt) with
// every size (every 4th for the draft model) and max from 0 to 20, and
// with sizes far out of range; each must also draft where the text
// repeats enough.
func TestDraftersAnyHistory(t *testing.T) {
	text := repetitive(64)
	for _, c := range drafterCases() {
		t.Run(c.name, func(t *testing.T) {
			drafts := 0
			step := 1
			if c.name == "draft model" {
				step = 4 // its drafts are decodes, token by token: every 4th size
			}
			for size := 0; size <= 20; size += step {
				d := c.make(t, size, size)
				for n := 0; n <= len(text); n++ {
					// The history grows as in a generation; max runs over 0..20.
					got := checkDraft(t, c, d, text[:n], n%21, len(text[:n])%3)
					if len(got) > 0 {
						drafts++
					}
				}
			}
			extreme := []int{-1, math.MinInt, math.MaxInt, 1 << 40, -(1 << 40)}
			for _, size := range extreme {
				for _, max := range extreme {
					d := c.make(t, size, 4)
					if c.name == "draft model" && size > 0 {
						d = c.make(t, 4, size) // NMax: any positive value
					}
					for _, n := range []int{0, 1, 2, 13, 64} {
						checkDraft(t, c, d, text[:n], max, size)
					}
				}
			}
			if c.name != "adaptive nil" {
				assert.Positive(t, drafts, "%s never drafted on a repeating text", c.name)
			}
		})
	}
}

// historyOf turns fuzz bytes into tokens from a small alphabet (so that
// n-grams repeat), negative ones included unless valid is set, when they
// are tokens of stories260K's vocabulary.
func historyOf(b []byte, valid bool) []llama.Token {
	out := make([]llama.Token, len(b))
	for i, x := range b {
		if valid {
			out[i] = llama.Token(x % 32)
		} else {
			out[i] = llama.Token(int8(x) % 12)
		}
	}
	return out
}

// fuzzDrafter drives one drafter kind: a drafter made from the sizes is
// asked for drafts after the whole history and after each of its
// prefixes given by the bytes of steps (a generation, a new request on the
// same drafter, a shorter history after a rejected draft), each with max
// and a verdict; one step in seven first begins a sequence there, when
// the drafter is a llama.DraftBeginner.
func fuzzDrafter(f *testing.F, c drafterCase, valid bool) {
	f.Add([]byte("abcabcabcabcabcabcabcabcabcabcabc"), []byte{5, 33, 12, 0, 40}, 2, 8, 4, 1)
	f.Add([]byte("Once"), []byte{1, 2, 3}, 12, 48, 16, 0)
	f.Add([]byte(""), []byte{}, 0, 0, 0, 0)
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), []byte{39, 0, 39}, 1, 1, math.MaxInt, -7)
	f.Add([]byte("xyzxyzxyz"), []byte{9}, math.MaxInt, math.MinInt, -1, math.MaxInt)
	f.Fuzz(func(t *testing.T, hist, steps []byte, n, m, max, accepted int) {
		if len(hist) > 4096 || len(steps) > 64 {
			return
		}
		history := historyOf(hist, valid)
		d := c.make(t, n, m)
		checkDraft(t, c, d, history, max, accepted)
		for _, s := range steps {
			k := int(s) % (len(history) + 1)
			if b, ok := d.(llama.DraftBeginner); ok && s%7 == 6 {
				b.Begin(history[:k-min(k, 1)])
			}
			checkDraft(t, c, d, history[:k], max-int(s%5), accepted+int(s%3))
		}
	})
}

func drafterCaseNamed(name string) drafterCase {
	for _, c := range drafterCases() {
		if c.name == name {
			return c
		}
	}
	panic("no drafter case " + name)
}

func FuzzDraftNgramSimple(f *testing.F) { fuzzDrafter(f, drafterCaseNamed("ngram simple"), false) }
func FuzzDraftNgramMap(f *testing.F)    { fuzzDrafter(f, drafterCaseNamed("ngram map"), false) }
func FuzzDraftNgramMapValues(f *testing.F) {
	fuzzDrafter(f, drafterCaseNamed("ngram map k4v"), false)
}
func FuzzDraftNgramCache(f *testing.F) { fuzzDrafter(f, drafterCaseNamed("ngram cache"), false) }
func FuzzDraftNgramMod(f *testing.F)   { fuzzDrafter(f, drafterCaseNamed("ngram mod"), false) }
func FuzzDraftAdaptive(f *testing.F) {
	fuzzDrafter(f, drafterCaseNamed("adaptive ngram simple"), false)
}

// FuzzDraftDraftModel drafts with stories260K for itself; histories are of
// valid tokens (an invalid one is the decode's error, which the fuzz would
// only see fail), longer ones than its 128-token draft context included.
func FuzzDraftDraftModel(f *testing.F) { fuzzDrafter(f, drafterCaseNamed("draft model"), true) }

// FuzzDraftRecurrentDraftModel is FuzzDraftDraftModel with a draft model
// whose memory is recurrent (Qwen3.5's layout): histories that leave the
// last draft anywhere send it back to its checkpoint or to the start.
func FuzzDraftRecurrentDraftModel(f *testing.F) {
	fuzzDrafter(f, drafterCaseNamed("recurrent draft model"), true)
}
