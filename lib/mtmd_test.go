//go:build mtmd

package lib_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// TestInstallMTMDKeepsMatching runs the installer over the libmtmd the
// tests use (built by CI's llama-install -mtmd, or by testenv): it matches
// its inputs, so it is kept, not rebuilt, and it exports mtmd.h's functions.
func TestInstallMTMDKeepsMatching(t *testing.T) {
	testenv.MTMD(t)
	dir := testenv.LibraryDir(t)
	src := testenv.LlamaSrc(t)
	r, err := lib.InstallMTMD(context.Background(), lib.MTMDOptions{Dir: dir, Source: src})
	require.NoError(t, err)
	assert.False(t, r.Built, "a matching libmtmd was rebuilt")
	p, err := lib.MTMDPath(dir)
	require.NoError(t, err)
	assert.Equal(t, p, r.Path)
	assert.Equal(t, filepath.Join(dir, lib.MTMDFile()), p)
	require.NoError(t, lib.CheckMTMD(p, src))
	// libllama is no libmtmd.
	llama, err := lib.LibraryPath(dir, "llama")
	require.NoError(t, err)
	err = lib.CheckMTMD(llama, src)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mtmd_init_from_file")
}

// TestMTMDSymbols holds the functions the installer requires against a
// plain reading of the headers' MTMD_API lines.
func TestMTMDSymbols(t *testing.T) {
	src := testenv.LlamaSrc(t)
	syms, err := lib.MTMDSymbols(src)
	require.NoError(t, err)
	for _, s := range []string{"mtmd_init_from_file", "mtmd_tokenize", "mtmd_helper_eval_chunks",
		"mtmd_helper_bitmap_init_from_buf", "mtmd_context_params_default", "mtmd_support_vision"} {
		assert.Contains(t, syms, s)
	}
	assert.NotContains(t, syms, "mtmd_get_memory_usage", "a C++ function (mangled) is not required")
	want := map[string]bool{}
	name := regexp.MustCompile(`\b(mtmd_[a-z0-9_]+)\s*\(`)
	for _, h := range []string{"mtmd.h", "mtmd-helper.h"} {
		b, err := os.ReadFile(filepath.Join(src, "tools", "mtmd", h))
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			// declarations, not the macro's definition nor C++ (std::) helpers
			if m := name.FindStringSubmatch(line); m != nil && strings.Contains(line, "MTMD_API") &&
				!strings.Contains(line, "define") && !strings.Contains(line, "std::") {
				want[m[1]] = true
			}
		}
	}
	got := map[string]bool{}
	for _, s := range syms {
		got[s] = true
	}
	assert.Equal(t, want, got)
}

func TestInstallMTMDErrors(t *testing.T) {
	dir := testenv.LibraryDir(t)
	src := testenv.LlamaSrc(t)
	notSource := t.TempDir()
	tests := []struct {
		name string
		opts lib.MTMDOptions
		want []string
	}{
		{"no compiler", lib.MTMDOptions{Dir: dir, Source: src, CXX: "no-such-c++-compiler", Force: true},
			[]string{"C++", "apt-get install g++"}},
		{"not the source", lib.MTMDOptions{Dir: dir, Source: notSource, Force: true},
			[]string{"is not the llama.cpp source"}},
		{"no library in the folder", lib.MTMDOptions{Dir: t.TempDir(), Source: src, Force: true},
			[]string{"install the library before libmtmd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lib.InstallMTMD(context.Background(), tt.opts)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("no source", func(t *testing.T) {
		t.Setenv(lib.EnvSource, "")
		_, err := lib.InstallMTMD(context.Background(), lib.MTMDOptions{Dir: dir, Force: true})
		require.Error(t, err)
		assert.True(t, strings.Contains(err.Error(), lib.EnvSource), err.Error())
	})
}
