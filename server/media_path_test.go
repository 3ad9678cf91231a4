//go:build mtmd

package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// TestMediaPath checks file:// URLs with Options.MediaPath: a file of
// the folder (or of a folder in it) is read as the same image sent
// inline; paths out of the folder (.., absolute, a symbolic link out),
// folders, missing and too large files are refused, as file:// URLs are
// without a media path.
func TestMediaPath(t *testing.T) {
	testenv.MTMD(t)
	proj := filepath.Join(t.TempDir(), "mmproj.gguf")
	require.NoError(t, gguf.WriteTinyProjector(proj, gguf.TinyProjectorOptions{TextEmbd: 64, Seed: 7}))
	dir, outside := t.TempDir(), t.TempDir()
	red, checker := testPNG(t, "red", 40, 40), testPNG(t, "checker", 48, 32)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "red.png"), red, 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "checker.png"), checker, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.png"), red, 0o600))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.png"), filepath.Join(dir, "link.png")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.png"), append(red, make([]byte, 9000)...), 0o600))
	opts := Options{Multimodal: MultimodalOptions{Projector: proj, CPUOnly: true}, MediaPath: dir, MaxBodyBytes: 8192,
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 512}}}
	_, ts := newTestServer(t, opts)
	ask := func(base, url string) (int, map[string]any) {
		return mmPost(t, base+"/v1/chat/completions", chatWith(mmText("Once upon a time"), imagePart(url), mmText(" there was")))
	}
	answer := func(code int, out map[string]any) string {
		require.Equal(t, http.StatusOK, code, "%v", out)
		return out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	}
	assert.Equal(t, answer(ask(ts.URL, dataURLOf("image/png", red))), answer(ask(ts.URL, "file://red.png")))
	assert.Equal(t, answer(ask(ts.URL, dataURLOf("image/png", checker))), answer(ask(ts.URL, "file://sub/checker.png")))
	for _, tc := range []struct{ url, want string }{
		{"file://../" + filepath.Base(outside) + "/secret.png", "not allowed"},
		{"file://" + filepath.Join(outside, "secret.png"), "not allowed"},
		{"file://link.png", "not allowed"},
		{"file://sub", "not a regular file"},
		{"file://missing.png", "does not exist"},
		{"file://big.png", "larger than 8192 bytes"},
		{"file://", "without a file path"},
	} {
		code, out := ask(ts.URL, tc.url)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %v", tc.url, out)
		msg, _ := out["error"].(map[string]any)["message"].(string)
		assert.Contains(t, msg, tc.want, tc.url)
	}

	opts.MediaPath = ""
	_, plain := newTestServer(t, opts)
	code, out := ask(plain.URL, "file://red.png")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.True(t, strings.Contains(out["error"].(map[string]any)["message"].(string), "--media-path"), "%v", out)

	opts.MediaPath = filepath.Join(dir, "red.png")
	_, err := New(t.Context(), opts)
	assert.ErrorContains(t, err, "not a folder")
}
