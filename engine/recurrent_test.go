package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv/modeltest"
)

// recEngine is an engine on the tiny recurrent (Mamba) model.
func recEngine(t testing.TB, m *llama.Model, o Options) *Engine {
	t.Helper()
	o.Context.ContextSize, o.Context.UBatchSize, o.Context.Threads = 1024, 32, 1
	e, err := New(m, o)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// TestEngineRecurrentPrefixReuse: a recurrent state (of a recurrent or a
// hybrid model) cannot drop its tail,
// so, as llama-server, a new prompt keeps what its slot holds directly
// only when it continues all of it, else from the newest context
// checkpoint at or before where it leaves it, else from 0. Whatever was
// kept, the greedy output is the one of a fresh engine.
func TestEngineRecurrentPrefixReuse(t *testing.T) {
	models := map[string]*llama.Model{"mamba": modeltest.TinyRecurrent(t), "jamba": modeltest.TinyHybrid(t)}
	short := swaPrompt(20, 1)
	long := swaPrompt(200, 2)
	for _, tc := range []struct {
		name   string
		o      Options
		first  []llama.Token
		gen    int
		second func(first, out []llama.Token) []llama.Token
		want   int // the second request's cached tokens
	}{
		{
			// The second prompt continues all the slot holds (the first
			// prompt and all generated tokens but the last, never decoded).
			name: "continues everything", first: short, gen: 4,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out[:3], swaPrompt(10, 3)) },
			want:   len(short) + 3,
		},
		{
			// A chat's next turn: the last generated token is in the new
			// prompt, but the state has not seen it... it still continues
			// all the slot holds.
			name: "next turn", first: short, gen: 4,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out, swaPrompt(10, 3)) },
			want:   len(short) + 3,
		},
		{
			// Leaves the slot's tokens within the generated ones: the
			// checkpoint 4 tokens before the first prompt's end.
			name: "diverges in the output, checkpoint", first: short, gen: 8,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out[:2], swaPrompt(10, 3)) },
			want:   len(short) - 4,
		},
		{
			name: "diverges in the output, no checkpoints", o: Options{ContextCheckpoints: -1}, first: short, gen: 8,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out[:2], swaPrompt(10, 3)) },
			want:   0,
		},
		{
			// Recurrent snapshots let llama.cpp take back a few tokens,
			// but a prompt still keeps a prefix as llama-server does:
			// through a checkpoint.
			name: "diverges in the output, recurrent snapshots", o: Options{Context: llama.ContextOptions{RecurrentSnapshots: 4}},
			first: short, gen: 8,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out[:6], swaPrompt(10, 3)) },
			want:   len(short) - 4,
		},
		{
			// N-gram drafts would need the state's tail taken back:
			// speculative decoding is off for these models, and the text
			// a fresh decode's.
			name: "speculative, off", o: Options{Speculative: SpeculativeOptions{Types: []string{"ngram-simple"}}},
			first: short, gen: 8,
			second: func(f, out []llama.Token) []llama.Token { return cat(f, out, f, out) },
			want:   len(short) + 7,
		},
		{
			// An edit just before the end of a long prompt: the checkpoint
			// 4+UBatchSize tokens before its end.
			name: "edit near the end, checkpoint", first: long, gen: 4,
			second: func(f, _ []llama.Token) []llama.Token { return cat(f[:len(f)-20], swaPrompt(10, 3)) },
			want:   len(long) - 4 - 32,
		},
		{
			// An edit before every checkpoint: from 0.
			name: "edit far back, no usable checkpoint", first: long, gen: 4,
			second: func(f, _ []llama.Token) []llama.Token { return cat(f[:100], swaPrompt(10, 3)) },
			want:   0,
		},
		{
			// The same prompt again: at least its last token is decoded,
			// after the checkpoint 4 tokens before its end.
			name: "same prompt", first: short, gen: 4,
			second: func(f, _ []llama.Token) []llama.Token { return f },
			want:   len(short) - 4,
		},
	} {
		for _, name := range []string{"mamba", "jamba"} {
			m := models[name]
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				e := recEngine(t, m, tc.o)
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
				assert.Equal(t, len(p2)-tc.want, rb.done.Timings.PromptN, "the prompt tokens decoded")

				c := engGreedyTask(p2, 8)
				c.Params.IgnoreEOS = true
				assert.Equal(t, engRun(t, recEngine(t, m, Options{}), c).tokens, rb.tokens, "the same text as a fresh decode")
			})
		}
	}
}

// recDecode decodes toks at positions p0... of sequence 0 in micro-batches
// and returns the last token's logits.
func recDecode(t testing.TB, c *llama.Context, toks []llama.Token, p0 int) []float32 {
	t.Helper()
	last := 0
	for i := 0; i < len(toks); i += 32 {
		b := llama.NewBatch(32, 1)
		end := min(i+32, len(toks))
		for j := i; j < end; j++ {
			require.NoError(t, b.Add(toks[j], p0+j, 0, j == len(toks)-1))
		}
		require.NoError(t, c.Decode(context.Background(), b))
		last = end - i - 1
	}
	l, err := c.Logits(last)
	require.NoError(t, err)
	return append([]float32(nil), l...)
}

// TestTinyRecurrentModel: the tiny Mamba loads as a recurrent model and
// the tiny Jamba as a hybrid one; their memory reports one position per
// sequence (the recurrent state's) and cannot drop its tail, and a partial
// state (the recurrent state: all of Mamba's memory, a part of Jamba's)
// taken before more tokens brings the sequence back there once the rest
// of the memory drops its tail: decoding on from it gives a fresh
// decode's logits.
func TestTinyRecurrentModel(t *testing.T) {
	for _, tc := range []struct {
		name              string
		load              func(testing.TB) *llama.Model
		recurrent, hybrid bool
	}{
		{"mamba", modeltest.TinyRecurrent, true, false},
		{"jamba", modeltest.TinyHybrid, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t)
			info, err := m.Info()
			require.NoError(t, err)
			assert.Equal(t, tc.recurrent, info.Recurrent)
			assert.Equal(t, tc.hybrid, info.Hybrid)
			assert.Equal(t, tc.name, info.Architecture)

			toks := swaPrompt(120, 11)
			opts := llama.ContextOptions{ContextSize: 512, UBatchSize: 32, Threads: 1}
			want := recDecode(t, modeltest.NewContext(t, m, opts), toks, 0)

			c := modeltest.NewContext(t, m, opts)
			recDecode(t, c, toks[:80], 0)
			lo, hi, err := c.Memory().PosRange(0)
			require.NoError(t, err)
			assert.Equal(t, [2]int{79, 79}, [2]int{lo, hi}, "the recurrent state's position")
			ck, err := c.SeqStatePartial(0)
			require.NoError(t, err)
			require.NotEmpty(t, ck)
			full, err := c.SeqState(0)
			require.NoError(t, err)
			if tc.hybrid {
				assert.Less(t, len(ck), len(full), "the recurrent part only")
			}
			other := recDecode(t, c, swaPrompt(10, 12), 80)
			assert.NotEqual(t, want, other)

			ok, err := c.Memory().Remove(0, 80, -1)
			require.NoError(t, err)
			assert.False(t, ok, "a recurrent state cannot drop its tail")

			require.NoError(t, c.SetSeqStatePartial(0, ck))
			lo, hi, err = c.Memory().PosRange(0)
			require.NoError(t, err)
			assert.Equal(t, [2]int{79, 79}, [2]int{lo, hi})
			ok, err = c.Memory().Remove(0, 80, -1)
			require.NoError(t, err)
			require.True(t, ok, "nothing past the state to remove but the attention layers' tail")
			got := recDecode(t, c, toks[80:], 80)
			assert.InDeltaSlice(t, want, got, 1e-3)
		})
	}
}

// TestEngineRecurrentSettings: cache reuse is off for a recurrent model
// (its state cannot forget the skipped tokens), checkpoints are on, and
// no slot copies another's prefix.
func TestEngineRecurrentSettings(t *testing.T) {
	m := modeltest.TinyRecurrent(t)
	e := recEngine(t, m, Options{CacheReuse: 16, Parallel: 2})
	assert.True(t, e.recurrent)
	assert.False(t, e.canReuse)
	assert.False(t, e.canCopy)
	assert.Zero(t, e.nSwa)
	assert.Equal(t, DefaultContextCheckpoints, e.nCkpt)

	// A prompt that would reuse a moved chunk with a KV cache: only the
	// common prefix counts, through a checkpoint, and the text is a
	// fresh decode's.
	first := swaPrompt(120, 13)
	a := engGreedyTask(first, 2)
	a.CachePrompt, a.SlotID = true, 0
	engRun(t, e, a)
	p2 := cat(first[:40], first[60:])
	b := engGreedyTask(p2, 8)
	b.CachePrompt, b.SlotID, b.CacheReuse, b.Params.IgnoreEOS = true, 0, 16, true
	rb := engRun(t, e, b)
	assert.Zero(t, rb.done.CachedTokens, "no checkpoint before token 40")
	c := engGreedyTask(p2, 8)
	c.Params.IgnoreEOS = true
	assert.Equal(t, engRun(t, recEngine(t, m, Options{}), c).tokens, rb.tokens)
}

// TestEngineRecurrentSlots: two slots of a recurrent or hybrid model keep their
// states and checkpoints apart; the prompt cache carries a conversation's
// state and checkpoints out of a slot and back; a slot file restores the
// state, and a prompt that continues it goes on from there while one that
// leaves it earlier is decoded from 0 (a slot file holds no checkpoints).
// Each text is a fresh decode's.
func TestEngineRecurrentSlots(t *testing.T) {
	for name, load := range map[string]func(testing.TB) *llama.Model{"mamba": modeltest.TinyRecurrent, "jamba": modeltest.TinyHybrid} {
		t.Run(name, func(t *testing.T) { recurrentSlots(t, load(t)) })
	}
}

func recurrentSlots(t *testing.T, m *llama.Model) {
	fresh := func(p []llama.Token) []llama.Token {
		c := engGreedyTask(p, 6)
		c.Params.IgnoreEOS = true
		return engRun(t, recEngine(t, m, Options{}), c).tokens
	}
	run := func(e *Engine, slot int, p []llama.Token) engResult {
		r := engGreedyTask(p, 6)
		r.CachePrompt, r.SlotID, r.Params.IgnoreEOS = true, slot, true
		return engRun(t, e, r)
	}
	one, two := swaPrompt(60, 21), swaPrompt(70, 22)

	t.Run("two slots", func(t *testing.T) {
		e := recEngine(t, m, Options{Parallel: 2})
		run(e, 0, one)
		run(e, 1, two)
		for _, tc := range []struct {
			slot int
			p    []llama.Token
			want int
		}{
			{0, cat(one[:50], swaPrompt(5, 23)), len(one) - 4 - 32},    // slot 0's checkpoint 4+UBatchSize before its end
			{1, cat(two[:len(two)-2], swaPrompt(5, 24)), len(two) - 4}, // slot 1's checkpoint 4 before its end
		} {
			r := run(e, tc.slot, tc.p)
			assert.Equal(t, tc.want, r.done.CachedTokens, "slot %d", tc.slot)
			assert.Equal(t, fresh(tc.p), r.tokens, "slot %d", tc.slot)
		}
	})

	t.Run("prompt cache", func(t *testing.T) {
		e := recEngine(t, m, Options{})
		run(e, 0, one)
		run(e, 0, two) // one goes to the prompt cache
		require.Len(t, e.pcache.entries, 1)
		require.NotEmpty(t, e.pcache.entries[0].ckpts)
		p := cat(one[:len(one)-2], swaPrompt(5, 25))
		r := run(e, 0, p)
		assert.Equal(t, len(one)-4, r.done.CachedTokens, "restored, then its checkpoint")
		assert.Equal(t, fresh(p), r.tokens)
	})

	t.Run("slot file", func(t *testing.T) {
		e := recEngine(t, m, Options{})
		out := run(e, 0, one).tokens
		path := t.TempDir() + "/slot.bin"
		_, _, err := e.SaveSlot(0, path)
		require.NoError(t, err)
		for _, tc := range []struct {
			name string
			p    []llama.Token
			want int
		}{
			{"continues", cat(one, out, swaPrompt(5, 26)), len(one) + len(out) - 1},
			{"leaves it", cat(one[:len(one)-2], swaPrompt(5, 26)), 0},
		} {
			e2 := recEngine(t, m, Options{})
			n, _, err := e2.RestoreSlot(0, path)
			require.NoError(t, err)
			require.Equal(t, len(one)+len(out)-1, n)
			r := run(e2, 0, tc.p)
			assert.Equal(t, tc.want, r.done.CachedTokens, tc.name)
			assert.Equal(t, fresh(tc.p), r.tokens, tc.name)
		}
	})
}

// TestEngineRecurrentContextShift: context shift goes on with a recurrent
// model (llama.cpp moves its state's position; the state keeps what it
// has seen), and the memory's position stays the slot's last token's.
func TestEngineRecurrentContextShift(t *testing.T) {
	m := modeltest.TinyRecurrent(t)
	o := Options{ContextShift: true}
	o.Context.ContextSize, o.Context.UBatchSize, o.Context.Threads = 64, 32, 1
	e, err := New(m, o)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	require.True(t, e.opts.ContextShift)
	gen := e.nCtxSlot + 40 // past the slot's context
	r := engGreedyTask(swaPrompt(20, 31), gen)
	r.CachePrompt, r.SlotID, r.Params.IgnoreEOS = true, 0, true
	res := engRun(t, e, r)
	assert.Len(t, res.tokens, gen)
	assert.Equal(t, StopTypeLimit, res.done.Stop)
	var lo, hi, n int
	require.NoError(t, e.do(func() { // the context is the loop's
		lo, hi, err = e.lctx.Memory().PosRange(0)
		n = len(e.slots[0].cache)
	}))
	require.NoError(t, err)
	assert.Less(t, n, e.nCtxSlot)
	assert.Equal(t, [2]int{n - 1, n - 1}, [2]int{lo, hi})
}

// TestEngineRecurrentChatCheckpoints: a chat's user messages get
// checkpoints as with a windowed cache, so an edit of the last user
// message goes back to its start, not to 0.
func TestEngineRecurrentChatCheckpoints(t *testing.T) {
	m := modeltest.TinyHybrid(t)
	e := recEngine(t, m, Options{})
	first := swaPrompt(100, 41)
	a := engGreedyTask(first, 2)
	a.CachePrompt, a.SlotID, a.UserStarts = true, 0, []int{1, 60}
	engRun(t, e, a)
	var at []int
	for _, c := range e.slots[0].ckpts {
		at = append(at, c.nTokens)
	}
	assert.Equal(t, []int{1, 60, 64, 96}, at)

	for _, tc := range []struct {
		name string
		keep int // tokens of the first prompt the second keeps
		want int
	}{
		{"edit of the last user message", 62, 60},
		{"edit of the first one", 20, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := cat(first[:tc.keep], swaPrompt(12, 42))
			b := engGreedyTask(p, 6)
			b.CachePrompt, b.SlotID, b.Params.IgnoreEOS = true, 0, true
			r := engRun(t, e, b)
			assert.Equal(t, tc.want, r.done.CachedTokens)
			c := engGreedyTask(p, 6)
			c.Params.IgnoreEOS = true
			assert.Equal(t, engRun(t, recEngine(t, m, Options{}), c).tokens, r.tokens)
			// Back to the first prompt's state for the next case.
			a := engGreedyTask(first, 2)
			a.CachePrompt, a.SlotID, a.UserStarts = true, 0, []int{1, 60}
			engRun(t, e, a)
		})
	}
}
