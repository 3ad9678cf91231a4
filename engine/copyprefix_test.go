package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

// TestEngineCopyPrefixFromOtherSlot: a request pinned to an empty slot
// whose prompt starts like the one another slot holds gets that prefix
// copied (separate KV streams), idle or busy, so only the rest of its
// prompt is decoded; with a unified cache nothing is copied. Either way the
// greedy output is the one of a fresh decode.
func TestEngineCopyPrefixFromOtherSlot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		unified    bool
		busySource bool // the slot holding the prefix still generates
		copied     bool
	}{
		{"idle source", false, false, true},
		{"busy source", false, true, true},
		{"unified cache", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, e := newEngTestEngine(t, Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 1024, KVUnified: tc.unified}})
			shared := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends."
			pA := engTokenize(t, m, shared+" One day, she saw a big red ball.", true)
			pB := engTokenize(t, m, shared+" Her mom said it was time to go home.", true)
			lcp := engCommonPrefix(pA, pB)
			require.Greater(t, lcp, 30)

			_, fresh := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
			want := engRun(t, fresh, engGreedyTask(pB, 24))

			a := engGreedyTask(pA, 8)
			a.CachePrompt, a.SlotID = true, 0
			var stopA func()
			if tc.busySource {
				a.NPredict, a.Params.IgnoreEOS = -1, true
				ctx, cancel := context.WithCancel(context.Background())
				st, err := e.Submit(ctx, a)
				require.NoError(t, err)
				require.True(t, st.Next(), "a first token: the prompt is in slot 0") // the prompt is decoded
				stopA = func() { cancel(); st.Close() }
			} else {
				engRun(t, e, a)
			}
			before := e.Metrics().PromptTokensTotal
			b := engGreedyTask(pB, 24)
			b.CachePrompt, b.SlotID = true, 1
			got := engRun(t, e, b)
			if stopA != nil {
				stopA()
			}
			decoded := e.Metrics().PromptTokensTotal - before
			if tc.copied {
				assert.Equal(t, lcp, got.done.CachedTokens, "the shared prefix comes from slot 0")
				assert.Equal(t, int64(len(pB)-lcp), decoded, "only the rest of the prompt is decoded")
			} else {
				assert.Zero(t, got.done.CachedTokens)
				assert.Equal(t, int64(len(pB)), decoded)
			}
			assert.Equal(t, want.tokens, got.tokens)
			assert.Equal(t, want.text, got.text)

			// Slot 1 now holds its own prompt: run again, it keeps it (no copy).
			again := engRun(t, e, b)
			assert.Equal(t, len(pB)-1, again.done.CachedTokens)
			assert.Equal(t, want.tokens, again.tokens)
		})
	}
}

// TestEngineCopyPrefixReleasedBeforeDecode: a slot whose request ends
// between the copy and the next decode (llama.cpp moves the KV data only
// then) forgets the copied prefix instead of keeping, for the prompt cache
// or its next request, tokens whose data is not yet in its memory; its
// next request still gets the output of a fresh decode.
func TestEngineCopyPrefixReleasedBeforeDecode(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 1024}})
	shared := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends."
	pA := engTokenize(t, m, shared+" One day, she saw a big red ball.", true)
	pB := engTokenize(t, m, shared+" Her mom said it was time to go home.", true)
	a := engGreedyTask(pA, 4)
	a.CachePrompt, a.SlotID = true, 0
	engRun(t, e, a)

	require.NoError(t, e.do(func() {
		s := e.slots[1]
		s.prompt = pB
		n, ok := e.copyPrefix(s, 0)
		require.True(t, ok)
		require.Equal(t, engCommonPrefix(pA, pB), n)
		require.True(t, s.copyPending)
		// Released as a request that ends before the next decode would be.
		s.tk = &engTask{t: &Request{}, ob: newOutbox(), stop: func() bool { return true }}
		e.mu.Lock()
		e.busy++
		e.mu.Unlock()
		e.release(s)
		assert.Empty(t, s.cache)
		assert.False(t, s.copyPending)
		_, hi, err := e.lctx.Memory().PosRange(1)
		require.NoError(t, err)
		assert.Less(t, hi, 0, "sequence 1 is empty")
	}))

	_, fresh := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}})
	want := engRun(t, fresh, engGreedyTask(pB, 16))
	b := engGreedyTask(pB, 16)
	b.CachePrompt, b.SlotID = true, 1
	got := engRun(t, e, b)
	assert.Equal(t, want.tokens, got.tokens)
	assert.Zero(t, e.Metrics().RequestsProcessing)
}
