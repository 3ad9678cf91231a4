//go:build unix

package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub"
	"github.com/x/llama/internal/hub/hubtest"
)

// While another process (here: this test) holds huggingface_hub's lock of
// a blob (.locks/models--org--repo/<sha256>.lock), a pull does not write
// that blob; once the lock is released, it does.
func TestPullWaitsForTheBlobLock(t *testing.T) {
	h := newHub(t)
	cache := t.TempDir()
	want := h.Repos()["org/dropped"].Files["drop-Q4_K_M.gguf"]
	lock := filepath.Join(cache, ".locks", "models--org--dropped", hubtest.SHA256(want)+".lock")
	require.NoError(t, os.MkdirAll(filepath.Dir(lock), 0o755))
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = hub.Pull(ctx, "org/dropped", opts(h, cache))
	assert.Equal(t, hub.CodeCanceled, codeOf(t, err), "%v", err)
	for _, r := range h.Requests() {
		assert.False(t, strings.Contains(r.Path, "/resolve/"), "downloaded under another's lock: %+v", r)
	}

	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
	res, err := hub.Pull(context.Background(), "org/dropped", opts(h, cache))
	require.NoError(t, err)
	assert.FileExists(t, res.Model)
}
