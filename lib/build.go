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
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

// BuildOptions controls the builds from the pinned llama.cpp source
// (InstallMTMD, InstallServer, InstallRPC). The zero value builds for the
// CPU build in its cache folder, from $LLAMA_CPP_SRC, with $CXX (or c++),
// on up to two cores, quietly.
type BuildOptions struct {
	// Dir is the folder of the installed library, where the build goes;
	// empty means DefaultDir(Flavor). It must hold the libraries the build
	// links.
	Dir string
	// Flavor picks the build whose folder Dir defaults to.
	Flavor Flavor
	// Source is the folder of the pinned llama.cpp source; empty means
	// $LLAMA_CPP_SRC.
	Source string
	// CXX is the C++ compiler; empty means $CXX, else c++, g++ or clang++
	// from PATH.
	CXX string
	// Jobs is how many files compile at once; 0 means 2 (or 1 on a single
	// core).
	Jobs int
	// Force rebuilds even when the installed build matches its inputs.
	Force bool
	// Progress, when set, receives human-readable progress lines.
	Progress io.Writer
}

// BuildResult describes what a build from the source did.
type BuildResult struct {
	// Path is the installed file.
	Path string
	// Built is false when the installed file matched and was kept.
	Built bool
	// BuildTime is how long compiling and linking took (zero when kept).
	BuildTime time.Duration
}

// MTMDOptions controls InstallMTMD.
type MTMDOptions = BuildOptions

// MTMDResult describes what InstallMTMD did.
type MTMDResult = BuildResult

// ServerOptions controls InstallServer.
type ServerOptions = BuildOptions

// ServerResult describes what InstallServer did.
type ServerResult = BuildResult

// buildStep is one file built from the source: which sources, against
// which installed libraries, with which flags, and how it is linked and
// checked. build runs it.
type buildStep struct {
	what    string                 // for messages: "libmtmd", "llama-server"
	file    string                 // the installed file's name
	osOK    func(goos string) bool // where it builds; noOS is the error elsewhere
	noOS    string
	links   []string // installed libraries it needs, by LibraryPath name
	noLib   func(name string, err error) error
	noSrc   string   // the error when no source folder is given
	tmpPat  string   // os.MkdirTemp pattern
	flags   []string // compile flags
	inc     []string // include folders, relative to the source
	sources func(src string) ([]string, error)
	inputs  func(src string, files []string, cxx string, libs map[string]string) (string, error)
	// prepare, when set, writes generated sources into tmp and returns
	// them and the folders to include.
	prepare func(ctx context.Context, tmp, cxx, src string) (files, inc []string, err error)
	// linkArgs returns the linker's arguments for the objects.
	linkArgs func(built string, objs []string, libs map[string]string) []string
	// check, when set, vets the linked file before it is installed.
	check func(built, src string) error
	// runVersion runs the installed file with --version before stamping it.
	runVersion bool
}

// buildStamp is written beside a built file: the inputs it was built from
// and the digest of the result, so that a later install can tell whether
// the installed file still matches.
type buildStamp struct {
	Version   string  `json:"version"`
	Inputs    string  `json:"inputs"`  // digest of sources, headers, flags, compiler and linked libraries
	Library   string  `json:"library"` // sha256 of the built file
	BuildSecs float64 `json:"build_seconds"`
}

// build compiles s from the pinned source into o.Dir, unless the file
// there matches the inputs.
func build(ctx context.Context, o BuildOptions, s buildStep) (BuildResult, error) {
	if !s.osOK(runtime.GOOS) {
		return BuildResult{}, errors.New(s.noOS)
	}
	dir := o.Dir
	if dir == "" {
		d, err := DefaultDir(o.Flavor)
		if err != nil {
			return BuildResult{}, err
		}
		dir = d
	}
	libs := map[string]string{}
	for _, l := range s.links {
		p, err := LibraryPath(dir, l)
		if err != nil {
			return BuildResult{}, s.noLib(l, err)
		}
		libs[l] = p
	}
	src := o.Source
	if src == "" {
		src = os.Getenv(EnvSource)
	}
	if src == "" {
		return BuildResult{}, errors.New(s.noSrc)
	}
	files, err := s.sources(src)
	if err != nil {
		return BuildResult{}, err
	}
	cxx, err := findCXX(o.CXX)
	if err != nil {
		return BuildResult{}, err
	}
	inputs, err := s.inputs(src, files, cxx, libs)
	if err != nil {
		return BuildResult{}, err
	}
	out := filepath.Join(dir, s.file)
	stampPath := out + ".stamp"
	if !o.Force && stampMatches(out, stampPath, inputs) {
		progress(o.Progress, "llama: %s in %s is up to date", s.what, dir)
		return BuildResult{Path: out}, nil
	}

	start := time.Now()
	tmp, err := os.MkdirTemp(dir, s.tmpPat)
	if err != nil {
		return BuildResult{}, fmt.Errorf("lib: %w", err)
	}
	defer os.RemoveAll(tmp)
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = min(2, runtime.NumCPU())
	}
	inc := s.inc
	if s.prepare != nil {
		more, moreInc, err := s.prepare(ctx, tmp, cxx, src)
		if err != nil {
			return BuildResult{}, err
		}
		files = append(files, more...)
		inc = append(slices.Clone(inc), moreInc...)
	}
	progress(o.Progress, "llama: building %s from %s with %s (%d files, %d at a time)", s.what, src, cxx, len(files), jobs)
	objs, err := compileAll(ctx, cxx, src, files, inc, s.flags, tmp, jobs, o.Progress)
	if err != nil {
		return BuildResult{}, err
	}
	built := filepath.Join(tmp, s.file)
	progress(o.Progress, "llama: linking %s", s.file)
	if err := run(ctx, tmp, cxx, s.linkArgs(built, objs, libs)...); err != nil {
		return BuildResult{}, fmt.Errorf("lib: linking %s: %w", s.what, err)
	}
	if s.check != nil {
		if err := s.check(built, src); err != nil {
			return BuildResult{}, err
		}
	}
	elapsed := time.Since(start)
	sum, err := fileSHA256(built)
	if err != nil {
		return BuildResult{}, fmt.Errorf("lib: %w", err)
	}
	// A stale stamp goes first, so that a failure leaves no "up to date".
	_ = os.Remove(stampPath)
	if err := os.Rename(built, out); err != nil {
		return BuildResult{}, fmt.Errorf("lib: %w", err)
	}
	if s.runVersion {
		// In place, where its run path finds the libraries, it must run.
		if err := run(ctx, dir, out, "--version"); err != nil {
			_ = os.Remove(out)
			return BuildResult{}, fmt.Errorf("lib: the built %s does not run: %w", s.what, err)
		}
	}
	st, _ := json.MarshalIndent(buildStamp{Version: Version, Inputs: inputs, Library: sum,
		BuildSecs: elapsed.Round(time.Second).Seconds()}, "", "  ")
	if err := os.WriteFile(stampPath, append(st, '\n'), 0o644); err != nil {
		return BuildResult{}, fmt.Errorf("lib: %w", err)
	}
	progress(o.Progress, "llama: built and installed %s in %s", out, elapsed.Round(time.Second))
	return BuildResult{Path: out, Built: true, BuildTime: elapsed}, nil
}

func stampMatches(file, stampPath, inputs string) bool {
	b, err := os.ReadFile(stampPath)
	if err != nil {
		return false
	}
	var st buildStamp
	if json.Unmarshal(b, &st) != nil || st.Inputs != inputs || st.Version != Version {
		return false
	}
	sum, err := fileSHA256(file)
	return err == nil && sum == st.Library
}

// inputLib is a library a build links, by the name its digest records.
type inputLib struct{ name, path string }

// sortedLibs lists libs (link name to path) by name.
func sortedLibs(libs map[string]string) []inputLib {
	out := make([]inputLib, 0, len(libs))
	for n, p := range libs {
		out = append(out, inputLib{n, p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// digestInputs digests what a build depends on, so that a build is kept
// while they are unchanged: the version, the flags, the platform, the
// compiler's identity, the source files, the headers (patterns, "*.h"
// when nil) of headerDirs, and the libraries it links, in the order given.
func digestInputs(src string, files []string, cxx string, flags, headerDirs, headerPatterns []string, libs []inputLib) (string, error) {
	if cxx == "" {
		return "", errors.New("lib: no compiler")
	}
	if headerPatterns == nil {
		headerPatterns = []string{"*.h"}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", Version, strings.Join(flags, " "), runtime.GOOS+"/"+runtime.GOARCH)
	ver, _ := exec.Command(cxx, "--version").Output()
	h.Write(ver)
	all := append([]string(nil), files...)
	for _, d := range headerDirs {
		for _, pat := range headerPatterns {
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
		s, err := fileSHA256(l.path)
		if err != nil {
			return "", fmt.Errorf("lib: %w", err)
		}
		fmt.Fprintf(h, "%s %s\n", l.name, s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
