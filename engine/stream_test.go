package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestStreamTakesTurns checks SubmitAll's reading of several outboxes: one
// signal wakes the reader for a push to any of them, each request's events
// stay in order, the requests with waiting events take turns (a backlog of
// one does not hold back another's), and Next ends once every request has
// sent its last event.
func TestStreamTakesTurns(t *testing.T) {
	tests := []struct {
		name   string
		pushes []int // request of each push, in order; the last of each is its Done
		want   []int // request of each event read, once all are pushed
	}{
		{"one request", []int{0, 0, 0}, []int{0, 0, 0}},
		{"backlog of the first", []int{0, 0, 0, 0, 1, 1}, []int{0, 1, 0, 1, 0, 0}},
		{"three requests", []int{2, 2, 1, 0, 0, 2, 1}, []int{0, 1, 2, 0, 1, 2, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, r := range tc.pushes {
				n = max(n, r+1)
			}
			last := make([]int, n)
			for i, r := range tc.pushes {
				last[r] = i
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			obs := make([]*outbox, n)
			for i := range obs {
				obs[i] = newOutbox()
				obs[i].sig = obs[0].sig
			}
			st := &Stream{ctx: ctx, cancel: cancel, ob: obs[0], obs: obs}
			for i, r := range tc.pushes {
				obs[r].push(&Event{Generated: i, Done: i == last[r]}, i == last[r])
			}
			var got []int
			prev := map[int]int{}
			for st.Next() {
				ev, r := st.Event(), st.Index()
				if p, ok := prev[r]; ok {
					require.Greater(t, ev.Generated, p, "request %d's events in order", r)
				}
				prev[r] = ev.Generated
				got = append(got, r)
			}
			require.NoError(t, st.Err())
			assert.Equal(t, tc.want, got)
		})
	}
}

// The wake-up of a reader waiting on SubmitAll's stream: a push to any
// request's outbox wakes it.
func TestStreamWakesOnAnyRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := []*outbox{newOutbox(), newOutbox()}
	obs[1].sig = obs[0].sig
	st := &Stream{ctx: ctx, cancel: cancel, ob: obs[0], obs: obs}
	got := make(chan int)
	go func() {
		for st.Next() {
			got <- st.Index()
		}
		close(got)
	}()
	obs[1].push(&Event{}, false)
	require.Equal(t, 1, <-got)
	obs[1].push(&Event{Done: true}, true)
	require.Equal(t, 1, <-got)
	obs[0].push(&Event{Done: true}, true)
	require.Equal(t, 0, <-got)
	_, open := <-got
	require.False(t, open, "the stream ends with the last request's last event")
}

// SubmitAll runs its requests together on the engine: each request's events
// are those it has alone, a Close stops them all and frees their slots, a
// refused request stops the ones submitted before it, and no requests is
// an error.
func TestEngineSubmitAll(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 1024}, Parallel: 3, ContextShift: true})
	prompts := []string{"Once upon a time", "The cat", "One day"}

	t.Run("events of each request", func(t *testing.T) {
		reqs := make([]*Request, len(prompts))
		want := make([]engResult, len(prompts))
		for i, p := range prompts {
			reqs[i] = engGreedyTask(engTokenize(t, m, p, true), 16+4*i)
			want[i] = engRun(t, e, engGreedyTask(engTokenize(t, m, p, true), 16+4*i))
		}
		st, err := e.SubmitAll(context.Background(), reqs)
		require.NoError(t, err)
		defer st.Close()
		got := make([]engResult, len(reqs))
		for st.Next() {
			ev, i := st.Event(), st.Index()
			require.False(t, got[i].done.Done, "request %d: an event after its last", i)
			require.NoError(t, ev.Err)
			if ev.Done {
				got[i].done = ev
				continue
			}
			got[i].text += ev.Text
			got[i].tokens = append(got[i].tokens, ev.Token)
		}
		require.NoError(t, st.Err())
		for i := range got {
			require.True(t, got[i].done.Done, "request %d ended", i)
			assert.Equal(t, want[i].tokens, got[i].tokens, "request %d", i)
			assert.Equal(t, want[i].text, got[i].text, "request %d", i)
			assert.Equal(t, want[i].done.Generated, got[i].done.Generated, "request %d", i)
		}
	})

	t.Run("close stops them all", func(t *testing.T) {
		reqs := make([]*Request, len(prompts))
		for i, p := range prompts {
			reqs[i] = engGreedyTask(engTokenize(t, m, p, true), -1)
			reqs[i].Params.IgnoreEOS = true
		}
		st, err := e.SubmitAll(context.Background(), reqs)
		require.NoError(t, err)
		seen := map[int]bool{}
		for len(seen) < len(reqs) && st.Next() {
			seen[st.Index()] = true
		}
		require.Len(t, seen, len(reqs), "every request generates")
		require.NoError(t, st.Close())
		require.False(t, st.Next(), "a closed stream has no more events")
		// The engine frees a stopped request's slot before it starts the
		// next request: after one more, no slot is busy.
		engRun(t, e, engGreedyTask(engTokenize(t, m, "x", true), 2))
		assert.Equal(t, 0, e.Metrics().RequestsProcessing)
	})

	t.Run("no requests", func(t *testing.T) {
		_, err := e.SubmitAll(context.Background(), nil)
		require.ErrorIs(t, err, llama.ErrInvalid)
	})
}

// A request SubmitAll cannot queue stops the ones before it.
func TestEngineSubmitAllBusy(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Context: llama.ContextOptions{ContextSize: 512}, Parallel: 1, QueueSize: 1})
	prompt := engTokenize(t, m, "Once upon a time", true)
	long := engGreedyTask(prompt, -1)
	long.Params.IgnoreEOS = true
	long.NKeep = -1
	// One slot and one place in the queue: the third request is refused.
	_, err := e.SubmitAll(context.Background(), []*Request{long, engGreedyTask(prompt, 4), engGreedyTask(prompt, 4)})
	require.ErrorIs(t, err, ErrQueueFull)
	// A *llama.Error of code busy, as every error of the engine is.
	var le *llama.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, llama.CodeBusy, le.Code)
	assert.ErrorIs(t, err, llama.ErrBusy)
	// The first two were stopped: the slot serves the next request.
	r := engRun(t, e, engGreedyTask(prompt, 4))
	assert.Equal(t, 4, r.done.Generated)
}
