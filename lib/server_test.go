//go:build realmodel

package lib_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// TestInstallServerKeepsMatching runs the installer over the llama-server
// CI built (llama-install -server): its inputs match, so it is kept, and it
// runs against the installed libraries.
func TestInstallServerKeepsMatching(t *testing.T) {
	bin := testenv.LlamaServer(t)
	dir := testenv.LibraryDir(t)
	r, err := lib.InstallServer(context.Background(), lib.ServerOptions{Dir: dir, Source: testenv.LlamaSrc(t)})
	require.NoError(t, err)
	assert.False(t, r.Built, "a matching llama-server was rebuilt")
	assert.Equal(t, bin, r.Path)
	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "version:")
}

func TestInstallServerErrors(t *testing.T) {
	empty := t.TempDir()
	_, err := lib.InstallServer(context.Background(), lib.ServerOptions{Dir: empty, Source: testenv.LlamaSrc(t)})
	require.ErrorIs(t, err, lib.ErrNotFound)
	assert.ErrorContains(t, err, "llama-common")

	_, err = lib.InstallServer(context.Background(), lib.ServerOptions{Dir: testenv.LibraryDir(t), Source: empty})
	assert.ErrorContains(t, err, "not the llama.cpp source")

	_, err = lib.ServerPath(empty)
	require.ErrorIs(t, err, lib.ErrNotFound)
	assert.ErrorContains(t, err, "llama-install -server")
	require.NoError(t, os.Mkdir(filepath.Join(empty, lib.ServerFile), 0o755))
	_, err = lib.ServerPath(empty)
	require.ErrorIs(t, err, lib.ErrNotFound, "a folder is no llama-server")
}
