package lib

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFindOrder(t *testing.T) {
	explicit, env, cache := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv(EnvCache, cache)
	cacheDir, err := DefaultDir(CPU)
	require.NoError(t, err)
	for _, d := range []string{explicit, env, cacheDir} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, LibraryFile()), nil, 0o644))
	}
	t.Setenv(EnvDir, env)
	d, err := Find(explicit, CPU)
	require.NoError(t, err)
	assert.Equal(t, explicit, d, "an explicit folder comes first")
	d, err = Find("", CPU)
	require.NoError(t, err)
	assert.Equal(t, env, d, "then $LLAMA_LIB_DIR")
	t.Setenv(EnvDir, "")
	d, err = Find("", CPU)
	require.NoError(t, err)
	assert.Equal(t, cacheDir, d, "then the cache")

	// A named folder without the library is an error, not a fallback.
	_, err = Find(t.TempDir(), CPU)
	assert.ErrorIs(t, err, ErrNotFound)
	t.Setenv(EnvDir, t.TempDir())
	_, err = Find("", CPU)
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestPackageFor(t *testing.T) {
	p, err := PackageFor("linux", "amd64", CPU)
	require.NoError(t, err)
	assert.Equal(t, "@node-llama-cpp/linux-x64", p.Name)
	assert.Len(t, p.SHA256, 64)
	p, err = PackageFor("linux", "amd64", CUDA)
	require.NoError(t, err)
	assert.Equal(t, "@node-llama-cpp/linux-x64-cuda", p.Name)
	_, err = PackageFor("plan9", "386", CPU)
	assert.Error(t, err)
}

func tgz(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestUntarFolder(t *testing.T) {
	dst := t.TempDir()
	n, err := untarFolder(tgz(t, map[string]string{
		"package/bins/x/libllama.so":   "lib",
		"package/bins/x/../../../evil": "no",
		"package/bins/x/sub/deep.so":   "no",
		"package/other.txt":            "no",
	}), "package/bins/x/", dst)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	b, err := os.ReadFile(filepath.Join(dst, "libllama.so"))
	require.NoError(t, err)
	assert.Equal(t, "lib", string(b))
	_, err = os.Stat(filepath.Join(filepath.Dir(filepath.Dir(dst)), "evil"))
	assert.True(t, os.IsNotExist(err))
}

// fakeNPM writes an npm stand-in whose "pack" produces the given tarball
// and whose "view" fails, so Install takes the npm pack path.
func fakeNPM(t *testing.T, tarball []byte) string {
	dir := t.TempDir()
	tb := filepath.Join(dir, "pkg.tgz")
	require.NoError(t, os.WriteFile(tb, tarball, 0o644))
	script := "#!/bin/sh\nif [ \"$1\" = pack ]; then cp " + tb + " ./pkg.tgz; echo pkg.tgz; exit 0; fi\nexit 1\n"
	p := filepath.Join(dir, "npm")
	require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// TestInstallVerifiesChecksum installs for linux/amd64 whatever the running
// platform, since that is the package with a pinned checksum.
func TestInstallVerifiesChecksum(t *testing.T) {
	pkg, err := PackageFor("linux", "amd64", CPU)
	require.NoError(t, err)
	bad := tgz(t, map[string]string{"package/" + pkg.Folder + "/" + libFile("linux", "llama"): "not the real thing"})
	_, err = install(context.Background(), InstallOptions{Dir: filepath.Join(t.TempDir(), "lib"), NPM: fakeNPM(t, bad)}, "linux", "amd64")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "checksum mismatch")
	sum := sha256.Sum256(bad)
	assert.Contains(t, err.Error(), hex.EncodeToString(sum[:]))
}

func TestInstallIntoExistingFolderIsANoop(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, LibraryFile()), nil, 0o644))
	d, err := Install(context.Background(), InstallOptions{Dir: dir, NPM: "/nonexistent/npm"})
	require.NoError(t, err)
	assert.Equal(t, dir, d)
}

// LLAMA_CACHE is llama.cpp's model cache: the library cache has its own
// variable and never follows LLAMA_CACHE.
func TestCacheDirVariable(t *testing.T) {
	user, err := os.UserCacheDir()
	require.NoError(t, err)
	mine, models := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		name          string
		lib, llamaEnv string
		want          string
	}{
		{"default", "", "", filepath.Join(user, "go-llama")},
		{"LLAMA_CACHE ignored", "", models, filepath.Join(user, "go-llama")},
		{"GO_LLAMA_LIB_CACHE", mine, "", mine},
		{"both", mine, models, mine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GO_LLAMA_LIB_CACHE", tc.lib)
			t.Setenv("LLAMA_CACHE", tc.llamaEnv)
			got, err := CacheDir()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestInstallGPUFlavors: the npm GPU builds for Linux name their libraries
// with the flavor (libllama.vulkan.v0.4.0.so): installed from a package
// laid out as node-llama-cpp's, the folder is found and its libraries and
// GPU backend listed. The Vulkan package's checksum is pinned; the CUDA
// one's is left to the npm client.
func TestInstallGPUFlavors(t *testing.T) {
	for _, tc := range []struct {
		flavor  Flavor
		wantErr string
	}{
		{Vulkan, "checksum mismatch"},
		{CUDA, ""},
	} {
		t.Run(string(tc.flavor), func(t *testing.T) {
			pkg, err := PackageFor("linux", "amd64", tc.flavor)
			require.NoError(t, err)
			f := string(tc.flavor)
			files := map[string]string{}
			for _, name := range []string{"libllama." + f + "." + Version + ".so", "libggml." + f + "." + Version + ".so",
				"libggml-base.so", "libggml-cpu-x64.so", "libggml-" + f + ".so"} {
				files["package/"+pkg.Folder+"/"+name] = name
			}
			dir := filepath.Join(t.TempDir(), "lib")
			_, err = install(context.Background(), InstallOptions{Dir: dir, Flavor: tc.flavor, NPM: fakeNPM(t, tgz(t, files))}, "linux", "amd64")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			for _, l := range libraries {
				p, err := libraryPath("linux", dir, l)
				require.NoError(t, err, l)
				assert.Contains(t, filepath.Base(p), l)
			}
			p, err := libraryPath("linux", dir, "llama")
			require.NoError(t, err)
			assert.Equal(t, "libllama."+f+"."+Version+".so", filepath.Base(p))
			assert.Equal(t, []string{filepath.Join(dir, "libggml-"+f+".so")}, gpuBackendFiles("linux", dir))
		})
	}
	assert.Empty(t, gpuBackendFiles("linux", t.TempDir()), "a CPU build has no GPU backend")
}
