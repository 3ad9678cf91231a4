package engine

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// swaEngine is an engine on the tiny sliding-window model (window 32,
// windowed cache of 256 cells per slot at this context).
func swaEngine(t testing.TB, m *llama.Model, o Options) *Engine {
	t.Helper()
	o.Context.ContextSize, o.Context.UBatchSize, o.Context.Threads = 1024, 32, 1
	e, err := New(m, o)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

func swaPrompt(n, salt int) []llama.Token {
	toks := make([]llama.Token, n)
	for i := range toks {
		toks[i] = llama.Token(300 + (i*131+salt*7)%20000)
	}
	return toks
}

// TestEngineWindowedPrefixReuse: with a windowed cache a new prompt keeps
// what its slot holds only as llama-server does: directly when the window
// still holds what the next position needs, else from the newest usable
// context checkpoint, else from 0. Whatever was kept, the greedy output is
// the one of a fresh engine.
func TestEngineWindowedPrefixReuse(t *testing.T) {
	m := modeltest.TinySWA(t)
	short := swaPrompt(20, 1)
	long := swaPrompt(600, 2)
	for _, tc := range []struct {
		name string
		o    Options
		// first prompt, its generated tokens and the second prompt
		first  []llama.Token
		gen    int
		second func(first, out []llama.Token) []llama.Token
		want   int // the second request's cached tokens
	}{
		{
			// A prefix shorter than the window goes through a checkpoint
			// (llama-server's rule): the one 4 tokens before the end of the
			// first prompt, re-decoding its last token.
			name: "short chat, checkpoint", first: short, gen: 4,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out, swaPrompt(10, 3)) },
			want:   len(short) - 5,
		},
		{
			name: "short chat, no checkpoints", o: Options{ContextCheckpoints: -1}, first: short, gen: 4,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out, swaPrompt(10, 3)) },
			want:   0,
		},
		{
			name: "short chat, full cache", o: Options{Context: llama.ContextOptions{SWAFull: true}}, first: short, gen: 4,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out, swaPrompt(10, 3)) },
			want:   len(short) + 3,
		},
		{
			// The window holds the end of what the slot has: kept whole.
			name: "long chat, window reuse", first: long, gen: 4,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out, swaPrompt(10, 3)) },
			want:   len(long) + 3,
		},
		{
			// The new prompt leaves the old one where the window has moved
			// on and no checkpoint lies before: decoded again from 0.
			name: "edit far back, no usable checkpoint", first: long, gen: 4,
			second: func(f, _ []llama.Token) []llama.Token { return cat(f[:300], swaPrompt(10, 3)) },
			want:   0,
		},
		{
			name: "edit far back, full cache", o: Options{Context: llama.ContextOptions{SWAFull: true}}, first: long, gen: 4,
			second: func(f, _ []llama.Token) []llama.Token { return cat(f[:300], swaPrompt(10, 3)) },
			want:   300,
		},
		{
			// An edit just before the end of the first prompt: the
			// checkpoint 4+UBatchSize tokens before its end is used.
			name: "edit near the end, checkpoint", first: long, gen: 300,
			second: func(f, _ []llama.Token) []llama.Token { return cat(f[:len(f)-20], swaPrompt(10, 3)) },
			want:   len(long) - 4 - 32 - 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := swaEngine(t, m, tc.o)
			a := engGreedyTask(tc.first, tc.gen)
			a.CachePrompt, a.Params.IgnoreEOS = true, true
			ra := engRun(t, e, a)
			require.Len(t, ra.tokens, tc.gen)
			p2 := tc.second(tc.first, ra.tokens)
			b := engGreedyTask(p2, 8)
			b.CachePrompt, b.Params.IgnoreEOS = true, true
			rb := engRun(t, e, b)
			assert.Equal(t, tc.want, rb.done.CachedTokens)
			assert.Equal(t, tc.want, rb.done.Timings.CacheN)

			fresh := swaEngine(t, m, Options{})
			c := engGreedyTask(p2, 8)
			c.Params.IgnoreEOS = true
			assert.Equal(t, engRun(t, fresh, c).tokens, rb.tokens, "the same text as a fresh decode")
		})
	}
}

func cat(parts ...[]llama.Token) []llama.Token {
	var out []llama.Token
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestEngineWindowedSettings: a windowed cache turns context shift and
// cache reuse off (it cannot shift positions), and a checkpoint count
// past the limit is refused.
func TestEngineWindowedSettings(t *testing.T) {
	m := modeltest.TinySWA(t)
	e := swaEngine(t, m, Options{ContextShift: true, CacheReuse: 16})
	assert.False(t, e.opts.ContextShift)
	assert.False(t, e.canReuse)
	assert.Equal(t, modeltest.TinySWAWindow, e.nSwa)
	assert.Equal(t, DefaultContextCheckpoints, e.nCkpt)
	assert.Equal(t, DefaultCheckpointMinStep, e.ckptStep)

	full := swaEngine(t, m, Options{ContextShift: true, Context: llama.ContextOptions{SWAFull: true}})
	assert.True(t, full.opts.ContextShift)
	assert.Zero(t, full.nSwa)

	// A context within the window's cache: llama.cpp gives the window's
	// layers the whole context, so it can shift, and llama-server's
	// window rules still hold.
	small, err := New(m, Options{ContextShift: true, Context: llama.ContextOptions{ContextSize: 256, UBatchSize: 32, Threads: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { small.Close() })
	assert.True(t, small.opts.ContextShift)
	assert.Equal(t, modeltest.TinySWAWindow, small.nSwa)

	for _, n := range []int{MaxContextCheckpoints + 1, 1 << 30} {
		_, err := New(m, Options{ContextCheckpoints: n, Context: llama.ContextOptions{ContextSize: 1024}})
		require.ErrorIs(t, err, llama.ErrInvalid)
	}
}

// TestEngineWindowedSlotFileLayout: llama.cpp saves a sequence's
// sliding-window entries for its last window only, whatever the cache's
// layout, so slot files of a windowed and of a full-size cache are
// interchangeable: each restores into either, and the next request decodes
// what the window needs (with a windowed cache, as llama-server, from 0:
// the saved window holds no position before the last one's). The output
// is a fresh decode's either way.
func TestEngineWindowedSlotFileLayout(t *testing.T) {
	m := modeltest.TinySWA(t)
	dir := t.TempDir()
	prompt := swaPrompt(600, 4) // more than the window's 256 cells
	save := func(full bool) string {
		e := swaEngine(t, m, Options{Context: llama.ContextOptions{SWAFull: full}})
		a := engGreedyTask(prompt, 2)
		a.CachePrompt, a.SlotID = true, 0
		engRun(t, e, a)
		p := filepath.Join(dir, map[bool]string{true: "full.bin", false: "windowed.bin"}[full])
		_, _, err := e.SaveSlot(0, p)
		require.NoError(t, err)
		return p
	}
	files := map[bool]string{true: save(true), false: save(false)}
	for _, tc := range []struct {
		name        string
		full, saved bool // the server's layout, the file's
		back        int  // how far back of the restored tokens the new prompt leaves them
		cached      int
	}{
		{"windowed file, windowed cache", false, false, 1, 0},
		{"full file, windowed cache", false, true, 1, 0},
		{"full file, full cache", true, true, 1, 600},
		{"windowed file, full cache", true, false, 1, 600},
		{"full cache, back past the window", true, true, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := swaEngine(t, m, Options{Context: llama.ContextOptions{SWAFull: tc.full}})
			n, _, err := e.RestoreSlot(0, files[tc.saved])
			require.NoError(t, err)
			require.Equal(t, len(prompt)+1, n)
			next := cat(prompt[:len(prompt)+1-tc.back], swaPrompt(8, 5))
			b := engGreedyTask(next, 6)
			b.CachePrompt, b.SlotID, b.Params.IgnoreEOS = true, 0, true
			r := engRun(t, e, b)
			assert.Equal(t, tc.cached, r.done.CachedTokens)
			fresh := engGreedyTask(next, 6)
			fresh.Params.IgnoreEOS = true
			assert.Equal(t, engRun(t, swaEngine(t, m, Options{}), fresh).tokens, r.tokens)
		})
	}
}

// TestEngineCheckpointPlaces: where a prompt's checkpoints go, as
// llama-server places them: at user message starts (the first one while
// the slot has none, the last one always), then 4+UBatchSize and 4 tokens
// before the end.
func TestEngineCheckpointPlaces(t *testing.T) {
	m := modeltest.TinySWA(t)
	for _, tc := range []struct {
		name  string
		n     int
		users []int
		want  []int
	}{
		{"no chat", 100, nil, []int{64, 96}},
		{"short prompt", 20, nil, []int{16}},
		{"chat", 100, []int{1, 30, 50}, []int{1, 50, 64, 96}},
		{"chat, last user near the end", 100, []int{1, 97}, []int{1, 64, 96, 97}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := swaEngine(t, m, Options{})
			r := engGreedyTask(swaPrompt(tc.n, 6), 1)
			r.CachePrompt, r.SlotID, r.UserStarts = true, 0, tc.users
			engRun(t, e, r)
			var got []int
			for _, c := range e.slots[0].ckpts {
				got = append(got, c.nTokens)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestEngineCheckpointsInPromptCache: a slot's checkpoints move with its
// prompt into the prompt cache, count against its bytes, and come back
// with it, so that the conversation resumes through them.
func TestEngineCheckpointsInPromptCache(t *testing.T) {
	m := modeltest.TinySWA(t)
	e := swaEngine(t, m, Options{})
	first := swaPrompt(20, 8)
	a := engGreedyTask(first, 1)
	a.CachePrompt, a.SlotID = true, 0
	engRun(t, e, a)
	require.Len(t, e.slots[0].ckpts, 1)
	ck := e.slots[0].ckpts[0]

	// Another conversation takes the slot: the first goes to the cache.
	b := engGreedyTask(swaPrompt(20, 9), 1)
	b.CachePrompt, b.SlotID = true, 0
	engRun(t, e, b)
	require.Len(t, e.pcache.entries, 1)
	en := e.pcache.entries[0]
	require.Len(t, en.ckpts, 1)
	assert.Equal(t, ck.nTokens, en.ckpts[0].nTokens)
	assert.Equal(t, int64(len(en.state)+len(ck.state)), e.pcache.size, "the checkpoint's bytes count")

	// The first conversation goes on: restored from the cache, through
	// its checkpoint (a prefix shorter than the window).
	c := engGreedyTask(cat(first, swaPrompt(5, 10)), 1)
	c.CachePrompt, c.SlotID = true, 0
	r := engRun(t, e, c)
	assert.Equal(t, len(first)-5, r.done.CachedTokens)
}

// TestEngineCheckpointsSlotRestore: restoring a slot file drops the slot's
// checkpoints, as llama-server clears the slot's prompt then, while the
// prompt cache brings a prompt's own back. The sequence is the one of the
// server's long differential test: a prompt that kept only its first token
// through an earlier one's checkpoint takes a checkpoint of that token
// alone, which every prompt starting with it could use; after a restore
// llama-server has none and decodes the continuation again from 0.
func TestEngineCheckpointsSlotRestore(t *testing.T) {
	m := modeltest.TinySWA(t)
	head := swaPrompt(2, 20)
	earlier := cat(head, swaPrompt(4, 21))
	first := cat(head, swaPrompt(18, 22))
	other := cat(head[:1], swaPrompt(6, 23))
	for _, tc := range []struct {
		name    string
		restore bool
		want    int // the continuation's cached tokens
	}{
		{"slot file restored", true, 0},
		// The prompt cache keeps first's checkpoints: the one 4 tokens
		// before its end.
		{"prompt cache", false, len(first) - 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := swaEngine(t, m, Options{})
			run := func(p []llama.Token, n int) engResult {
				r := engGreedyTask(p, n)
				r.CachePrompt, r.SlotID, r.Params.IgnoreEOS = true, 0, true
				return engRun(t, e, r)
			}
			run(earlier, 1)
			// first keeps its first token through earlier's checkpoint
			// at 2 tokens, and takes one at that token.
			rf := run(first, 4)
			require.Equal(t, 1, rf.done.CachedTokens)
			require.True(t, slices.ContainsFunc(e.slots[0].ckpts, func(c ckpt) bool { return c.nTokens == 1 }),
				"a checkpoint of the first token alone")
			file := filepath.Join(t.TempDir(), "slot.bin")
			_, _, err := e.SaveSlot(0, file)
			require.NoError(t, err)
			// Another prompt sharing the first token takes the slot (first
			// goes to the prompt cache).
			assert.Equal(t, 1, run(other, 2).done.CachedTokens)
			if tc.restore {
				_, _, err := e.RestoreSlot(0, file)
				require.NoError(t, err)
				assert.Empty(t, e.slots[0].ckpts)
			}
			next := cat(first, rf.tokens, swaPrompt(5, 24))
			r := run(next, 4)
			assert.Equal(t, tc.want, r.done.CachedTokens)
			assert.Equal(t, tc.want, r.done.Timings.CacheN)
			fresh := engGreedyTask(next, 4)
			fresh.Params.IgnoreEOS = true
			assert.Equal(t, engRun(t, swaEngine(t, m, Options{}), fresh).tokens, r.tokens, "the same text as a fresh decode")
		})
	}
}

// TestEngineCheckpointsWithoutPromptCache: a request that does not reuse
// the slot's cache (cache_prompt off) decodes from 0, so the slot's
// earlier checkpoints go, as llama-server erases them: the same prompt
// sent again and again holds the checkpoints of one request, not more.
func TestEngineCheckpointsWithoutPromptCache(t *testing.T) {
	m := modeltest.TinySWA(t)
	e := swaEngine(t, m, Options{})
	var want []int
	for i := range 4 {
		r := engGreedyTask(swaPrompt(100, 6), 1)
		r.SlotID = 0
		engRun(t, e, r)
		var got []int
		for _, c := range e.slots[0].ckpts {
			got = append(got, c.nTokens)
		}
		if i == 0 {
			want = got
			require.Equal(t, []int{64, 96}, want)
		}
		assert.Equal(t, want, got, "request %d", i)
	}
}
