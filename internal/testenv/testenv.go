// Package testenv locates what the tests need: the shared test models, the
// pinned llama.cpp source (for its header and reference data) and the
// library. Missing pieces fail the test; they are never a reason to skip.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/x/llama/internal/gguf"
)

// RepoRoot returns the folder holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		p := filepath.Dir(d)
		if p == d {
			t.Fatal("testenv: no go.mod above the working folder")
		}
		d = p
	}
}

// ModelsDir returns $LLAMA_TEST_MODELS or ../shared/models beside the repo.
func ModelsDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("LLAMA_TEST_MODELS")
	if d == "" {
		d = filepath.Join(RepoRoot(t), "..", "shared", "models")
	}
	if _, err := os.Stat(filepath.Join(d, "stories260K.gguf")); err != nil {
		t.Fatalf("testenv: test models not found in %s (set LLAMA_TEST_MODELS): %v", d, err)
	}
	return d
}

// Model returns the path of a file in the models folder, failing if absent.
func Model(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(ModelsDir(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return p
}

var (
	srcOnce sync.Once
	srcDir  string
	srcErr  string
)

// LlamaSrc returns the folder of the pinned llama.cpp source: $LLAMA_CPP_SRC,
// or what ../shared/tools/llama-cpp-src prints.
func LlamaSrc(t testing.TB) string {
	t.Helper()
	srcOnce.Do(func() {
		if d := os.Getenv("LLAMA_CPP_SRC"); d != "" {
			srcDir = d
			return
		}
		tool := filepath.Join(RepoRoot(t), "..", "shared", "tools", "llama-cpp-src")
		out, err := exec.Command("bash", tool).Output()
		if err != nil {
			srcErr = "running " + tool + ": " + err.Error()
			return
		}
		srcDir = strings.TrimSpace(string(out))
	})
	if srcDir == "" {
		t.Fatalf("testenv: llama.cpp source not found (set LLAMA_CPP_SRC): %s", srcErr)
	}
	if _, err := os.Stat(filepath.Join(srcDir, "include", "llama.h")); err != nil {
		t.Fatalf("testenv: %s has no include/llama.h: %v", srcDir, err)
	}
	return srcDir
}

// BenchModel returns the path of a random-weight benchmark model of the
// given shape and weight type, with llama-2-tiny-random's 32k vocabulary.
// It is written on first use into the user's cache folder (about 133 MB for
// the 125M shape in Q8_0) and reused; it is never part of the repository.
func BenchModel(tb testing.TB, name string, shape gguf.TinyModelOptions, typ gguf.TensorType) string {
	tb.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "go-llama-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name+"-"+strings.ToLower(typ.String())+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	shape.VocabFrom = Model(tb, "llama-2-tiny-random.gguf")
	shape.Type = typ
	shape.Seed = 1
	tmp := path + ".tmp"
	if err := gguf.WriteTinyModel(tmp, shape); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
	return path
}
