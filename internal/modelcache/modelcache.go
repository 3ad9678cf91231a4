// Package modelcache names the real models of the tests and finds them in
// their cache folder. It is apart from internal/realmodel, which fetches
// and converts them, so that testenv can find them without importing the
// GGUF code (whose own tests use testenv).
//
// The cache folder is $GO_LLAMA_MODEL_CACHE, else "models" under the
// library cache ($GO_LLAMA_LIB_CACHE, else the user cache folder's
// go-llama).
package modelcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/x/llama/lib"
)

// EnvCache overrides the cache folder of the real models.
const EnvCache = "GO_LLAMA_MODEL_CACHE"

// FetchCommand is the command that fetches the models into the cache.
const FetchCommand = "go run ./internal/cmd/testmodels"

// Entry is one model of the cache.
type Entry struct {
	// Name is how tests ask for the model ("gemma3-270m").
	Name string
	// File is the GGUF file's name in the cache folder.
	File string
	// Size is the GGUF file's size in bytes (its content is checked when
	// it is fetched).
	Size int64
}

// The models of the cache.
var (
	Gemma3 = Entry{Name: "gemma3-270m", File: "gemma-3-270m-q4_k_m.gguf", Size: 253113024}
	MiniLM = Entry{Name: "all-minilm-l6-v2", File: "all-minilm-l6-v2-f32.gguf", Size: 90897920}
)

// Entries are every model of the cache.
var Entries = []Entry{Gemma3, MiniLM}

// ByName returns the entry called name.
func ByName(name string) (Entry, error) {
	var names []string
	for _, e := range Entries {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return Entry{}, fmt.Errorf("modelcache: no model %q (have %s)", name, strings.Join(names, ", "))
}

// Dir returns the folder the models are kept in.
func Dir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return d, nil
	}
	c, err := lib.CacheDir()
	if err != nil {
		return "", fmt.Errorf("modelcache: %w (or set %s)", err, EnvCache)
	}
	return filepath.Join(c, "models"), nil
}

// ErrMissing is wrapped by Path's error when a model is not in the cache
// (or not the pinned file).
var ErrMissing = errors.New("modelcache: model missing from the cache")

// Path returns the cached GGUF of the model, checking its size.
func (e Entry) Path() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, e.File)
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v; fetch it with `%s`", ErrMissing, e.Name, err, FetchCommand)
	}
	if st.Size() != e.Size {
		return "", fmt.Errorf("%w: %s is %d bytes, not the pinned %d; fetch it again with `%s`",
			ErrMissing, p, st.Size(), e.Size, FetchCommand)
	}
	return p, nil
}
