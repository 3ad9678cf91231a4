package draft_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/draft"
	"github.com/x/llama/internal/testenv/modeltest"
)

// stories returns the shared stories260K model (loaded once per test binary).
func stories(t testing.TB) *llama.Model { return modeltest.Shared(t, "stories260K.gguf", false) }

func newCtx(t testing.TB, m *llama.Model, o llama.ContextOptions) *llama.Context {
	t.Helper()
	return modeltest.NewContext(t, m, o)
}

func TestDraftCompatibility(t *testing.T) {
	m := stories(t)
	require.NoError(t, draft.CheckCompatible(m, m))
	other := modeltest.Load(t, "llama-2-tiny-random.gguf", llama.ModelOptions{VocabOnly: true})
	info, err := other.Info() // a vocabulary-only model has no layers: no abort
	require.NoError(t, err)
	assert.Equal(t, 0, info.Layers)
	assert.Equal(t, "spm", info.VocabType)
	err = draft.CheckCompatible(m, other)
	require.ErrorIs(t, err, llama.ErrInvalid)
	assert.Contains(t, err.Error(), "vocabulary sizes differ")
	oc := newCtx(t, m, llama.ContextOptions{ContextSize: 64})
	_, err = draft.NewModel(other, oc, draft.ModelOptions{})
	require.ErrorIs(t, err, llama.ErrInvalid)
}

// TestNgramStatsFile reads and writes llama.cpp's lookup cache format: per
// n-gram, 4 int32 tokens (-1 padded), an int32 count of followers, then
// (int32 token, int32 count) pairs, little-endian.
func TestNgramStatsFile(t *testing.T) {
	dir := t.TempDir()
	var raw []byte
	put := func(v ...int32) {
		for _, x := range v {
			raw = binary.LittleEndian.AppendUint32(raw, uint32(x))
		}
	}
	put(7, 8, -1, -1, 2, 9, 3, 10, 1) // 7 8 -> 9 (3 times), 10 (once)
	put(5, -1, -1, -1, 1, 6, 4)       // 5 -> 6 (4 times)
	path := filepath.Join(dir, "static.bin")
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	s, err := draft.LoadNgramStats(path)
	require.NoError(t, err)
	assert.Equal(t, 2, s.Len())

	// Round trip through Save, and the statistics draft: after "7 8" the
	// static cache proposes 9 (3 of 4 samples).
	out := filepath.Join(dir, "out.bin")
	require.NoError(t, s.Save(out))
	back, err := draft.LoadNgramStats(out)
	require.NoError(t, err)
	assert.Equal(t, 2, back.Len())
	nc := &draft.NgramCache{Static: back, NDraft: 1}
	got, err := nc.Draft(context.Background(), []llama.Token{1, 7, 8}, 4)
	require.NoError(t, err)
	assert.Equal(t, []llama.Token{9}, got)

	// Counting a text: "1 2 3" five times makes "1 2" be followed by 3 (4
	// samples: enough for the strict thresholds of dynamic statistics).
	st := draft.NewNgramStats()
	seq := []llama.Token{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}
	st.Update(seq, 1, 4, len(seq))
	nc = &draft.NgramCache{Dynamic: st, NDraft: 3}
	got, err = nc.Draft(context.Background(), []llama.Token{9, 1, 2}, 3)
	require.NoError(t, err)
	assert.Equal(t, []llama.Token{3, 1, 2}, got)

	for name, bad := range map[string][]byte{
		"truncated record": raw[:10],
		"truncated counts": raw[:24],
		"zero followers":   binary.LittleEndian.AppendUint32(make([]byte, 16), 0),
	} {
		p := filepath.Join(dir, "bad")
		require.NoError(t, os.WriteFile(p, bad, 0o644), name)
		_, err := draft.LoadNgramStats(p)
		require.ErrorIs(t, err, llama.ErrLoad, name)
	}
}
