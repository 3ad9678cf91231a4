//go:build rpc

package lib_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// TestInstallRPCKeepsMatching runs the installer over the RPC backend CI
// built (llama-install -rpc): both files match their inputs and are kept,
// libggml-rpc sits where ggml's loader looks for it, and rpc-server runs
// against the installed libraries.
func TestInstallRPCKeepsMatching(t *testing.T) {
	bin := testenv.RPCServer(t)
	dir := testenv.LibraryDir(t)
	r, err := lib.InstallRPC(context.Background(), lib.RPCOptions{Dir: dir, Source: testenv.LlamaSrc(t)})
	require.NoError(t, err)
	assert.False(t, r.Library.Built, "a matching libggml-rpc was rebuilt")
	assert.False(t, r.Server.Built, "a matching rpc-server was rebuilt")
	assert.Equal(t, bin, r.Server.Path)
	assert.Equal(t, filepath.Join(dir, "libggml-rpc.so"), r.Library.Path)
	p, err := lib.RPCPath(dir)
	require.NoError(t, err)
	assert.Equal(t, r.Library.Path, p)
	// It runs: --help prints its usage.
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	assert.Contains(t, string(out), "--port")
}

func TestInstallRPCErrors(t *testing.T) {
	empty := t.TempDir()
	_, err := lib.InstallRPC(context.Background(), lib.RPCOptions{Dir: empty, Source: testenv.LlamaSrc(t)})
	require.ErrorIs(t, err, lib.ErrNotFound)
	assert.ErrorContains(t, err, "install the library first")

	_, err = lib.InstallRPC(context.Background(), lib.RPCOptions{Dir: testenv.LibraryDir(t), Source: empty})
	assert.ErrorContains(t, err, "not the llama.cpp source")

	_, err = lib.InstallRPC(context.Background(), lib.RPCOptions{Dir: testenv.LibraryDir(t), Source: testenv.LlamaSrc(t),
		CXX: "no-such-c++-compiler", Force: true})
	assert.ErrorContains(t, err, "apt-get install g++")

	for _, f := range []func(string) (string, error){lib.RPCPath, lib.RPCServerPath} {
		_, err = f(empty)
		require.ErrorIs(t, err, lib.ErrNotFound)
		assert.ErrorContains(t, err, "llama-install -rpc")
	}
}
