//go:build browser

package lib_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// TestInstallUIKeepsMatching runs the installer over the web UI CI built
// (llama-install -ui): its inputs and files match, so it is kept.
func TestInstallUIKeepsMatching(t *testing.T) {
	dir := testenv.LibraryDir(t)
	ui, err := lib.UIPath(dir)
	require.NoError(t, err, "build it with `go run ./lib/cmd/llama-install -ui`")
	r, err := lib.InstallUI(context.Background(), lib.UIOptions{Dir: dir, Source: testenv.LlamaSrc(t)})
	require.NoError(t, err)
	assert.False(t, r.Built, "a matching web UI was rebuilt")
	assert.Equal(t, ui, r.Path)
	index, err := os.ReadFile(filepath.Join(ui, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(index), "_app/immutable/")
}

func TestInstallUIErrors(t *testing.T) {
	empty := t.TempDir()
	_, err := lib.InstallUI(context.Background(), lib.UIOptions{Dir: empty, Source: empty})
	assert.ErrorContains(t, err, "not the llama.cpp source")
	_, err = lib.InstallUI(context.Background(), lib.UIOptions{Dir: empty, Source: testenv.LlamaSrc(t), NPM: "no-such-npm"})
	assert.ErrorContains(t, err, "needs node and npm")

	_, err = lib.UIPath(empty)
	require.ErrorIs(t, err, lib.ErrNotFound)
	assert.ErrorContains(t, err, "llama-install -ui")
	require.NoError(t, os.MkdirAll(filepath.Join(empty, lib.UIFolder), 0o755))
	_, err = lib.UIPath(empty)
	require.ErrorIs(t, err, lib.ErrNotFound, "a folder without index.html is no UI")
}
