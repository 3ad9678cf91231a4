package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestEnginePrefillChunk checks chunked prefill: a long prompt submitted
// while other slots generate is decoded PrefillChunk tokens at a time
// (a token at position p counting 1+p/1024; one progress event per
// decode), and neither its greedy tokens nor
// those of the generating slots change from what each gives alone. With
// a negative PrefillChunk, the prompt fills the batch at once.
func TestEnginePrefillChunk(t *testing.T) {
	m := engStoriesModel(t)
	long := engTokenize(t, m, strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. ", 8), true)
	require.Greater(t, len(long), 200)
	short := engTokenize(t, m, "Once upon a time", true)
	const nLong, nShort, nStreams = 16, 160, 2
	for _, tc := range []struct {
		name      string
		chunk     int
		wantChunk int // most prompt tokens per decode beside the streams
	}{
		{"default", 0, DefaultPrefillChunk},
		{"16", 16, 16},
		{"no cap", -1, len(long)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := newEngTestEngine(t, Options{CtxSize: (nStreams + 1) * 512, Parallel: nStreams + 1, PrefillChunk: tc.chunk})
			// Alone: the whole prompt in one decode.
			alone := engRun(t, e, engGreedyTask(long, nLong))
			shortAlone := engRun(t, e, engGreedyTask(short, nShort))
			require.Len(t, alone.tokens, nLong)

			// Beside nStreams generating slots.
			var wg sync.WaitGroup
			streams := make([]engResult, nStreams)
			for i := range nStreams {
				st, err := e.Submit(context.Background(), engGreedyTask(short, nShort))
				require.NoError(t, err)
				require.True(t, st.Next(), "first token of stream %d", i)
				first := st.Event()
				wg.Go(func() {
					streams[i] = engCollect(t, st)
					streams[i].tokens = append([]llama.Token{first.Token}, streams[i].tokens...)
				})
			}
			task := engGreedyTask(long, nLong)
			task.ReturnProgress = true
			st, err := e.Submit(context.Background(), task)
			require.NoError(t, err)
			r := engCollect(t, st)
			wg.Wait()
			require.NoError(t, r.done.Err)

			var tokens []llama.Token
			var sizes []int // prompt tokens of each decode
			processed := -1
			for _, ev := range r.events {
				if ev.Progress == nil {
					tokens = append(tokens, ev.Token)
					continue
				}
				if processed >= 0 {
					sizes = append(sizes, ev.Progress.Processed-processed)
				}
				processed = ev.Progress.Processed
			}
			assert.Equal(t, len(long), processed, "the last progress is at 100%")
			require.NotEmpty(t, sizes)
			// The chunks: as many tokens as fit in the budget, a token at
			// position p counting 1+p/1024.
			var want []int
			for p := 0; p < len(long); {
				n := len(long) - p
				if tc.chunk >= 0 {
					n = 0
					for cost := 0.0; p+n < len(long); n++ {
						cost += 1 + float64(p+n)/1024
						if cost > float64(tc.wantChunk) {
							break
						}
					}
				}
				want = append(want, n)
				p += n
			}
			assert.Equal(t, want, sizes, "prompt tokens of each decode")
			assert.LessOrEqual(t, sizes[0], tc.wantChunk)
			assert.Equal(t, alone.tokens, tokens, "the long prompt's greedy tokens")
			for i, s := range streams {
				require.NoError(t, s.done.Err)
				assert.Equal(t, shortAlone.tokens, s.tokens, "stream %d", i)
			}
		})
	}
}
