package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

// A slot file written by SaveSlot is byte for byte the file llama.cpp's own
// writer makes of the same slot, and llama.cpp's loader reads it.
func TestSlotFileLlamaFormat(t *testing.T) {
	m, e := newEngTestEngine(t, Options{Parallel: 2, Context: llama.ContextOptions{ContextSize: 1024}})
	req := engGreedyTask(engTokenize(t, m, "Once upon a time", true), 4)
	req.SlotID = 1
	req.CachePrompt = true
	engRun(t, e, req)
	mine := filepath.Join(t.TempDir(), "one.bin")
	nSaved, nWritten, err := e.SaveSlot(1, mine)
	require.NoError(t, err)

	theirs := filepath.Join(t.TempDir(), "theirs.bin")
	var n int
	var toks []llama.Token
	require.NoError(t, e.do(func() {
		if n, err = e.lctx.SaveSeqFile(theirs, 1, packSlotTokens(e.slots[1].cache)); err != nil {
			return
		}
		if _, err = e.lctx.Memory().Remove(1, 0, -1); err != nil {
			return
		}
		toks, err = e.lctx.LoadSeqFile(mine, 1)
	}))
	require.NoError(t, err)
	got, err := os.ReadFile(mine)
	require.NoError(t, err)
	ref, err := os.ReadFile(theirs)
	require.NoError(t, err)
	assert.Equal(t, n, len(ref))
	assert.True(t, bytes.Equal(ref, got), "the files differ (%d and %d bytes)", len(ref), len(got))
	plain, err := unpackSlotTokens(toks)
	require.NoError(t, err)
	assert.Equal(t, nSaved, len(plain))
	assert.Equal(t, nWritten, len(got))
}
