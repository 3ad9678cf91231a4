package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestRestoreSlotFileSizeBound: a slot file whose state is followed by
// bytes its structure does not account for (a sparse file of a terabyte
// made from a valid one, say) is refused before its size is allocated;
// reading it whole used to end the process (fatal: out of memory).
func TestRestoreSlotFileSizeBound(t *testing.T) {
	m, e := newEngTestEngine(t, Options{})
	st, err := e.Submit(context.Background(), engGreedyTask(engTokenize(t, m, "Once upon a time", true), 3))
	require.NoError(t, err)
	engCollect(t, st)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	_, _, err = e.SaveSlot(0, good)
	require.NoError(t, err)
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		size int64 // the file's size after the valid data (0: as saved)
		ok   bool
	}{
		{"valid", 0, true},
		{"padded 1 KiB", int64(len(data)) + 1<<10, false},
		{"sparse 1 TiB", 1 << 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "f")
			require.NoError(t, os.WriteFile(p, data, 0o600))
			if tc.size > 0 {
				require.NoError(t, os.Truncate(p, tc.size))
			}
			n, _, err := e.RestoreSlot(0, p)
			if tc.ok {
				require.NoError(t, err)
				require.Positive(t, n)
				return
			}
			require.ErrorIs(t, err, llama.ErrInvalid)
		})
	}
}
