package llama_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
)

// TestPullAndLoad pulls stories260K from a fake hub on 127.0.0.1, whole
// and split in three, loads what Pull returns and generates the greedy
// story; a second pull, offline, returns the same file.
func TestPullAndLoad(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	split := map[string][]byte{}
	for _, p := range writeSplits(t, 3) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		split[filepath.Base(p)] = b
	}
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/stories260K": {Files: map[string][]byte{"stories260K-F32.gguf": model, "README.md": []byte("stories")}},
		"tiny/split":       {Files: split},
	})
	for _, tc := range []struct {
		ref   string
		files int
	}{
		{"tiny/stories260K", 1},
		{"tiny/stories260K:f32", 1},
		{"tiny/split", 3},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			cache := t.TempDir()
			var bar bytes.Buffer
			o := llama.PullOptions{Endpoint: h.URL, CacheDir: cache, Progress: llama.PullProgressBar(&bar)}
			res, err := llama.PullFiles(context.Background(), tc.ref, o)
			require.NoError(t, err)
			require.Len(t, res.Files, tc.files)
			assert.Contains(t, bar.String(), "100%")
			path, err := llama.Pull(context.Background(), tc.ref, llama.PullOptions{CacheDir: cache, Offline: true})
			require.NoError(t, err)
			assert.Equal(t, res.Model, path)

			m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
			require.NoError(t, err)
			defer m.Close()
			c := newCtx(t, m, llama.ContextOptions{ContextSize: 256})
			out := generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 24})
			assert.True(t, strings.HasPrefix(out, ", there was a little girl named Lily"), out)
		})
	}
}

// Pull's errors are *llama.Error wrapping a *llama.PullError.
func TestPullErrors(t *testing.T) {
	h := hubtest.New(t, map[string]*hubtest.Repo{
		"tiny/gated": {Files: map[string][]byte{"m-Q4_K_M.gguf": []byte("GGUF")}, Gated: true},
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		ref  string
		o    llama.PullOptions
		is   error
		code llama.PullErrorCode
	}{
		{"bad reference", context.Background(), "no-slash", llama.PullOptions{}, llama.ErrInvalid, llama.PullInvalid},
		{"offline, not cached", context.Background(), "tiny/gated", llama.PullOptions{Offline: true, CacheDir: t.TempDir()}, llama.ErrLoad, llama.PullOffline},
		{"gated, no token", context.Background(), "tiny/gated", llama.PullOptions{Endpoint: h.URL, CacheDir: t.TempDir()}, llama.ErrLoad, llama.PullAuth},
		{"canceled", ctx, "tiny/gated", llama.PullOptions{Endpoint: h.URL, CacheDir: t.TempDir()}, llama.ErrCanceled, llama.PullCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HF_TOKEN", "")
			_, err := llama.Pull(tc.ctx, tc.ref, tc.o)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.is)
			var pe *llama.PullError
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, tc.code, pe.Code, "%v", err)
			assert.True(t, strings.HasPrefix(err.Error(), "llama: pull: "), err.Error())
		})
	}
}

// CachedModels lists what Pull put in the cache, as repo:TAG references
// that pull it again offline.
func TestCachedModels(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	h := hubtest.New(t, map[string]*hubtest.Repo{"tiny/stories": {Files: map[string][]byte{"stories260K-F32.gguf": model}}})
	cache := t.TempDir()
	path, err := llama.Pull(context.Background(), "tiny/stories", llama.PullOptions{Endpoint: h.URL, CacheDir: cache})
	require.NoError(t, err)
	list, err := llama.CachedModels(cache)
	require.NoError(t, err)
	require.Equal(t, []llama.CachedModel{{Repo: "tiny/stories", Tag: "F32"}}, list)
	again, err := llama.Pull(context.Background(), list[0].String(), llama.PullOptions{CacheDir: cache, Offline: true})
	require.NoError(t, err)
	assert.Equal(t, path, again)
}
