//go:build unix

package llama_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// TestStateFilesNotRegular: LoadStateFile and LoadSeqFile refuse a FIFO
// (whose opening would wait for a writer for ever) and a directory.
func TestStateFilesNotRegular(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Threads: 1})
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, path := range []string{fifo, dir, filepath.Join(dir, "missing")} {
		_, err := c.LoadStateFile(path)
		require.ErrorIs(t, err, llama.ErrLoad, path)
		_, err = c.LoadSeqFile(path, 0)
		require.ErrorIs(t, err, llama.ErrLoad, path)
	}
}
