package lib

import (
	"bytes"
	"context"
	"debug/elf"
	"debug/macho"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
)

// EnvSource is the environment variable naming the folder of the pinned
// llama.cpp source (a checkout of the release tag), which InstallMTMD
// compiles libmtmd from.
const EnvSource = "LLAMA_CPP_SRC"

// MTMDFile is the file name InstallMTMD gives libmtmd on the running
// platform, beside the library's own files.
func MTMDFile() string { return libFile(runtime.GOOS, "mtmd") }

// MTMDPath returns the path of the libmtmd installed in dir (the folder of
// the library), or an error wrapping ErrNotFound.
func MTMDPath(dir string) (string, error) { return LibraryPath(dir, "mtmd") }

// mtmdCFlags are the flags every file compiles with: what llama.cpp's own
// CMake build of the mtmd target sets for a shared Release build (without
// the video helper, which needs ffmpeg at run time).
var mtmdCFlags = []string{"-O2", "-fPIC", "-DNDEBUG", "-DLLAMA_BUILD", "-DLLAMA_SHARED", "-w", "-pthread"}

// InstallMTMD compiles libmtmd (llama.cpp's multimodal library,
// tools/mtmd of the pinned source) against the pinned headers, links it
// against the installed libllama, libggml and libggml-base, and installs
// it beside them, where it finds them at run time. The npm packages of the
// library carry no libmtmd, hence the build; it needs a C++17 compiler
// (apt-get install g++) and the source (o.Source or $LLAMA_CPP_SRC), and
// takes a few minutes on two cores. A libmtmd already installed from the
// same inputs is kept (see MTMDOptions.Force). The result is checked to
// export every function mtmd.h and mtmd-helper.h declare. Linux and macOS
// only.
func InstallMTMD(ctx context.Context, o MTMDOptions) (MTMDResult, error) {
	return build(ctx, o, mtmdStep)
}

var mtmdStep = buildStep{
	what: "libmtmd", file: MTMDFile(), tmpPat: ".mtmd-build-*",
	osOK: func(goos string) bool { return goos != "windows" }, noOS: "lib: building libmtmd is not supported on Windows",
	links: libraries,
	noLib: func(_ string, err error) error { return fmt.Errorf("lib: install the library before libmtmd: %w", err) },
	noSrc: fmt.Sprintf("lib: building libmtmd needs the llama.cpp %s source: set %s to a checkout of "+
		"the %s tag (it needs tools/mtmd, include, ggml/include and vendor)", Version, EnvSource, Version),
	flags:   mtmdCFlags,
	inc:     []string{"tools/mtmd", "include", "ggml/include", "vendor", "vendor/hash"},
	sources: mtmdSources,
	inputs: func(src string, files []string, cxx string, libs map[string]string) (string, error) {
		return digestInputs(src, files, cxx, mtmdCFlags, []string{"tools/mtmd", "tools/mtmd/models", "tools/mtmd/debug",
			"include", "ggml/include", "vendor/hash", "vendor/stb", "vendor/miniaudio"}, nil, []inputLib{{"libllama", libs["llama"]}})
	},
	linkArgs: func(built string, objs []string, libs map[string]string) []string {
		args := []string{"-shared", "-o", built}
		args = append(args, objs...)
		args = append(args, libs["llama"], libs["ggml"], libs["ggml-base"], "-pthread")
		if runtime.GOOS == "darwin" {
			return append(args, "-Wl,-install_name,@rpath/"+MTMDFile(), "-Wl,-rpath,@loader_path")
		}
		return append(args, "-Wl,-soname,"+MTMDFile(), "-Wl,-rpath,$ORIGIN", "-Wl,--no-undefined")
	},
	check: CheckMTMD,
}

// mtmdSources lists the files of the mtmd library target: the .cpp files
// its CMakeLists.txt lists in add_library(mtmd ...), and the vendored hash
// sources it links (vendor::hash).
func mtmdSources(src string) ([]string, error) {
	cm := filepath.Join(src, "tools", "mtmd", "CMakeLists.txt")
	b, err := os.ReadFile(cm)
	if err != nil {
		return nil, fmt.Errorf("lib: %s is not the llama.cpp source (no tools/mtmd/CMakeLists.txt): %w", src, err)
	}
	for _, need := range []string{"include/llama.h", "ggml/include/ggml.h", "tools/mtmd/mtmd.h", "vendor/stb/stb_image.h"} {
		if _, err := os.Stat(filepath.Join(src, need)); err != nil {
			return nil, fmt.Errorf("lib: %s is not the llama.cpp source: %w", src, err)
		}
	}
	m := regexp.MustCompile(`(?s)add_library\s*\(\s*mtmd\s+(.*?)\)`).FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("lib: %s has no add_library(mtmd ...)", cm)
	}
	var files []string
	for _, f := range strings.Fields(string(m[1])) {
		if strings.HasSuffix(f, ".cpp") {
			files = append(files, filepath.ToSlash(filepath.Join("tools", "mtmd", f)))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("lib: add_library(mtmd ...) of %s lists no sources", cm)
	}
	for _, f := range []string{"vendor/hash/hash.cpp", "vendor/hash/xxhash/xxhash.c", "vendor/hash/sha1/sha1.c",
		"vendor/hash/sha256/sha256.c"} {
		if _, err := os.Stat(filepath.Join(src, f)); err == nil {
			files = append(files, f)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			return nil, fmt.Errorf("lib: libmtmd source missing: %w", err)
		}
	}
	return files, nil
}

// findCXX returns the C++ compiler to use.
func findCXX(cxx string) (string, error) {
	cands := []string{cxx}
	if cxx == "" {
		cands = []string{os.Getenv("CXX"), "c++", "g++", "clang++"}
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", errors.New("lib: building from the llama.cpp source needs a C++17 compiler and none was found " +
		"(apt-get install g++, or set CXX)")
}

// compileAll compiles the files (relative to src, or absolute) into
// objects in dir with the flags and the include folders (relative to src,
// or absolute), jobs at a time, stopping at the first failure.
func compileAll(ctx context.Context, cxx, src string, files, incDirs, flags []string, dir string, jobs int, w io.Writer) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var inc []string
	for _, d := range incDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(src, d)
		}
		inc = append(inc, "-I", d)
	}
	objs := make([]string, len(files))
	work := make(chan int)
	var mu sync.Mutex
	var firstErr error
	done := 0
	var wg sync.WaitGroup
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				f := files[i]
				obj := filepath.Join(dir, fmt.Sprintf("%03d-%s.o", i, strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))))
				var args []string
				switch {
				case strings.HasSuffix(f, ".cpp"):
					args = []string{"-x", "c++", "-std=c++17"}
				case strings.HasSuffix(f, "sha1.c"):
					// compiled as C++, as llama.cpp's build does (it is in a namespace)
					args = []string{"-x", "c++", "-std=c++17"}
				default:
					args = []string{"-x", "c", "-std=c11"}
				}
				args = append(args, flags...)
				args = append(args, inc...)
				in := f
				if !filepath.IsAbs(in) {
					in = filepath.Join(src, f)
				}
				args = append(args, "-c", in, "-o", obj)
				err := run(ctx, dir, cxx, args...)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("lib: compiling %s: %w", f, err)
					cancel()
				}
				done++
				n := done
				mu.Unlock()
				if err == nil {
					objs[i] = obj
					progress(w, "llama: [%d/%d] compiled %s", n, len(files), f)
				}
			}
		}()
	}
	for i := range files {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lib: build: %w", err)
	}
	return objs, nil
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 4000 {
			msg = msg[:4000] + "..."
		}
		return fmt.Errorf("%w: %s", err, msg)
	}
	return nil
}

var mtmdAPIDecl = regexp.MustCompile(`MTMD_API\s[^;(]*?\b(mtmd_[a-z0-9_]+)\s*\(`)

// MTMDSymbols returns the C functions mtmd.h and mtmd-helper.h of the
// source in src declare (MTMD_API, C linkage).
func MTMDSymbols(src string) ([]string, error) {
	var out []string
	for _, h := range []string{"mtmd.h", "mtmd-helper.h"} {
		b, err := os.ReadFile(filepath.Join(src, "tools", "mtmd", h))
		if err != nil {
			return nil, fmt.Errorf("lib: %w", err)
		}
		// Only the extern "C" part: C++ helpers (std:: types) are mangled.
		s := string(b)
		if i := strings.Index(s, `extern "C" {`); i >= 0 {
			s = s[i:]
		}
		if i := strings.Index(s, `} // extern "C"`); i >= 0 {
			s = s[:i]
		}
		for _, m := range mtmdAPIDecl.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
	}
	if len(out) == 0 {
		return nil, errors.New("lib: mtmd.h declares no functions")
	}
	return out, nil
}

// CheckMTMD checks that the shared library at path exports every function
// that mtmd.h and mtmd-helper.h of the source in src declare.
func CheckMTMD(path, src string) error {
	want, err := MTMDSymbols(src)
	if err != nil {
		return err
	}
	have, err := dynamicSymbols(path)
	if err != nil {
		return fmt.Errorf("lib: reading the symbols of %s: %w", path, err)
	}
	var missing []string
	for _, s := range want {
		if !have[s] {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("lib: %s lacks %d functions of mtmd.h: %s", path, len(missing), strings.Join(missing, ", "))
	}
	return nil
}

// dynamicSymbols lists the functions a shared library defines and exports.
func dynamicSymbols(path string) (map[string]bool, error) {
	out := map[string]bool{}
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		syms, err := f.DynamicSymbols()
		if err != nil {
			return nil, err
		}
		for _, s := range syms {
			if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				out[s.Name] = true
			}
		}
		return out, nil
	}
	f, err := macho.Open(path)
	if err != nil {
		return nil, errors.New("neither an ELF nor a Mach-O file")
	}
	defer f.Close()
	if f.Symtab == nil {
		return nil, errors.New("no symbol table")
	}
	for _, s := range f.Symtab.Syms {
		if s.Type&0x0e == 0x0e && s.Type&0x01 != 0 { // N_SECT | N_EXT
			out[strings.TrimPrefix(s.Name, "_")] = true
		}
	}
	return out, nil
}
