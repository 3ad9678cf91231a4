package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// computeCase is one of the C computations that run under the context's
// abort and busy guard: run starts it on c with ctx.
type computeCase struct {
	name string
	run  func(ctx context.Context) error
}

// checkComputeCanceledBusy runs each case with a ctx that ends the moment
// the computation arms its abort, so during llama.cpp's work, and from
// that moment makes the same call again: the nested call finds the
// context held (ErrBusy), and the first ends with ErrCanceled.
func checkComputeCanceledBusy(t *testing.T, cases []computeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var nested error
			ctx := newDecodeStarted(true, func() { nested = tc.run(context.Background()) })
			err := tc.run(ctx)
			require.Error(t, err)
			assert.ErrorIs(t, err, llama.ErrCanceled)
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, nested, llama.ErrBusy)
			// The abort flag is cleared: the same call now succeeds.
			require.NoError(t, tc.run(context.Background()))
		})
	}
}

// TestComputeCanceledBusy: Decode's guard (the shared one of Encode and
// package mtmd, tested with their models in their files).
func TestComputeCanceledBusy(t *testing.T) {
	m := stories(t)
	// A batch of many ubatches: llama.cpp looks at the abort flag between
	// them, so the cancel lands during the work even when the goroutine
	// that sets the flag runs late (the race detector slows it).
	const n = 1024
	c := newCtx(t, m, llama.ContextOptions{ContextSize: n, BatchSize: n, UBatchSize: 32})
	b := llama.NewBatch(n, 1)
	for i := range n {
		require.NoError(t, b.Add(llama.Token(3+i%500), i, 0, i == n-1))
	}
	checkComputeCanceledBusy(t, []computeCase{{
		name: "decode",
		run: func(ctx context.Context) error {
			if err := c.Memory().Clear(); err != nil {
				return err
			}
			return c.Decode(ctx, b)
		},
	}})
}
