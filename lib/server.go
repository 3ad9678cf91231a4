package lib

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// ServerFile is the file name InstallServer gives llama-server, beside the
// library's own files.
const ServerFile = "llama-server"

// ServerOptions controls InstallServer. The zero value builds llama-server
// for the CPU build in its cache folder, from $LLAMA_CPP_SRC, with $CXX
// (or c++), on up to two cores, quietly.
type ServerOptions struct {
	// Dir is the folder of the installed library (which must hold libmtmd
	// too, see InstallMTMD), where llama-server goes; empty means
	// DefaultDir(Flavor).
	Dir string
	// Flavor picks the build whose folder Dir defaults to.
	Flavor Flavor
	// Source is the folder of the pinned llama.cpp source; empty means
	// $LLAMA_CPP_SRC.
	Source string
	// CXX is the C++ compiler; empty means $CXX, else c++, g++ or clang++.
	CXX string
	// Jobs is how many files compile at once; 0 means 2 (or 1 on a single
	// core).
	Jobs int
	// Force rebuilds even when the installed llama-server matches.
	Force bool
	// Progress, when set, receives human-readable progress lines.
	Progress io.Writer
}

// ServerResult describes what InstallServer did.
type ServerResult struct {
	// Path is the installed llama-server.
	Path string
	// Built is false when the installed llama-server matched and was kept.
	Built bool
	// BuildTime is how long compiling and linking took (zero when kept).
	BuildTime time.Duration
}

// serverCFlags are the flags every server file compiles with: a Release
// build without the web UI's assets (the reference server is driven
// through its API only).
var serverCFlags = []string{"-O2", "-fPIC", "-DNDEBUG", "-w", "-pthread"}

// InstallServer builds llama.cpp's llama-server, the reference the
// differential tests compare the server package with, and installs it
// beside the library. Only the server's own sources (tools/server of the
// pinned source) are compiled; they are linked against the installed
// libraries (libllama-common, which carries llama.cpp's common code and
// its HTTP library, libmtmd, libllama, libggml, libggml-base), so
// llama-server computes with exactly the ggml and llama code the SDK
// loads, and any difference between the two servers is in the server
// logic. The build is kept while its inputs (sources, headers, flags,
// compiler and the libraries it links) are unchanged. Linux only.
func InstallServer(ctx context.Context, o ServerOptions) (ServerResult, error) {
	if runtime.GOOS != "linux" {
		return ServerResult{}, errors.New("lib: building llama-server is supported on Linux only")
	}
	dir := o.Dir
	if dir == "" {
		d, err := DefaultDir(o.Flavor)
		if err != nil {
			return ServerResult{}, err
		}
		dir = d
	}
	var libs []string
	for _, l := range []string{"llama-common", "mtmd", "llama", "ggml", "ggml-base"} {
		p, err := LibraryPath(dir, l)
		if err != nil {
			return ServerResult{}, fmt.Errorf("lib: llama-server links the installed %s (install the library, "+
				"and libmtmd with InstallMTMD, first): %w", l, err)
		}
		libs = append(libs, p)
	}
	src := o.Source
	if src == "" {
		src = os.Getenv(EnvSource)
	}
	if src == "" {
		return ServerResult{}, fmt.Errorf("lib: building llama-server needs the llama.cpp %s source: set %s",
			Version, EnvSource)
	}
	files, err := serverSources(src)
	if err != nil {
		return ServerResult{}, err
	}
	cxx, err := findCXX(o.CXX)
	if err != nil {
		return ServerResult{}, err
	}
	inputs, err := serverInputs(src, files, cxx, libs)
	if err != nil {
		return ServerResult{}, err
	}
	out := filepath.Join(dir, ServerFile)
	stampPath := out + ".stamp"
	if !o.Force && mtmdMatches(out, stampPath, inputs) {
		progress(o.Progress, "llama: llama-server in %s is up to date", dir)
		return ServerResult{Path: out}, nil
	}

	start := time.Now()
	tmp, err := os.MkdirTemp(dir, ".server-build-*")
	if err != nil {
		return ServerResult{}, fmt.Errorf("lib: %w", err)
	}
	defer os.RemoveAll(tmp)
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = min(2, runtime.NumCPU())
	}
	// The web UI's asset table, empty: llama.cpp's own embedding tool
	// writes it when given no asset folder.
	uiDir := filepath.Join(tmp, "ui")
	if err := os.Mkdir(uiDir, 0o755); err != nil {
		return ServerResult{}, fmt.Errorf("lib: %w", err)
	}
	embed := filepath.Join(tmp, "ui-embed")
	if err := run(ctx, tmp, cxx, "-O1", "-std=c++17", "-o", embed, filepath.Join(src, "tools", "ui", "embed.cpp")); err != nil {
		return ServerResult{}, fmt.Errorf("lib: building the UI embedding tool: %w", err)
	}
	if err := run(ctx, tmp, embed, filepath.Join(uiDir, "ui.cpp"), filepath.Join(uiDir, "ui.h")); err != nil {
		return ServerResult{}, fmt.Errorf("lib: writing the empty UI table: %w", err)
	}
	files = append(files, filepath.Join(uiDir, "ui.cpp"))
	progress(o.Progress, "llama: building llama-server from %s with %s (%d files, %d at a time)", src, cxx, len(files), jobs)
	inc := []string{"tools/server", "tools/mtmd", "common", "include", "ggml/include", "vendor", ".", uiDir}
	objs, err := compileAll(ctx, cxx, src, files, inc, serverCFlags, tmp, jobs, o.Progress)
	if err != nil {
		return ServerResult{}, err
	}
	built := filepath.Join(tmp, ServerFile)
	args := append([]string{"-o", built}, objs...)
	args = append(args, libs...)
	args = append(args, "-pthread", "-Wl,-rpath,$ORIGIN")
	progress(o.Progress, "llama: linking %s", ServerFile)
	if err := run(ctx, tmp, cxx, args...); err != nil {
		return ServerResult{}, fmt.Errorf("lib: linking llama-server: %w", err)
	}
	elapsed := time.Since(start)
	sum, err := fileSHA256(built)
	if err != nil {
		return ServerResult{}, fmt.Errorf("lib: %w", err)
	}
	// In place, where its run path finds the libraries, it must run; a
	// stale stamp goes first, so that a failure leaves no "up to date".
	_ = os.Remove(stampPath)
	if err := os.Rename(built, out); err != nil {
		return ServerResult{}, fmt.Errorf("lib: %w", err)
	}
	if err := run(ctx, dir, out, "--version"); err != nil {
		_ = os.Remove(out)
		return ServerResult{}, fmt.Errorf("lib: the built llama-server does not run: %w", err)
	}
	st, _ := json.MarshalIndent(mtmdStamp{Version: Version, Inputs: inputs, Library: sum,
		BuildSecs: elapsed.Round(time.Second).Seconds()}, "", "  ")
	if err := os.WriteFile(stampPath, append(st, '\n'), 0o644); err != nil {
		return ServerResult{}, fmt.Errorf("lib: %w", err)
	}
	progress(o.Progress, "llama: built and installed %s in %s", out, elapsed.Round(time.Second))
	return ServerResult{Path: out, Built: true, BuildTime: elapsed}, nil
}

// ServerPath returns the llama-server InstallServer installed in dir, or an
// error wrapping ErrNotFound.
func ServerPath(dir string) (string, error) {
	p := filepath.Join(dir, ServerFile)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%w: %s has no %s (build it with llama-install -server)", ErrNotFound, dir, ServerFile)
	}
	return p, nil
}

// serverSources lists the .cpp files of tools/server's server-context and
// llama-server-impl libraries and of the llama-server program, as its
// CMakeLists.txt names them.
func serverSources(src string) ([]string, error) {
	cm := filepath.Join(src, "tools", "server", "CMakeLists.txt")
	b, err := os.ReadFile(cm)
	if err != nil {
		return nil, fmt.Errorf("lib: %s is not the llama.cpp source (no tools/server/CMakeLists.txt): %w", src, err)
	}
	if _, err := os.Stat(filepath.Join(src, "tools", "ui", "embed.cpp")); err != nil {
		return nil, fmt.Errorf("lib: %s is not the llama.cpp source: %w", src, err)
	}
	var files []string
	re := regexp.MustCompile(`(?s)add_(?:library|executable)\s*\(\s*\$\{TARGET\}\s+(.*?)\)`)
	for _, m := range re.FindAllSubmatch(b, -1) {
		for _, f := range strings.Fields(string(m[1])) {
			if strings.HasSuffix(f, ".cpp") {
				files = append(files, filepath.ToSlash(filepath.Join("tools", "server", f)))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("lib: %s lists no sources", cm)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			return nil, fmt.Errorf("lib: llama-server source missing: %w", err)
		}
	}
	return files, nil
}

// serverInputs digests what the build depends on.
func serverInputs(src string, files []string, cxx string, libs []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", Version, strings.Join(serverCFlags, " "), runtime.GOOS+"/"+runtime.GOARCH)
	ver, _ := exec.Command(cxx, "--version").Output()
	h.Write(ver)
	all := append([]string{"tools/ui/embed.cpp"}, files...)
	for _, d := range []string{"tools/server", "tools/mtmd", "common", "common/jinja", "include", "ggml/include",
		"vendor/nlohmann", "vendor/cpp-httplib"} {
		for _, pat := range []string{"*.h", "*.hpp"} {
			hs, _ := filepath.Glob(filepath.Join(src, d, pat))
			for _, p := range hs {
				rel, _ := filepath.Rel(src, p)
				all = append(all, filepath.ToSlash(rel))
			}
		}
	}
	sort.Strings(all)
	for _, f := range all {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("lib: %w", err)
		}
		fmt.Fprintf(h, "%s %x\n", f, sha256.Sum256(b))
	}
	for _, l := range libs {
		s, err := fileSHA256(l)
		if err != nil {
			return "", fmt.Errorf("lib: %w", err)
		}
		fmt.Fprintf(h, "%s %s\n", filepath.Base(l), s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
