package lib

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// UIFolder is the name of the folder InstallUI puts llama.cpp's web UI in,
// beside the library's own files. Serve it with the server's --path.
const UIFolder = "llama-ui"

// UIOptions controls InstallUI. The zero value builds the UI into the CPU
// build's cache folder, from $LLAMA_CPP_SRC, with npm from PATH, quietly.
type UIOptions struct {
	// Dir is the folder of the installed library, beside which the UI
	// goes; empty means DefaultDir(Flavor).
	Dir string
	// Flavor picks the build whose folder Dir defaults to.
	Flavor Flavor
	// Source is the folder of the pinned llama.cpp source; empty means
	// $LLAMA_CPP_SRC.
	Source string
	// NPM is the npm program; empty means npm from PATH.
	NPM string
	// Force rebuilds even when the installed UI matches.
	Force bool
	// Progress, when set, receives human-readable progress lines.
	Progress io.Writer
}

// UIResult describes what InstallUI did.
type UIResult struct {
	// Path is the folder of the built UI (its index.html and assets).
	Path string
	// Built is false when the installed UI matched and was kept.
	Built bool
	// BuildTime is how long the build took (zero when kept).
	BuildTime time.Duration
}

// uiStamp is written beside the UI folder: the inputs it was built from
// and the digest of the files built, so that a later install can tell
// whether the installed UI still matches.
type uiStamp struct {
	Version   string  `json:"version"`
	Inputs    string  `json:"inputs"` // digest of tools/ui, node's and npm's versions
	Files     string  `json:"files"`  // digest of the built folder
	BuildSecs float64 `json:"build_seconds"`
}

// uiSkip are the folders of tools/ui that are build products, never inputs.
var uiSkip = map[string]bool{"node_modules": true, "dist": true, ".svelte-kit": true, "build": true}

// InstallUI builds llama.cpp's own web UI (tools/ui of the pinned source,
// a SvelteKit app) into a folder of static files beside the library,
// UIFolder, which the server serves with --path as llama-server does. It
// copies tools/ui to a scratch folder (the source is never written),
// installs the locked packages with npm ci (scripts off), and runs
// svelte-kit sync and vite build there: it needs node and npm, and the
// package registry npm is configured for, and takes a few minutes. The
// built UI is kept while tools/ui and the node and npm versions are
// unchanged (see UIOptions.Force).
func InstallUI(ctx context.Context, o UIOptions) (UIResult, error) {
	dir := o.Dir
	if dir == "" {
		d, err := DefaultDir(o.Flavor)
		if err != nil {
			return UIResult{}, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return UIResult{}, fmt.Errorf("lib: %w", err)
	}
	src := o.Source
	if src == "" {
		src = os.Getenv(EnvSource)
	}
	if src == "" {
		return UIResult{}, fmt.Errorf("lib: building the web UI needs the llama.cpp %s source: set %s", Version, EnvSource)
	}
	uiSrc := filepath.Join(src, "tools", "ui")
	for _, f := range []string{"package.json", "package-lock.json", "svelte.config.js", "vite.config.ts"} {
		if _, err := os.Stat(filepath.Join(uiSrc, f)); err != nil {
			return UIResult{}, fmt.Errorf("lib: %s is not the llama.cpp source (no tools/ui/%s): %w", src, f, err)
		}
	}
	npm := o.NPM
	if npm == "" {
		npm = "npm"
	}
	npm, err := exec.LookPath(npm)
	if err != nil {
		return UIResult{}, fmt.Errorf("lib: building the web UI needs node and npm: %w", err)
	}
	inputs, err := uiInputs(ctx, uiSrc, npm)
	if err != nil {
		return UIResult{}, err
	}
	out := filepath.Join(dir, UIFolder)
	stampPath := out + ".stamp"
	if !o.Force && uiMatches(out, stampPath, inputs) {
		progress(o.Progress, "llama: web UI in %s is up to date", out)
		return UIResult{Path: out}, nil
	}

	start := time.Now()
	tmp, err := os.MkdirTemp(dir, ".ui-build-*")
	if err != nil {
		return UIResult{}, fmt.Errorf("lib: %w", err)
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "ui")
	if err := copyTree(uiSrc, work); err != nil {
		return UIResult{}, fmt.Errorf("lib: copying tools/ui: %w", err)
	}
	bin := filepath.Join(work, "node_modules", ".bin")
	var env []string
	for _, kv := range os.Environ() {
		// The UI's own default output folder, ./dist, whatever the caller's
		// environment says.
		if !strings.HasPrefix(kv, "LLAMA_UI_OUT_DIR=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		// Two threads at most: libuv's pool, and esbuild (a Go program).
		"UV_THREADPOOL_SIZE=2", "GOMAXPROCS=2",
	)
	steps := [][]string{
		{npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"},
		{filepath.Join(bin, "svelte-kit"), "sync"},
		{filepath.Join(bin, "vite"), "build"},
	}
	progress(o.Progress, "llama: building the web UI from %s (npm ci, svelte-kit sync, vite build)", uiSrc)
	for _, s := range steps {
		progress(o.Progress, "llama: %s", strings.Join(append([]string{filepath.Base(s[0])}, s[1:]...), " "))
		if err := runEnv(ctx, work, env, s[0], s[1:]...); err != nil {
			return UIResult{}, fmt.Errorf("lib: building the web UI: %s: %w", strings.Join(s, " "), err)
		}
	}
	built := filepath.Join(work, "dist")
	if _, err := os.Stat(filepath.Join(built, "index.html")); err != nil {
		return UIResult{}, fmt.Errorf("lib: the web UI build made no index.html: %w", err)
	}
	sum, err := treeDigest(built)
	if err != nil {
		return UIResult{}, fmt.Errorf("lib: %w", err)
	}
	elapsed := time.Since(start)
	// The stale stamp goes first, so that a failure leaves no "up to date".
	_ = os.Remove(stampPath)
	old := filepath.Join(tmp, "old")
	if err := os.Rename(out, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return UIResult{}, fmt.Errorf("lib: %w", err)
	}
	if err := os.Rename(built, out); err != nil {
		return UIResult{}, fmt.Errorf("lib: %w", err)
	}
	st, _ := json.MarshalIndent(uiStamp{Version: Version, Inputs: inputs, Files: sum,
		BuildSecs: elapsed.Round(time.Second).Seconds()}, "", "  ")
	if err := os.WriteFile(stampPath, append(st, '\n'), 0o644); err != nil {
		return UIResult{}, fmt.Errorf("lib: %w", err)
	}
	progress(o.Progress, "llama: built the web UI into %s in %s", out, elapsed.Round(time.Second))
	return UIResult{Path: out, Built: true, BuildTime: elapsed}, nil
}

// UIPath returns the folder of the web UI InstallUI built beside the
// library in dir, or an error wrapping ErrNotFound.
func UIPath(dir string) (string, error) {
	p := filepath.Join(dir, UIFolder)
	if fi, err := os.Stat(filepath.Join(p, "index.html")); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%w: %s has no built web UI (build it with llama-install -ui)", ErrNotFound, dir)
	}
	return p, nil
}

// uiInputs digests what the build depends on: the version, every file of
// tools/ui but build products, and the versions of node and npm.
func uiInputs(ctx context.Context, uiSrc, npm string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", Version)
	for _, c := range [][]string{{"node", "--version"}, {npm, "--version"}} {
		b, err := exec.CommandContext(ctx, c[0], c[1:]...).Output()
		if err != nil {
			return "", fmt.Errorf("lib: building the web UI needs node and npm: %s: %w", c[0], err)
		}
		fmt.Fprintf(h, "%s %s\n", filepath.Base(c[0]), strings.TrimSpace(string(b)))
	}
	sum, err := treeDigest(uiSrc)
	if err != nil {
		return "", fmt.Errorf("lib: %w", err)
	}
	fmt.Fprintf(h, "tools/ui %s\n", sum)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func uiMatches(out, stampPath, inputs string) bool {
	b, err := os.ReadFile(stampPath)
	if err != nil {
		return false
	}
	var st uiStamp
	if json.Unmarshal(b, &st) != nil || st.Inputs != inputs || st.Version != Version {
		return false
	}
	sum, err := treeDigest(out)
	return err == nil && sum == st.Files
}

// treeDigest digests the regular files under root (their paths and
// contents), leaving out the folders of uiSkip.
func treeDigest(root string) (string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && uiSkip[d.Name()] {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		s, err := fileSHA256(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %s\n", f, s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyTree copies the folders and regular files under src to dst, leaving
// out the folders of uiSkip.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if p != src && uiSkip[d.Name()] {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return nil
	})
}

// runEnv runs a program in dir with env, as run does.
func runEnv(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 4000 {
			msg = "..." + msg[len(msg)-4000:]
		}
		return fmt.Errorf("%w: %s", err, msg)
	}
	return nil
}
