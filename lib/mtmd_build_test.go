//go:build mtmdbuild

package lib_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// TestBuildMTMD runs the libmtmd builder from scratch (minutes on two
// cores): into a folder holding links to the installed library's files, it
// compiles and links libmtmd from the pinned source, the result exports
// mtmd.h's functions, and a second install keeps it. It runs only with
// -tags mtmdbuild; a missing compiler or source fails it.
func TestBuildMTMD(t *testing.T) {
	testenv.CC(t)
	libDir := testenv.LibraryDir(t)
	src := testenv.LlamaSrc(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(libDir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() || strings.Contains(e.Name(), "mtmd") || strings.Contains(e.Name(), "server") {
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(libDir, e.Name()), filepath.Join(dir, e.Name())))
	}
	_, err = lib.MTMDPath(dir)
	require.Error(t, err, "the folder starts without libmtmd")

	var progress bytes.Buffer
	r, err := lib.InstallMTMD(context.Background(), lib.MTMDOptions{Dir: dir, Source: src, Progress: &progress})
	require.NoError(t, err, "%s", progress.String())
	assert.True(t, r.Built)
	assert.Equal(t, filepath.Join(dir, lib.MTMDFile()), r.Path)
	require.NoError(t, lib.CheckMTMD(r.Path, src))

	again, err := lib.InstallMTMD(context.Background(), lib.MTMDOptions{Dir: dir, Source: src})
	require.NoError(t, err)
	assert.False(t, again.Built, "a matching libmtmd is kept")
	assert.Equal(t, r.Path, again.Path)
}
