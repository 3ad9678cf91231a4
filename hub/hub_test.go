package hub_test

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
	"github.com/x/llama/hub"
	"github.com/x/llama/internal/hub/hubtest"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testsplit"
)

// TestPullAndLoad pulls stories260K from a fake hub on 127.0.0.1, whole
// and split in three, loads what Pull returns and generates the greedy
// story; a second pull, offline, returns the same file.
func TestPullAndLoad(t *testing.T) {
	model, err := os.ReadFile(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	split := map[string][]byte{}
	for _, p := range testsplit.Stories(t, 3) {
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
			o := hub.Options{Endpoint: h.URL, CacheDir: cache, Progress: hub.ProgressBar(&bar)}
			res, err := hub.PullFiles(context.Background(), tc.ref, o)
			require.NoError(t, err)
			require.Len(t, res.Files, tc.files)
			assert.Contains(t, bar.String(), "100%")
			path, err := hub.Pull(context.Background(), tc.ref, hub.Options{CacheDir: cache, Offline: true})
			require.NoError(t, err)
			assert.Equal(t, res.Model, path)

			m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
			require.NoError(t, err)
			defer m.Close()
			c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
			require.NoError(t, err)
			defer c.Close()
			var out strings.Builder
			for p, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 24}).Seq() {
				require.NoError(t, err)
				out.WriteString(p.Text)
			}
			assert.True(t, strings.HasPrefix(out.String(), ", there was a little girl named Lily"), out.String())
		})
	}
}

// Pull's errors are *llama.Error wrapping a *hub.Error.
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
		o    hub.Options
		is   error
		code hub.Code
	}{
		{"bad reference", context.Background(), "no-slash", hub.Options{}, llama.ErrInvalid, hub.CodeInvalid},
		{"offline, not cached", context.Background(), "tiny/gated", hub.Options{Offline: true, CacheDir: t.TempDir()}, llama.ErrLoad, hub.CodeOffline},
		{"gated, no token", context.Background(), "tiny/gated", hub.Options{Endpoint: h.URL, CacheDir: t.TempDir()}, llama.ErrLoad, hub.CodeAuth},
		{"canceled", ctx, "tiny/gated", hub.Options{Endpoint: h.URL, CacheDir: t.TempDir()}, llama.ErrCanceled, hub.CodeCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HF_TOKEN", "")
			_, err := hub.Pull(tc.ctx, tc.ref, tc.o)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.is)
			var pe *hub.Error
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, tc.code, pe.Code, "%v", err)
			assert.ErrorIs(t, err, &hub.Error{Code: tc.code})
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
	path, err := hub.Pull(context.Background(), "tiny/stories", hub.Options{Endpoint: h.URL, CacheDir: cache})
	require.NoError(t, err)
	list, err := hub.CachedModels(cache)
	require.NoError(t, err)
	require.Equal(t, []hub.CachedModel{{Repo: "tiny/stories", Tag: "F32"}}, list)
	again, err := hub.Pull(context.Background(), list[0].String(), hub.Options{CacheDir: cache, Offline: true})
	require.NoError(t, err)
	assert.Equal(t, path, again)
}

// CacheDir finds the cache as llama.cpp does: $LLAMA_CACHE first.
func TestCacheDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LLAMA_CACHE", dir)
	got, err := hub.CacheDir()
	require.NoError(t, err)
	assert.Equal(t, dir, got)
}
