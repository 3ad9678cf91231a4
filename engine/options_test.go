package engine

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
)

// TestOptionsContext: Options.Context reaches the context as given, but
// for the fields the engine derives.
func TestOptionsContext(t *testing.T) {
	m := engStoriesModel(t)
	cases := []struct {
		name    string
		o       Options
		wantErr string // an error of NewContext naming the field it was given
		slots   int
		slotCtx int
	}{
		{"Sequences is Parallel",
			Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 512, Sequences: 5}}, "", 2, 256},
		{"ContextSize and KVUnified as given",
			Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 512, KVUnified: true}}, "", 2, 512},
		{"OutputsMax reaches NewContext",
			Options{Context: llama.ContextOptions{ContextSize: 512, OutputsMax: -1}}, "OutputsMax -1", 0, 0},
		{"RecurrentSnapshots reaches NewContext",
			Options{Context: llama.ContextOptions{ContextSize: 512, RecurrentSnapshots: 1 << 20}}, "RecurrentSnapshots 1048576", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Context.Threads = 1
			e, err := New(m, tc.o)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, llama.ErrInvalid)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			defer e.Close()
			assert.Equal(t, tc.slots, e.Slots())
			assert.Equal(t, tc.slotCtx, e.SlotContext())
			r := engRun(t, e, engGreedyTask(engTokenize(t, m, "Once upon a time", true), 8))
			assert.NotEmpty(t, r.text)
			assert.True(t, strings.HasPrefix(storiesGreedy, r.text), "greedy text %q", r.text)
		})
	}
}
