package lib

import (
	"bufio"
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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/internal/cudadrv"
	"github.com/x/llama/internal/cudafatbin"
)

// CUDALocal is the flavor of a CUDA build made on this machine from the
// pinned source by InstallCUDA (llama-install -flavor cuda -build). It has
// its own cache folder, beside the prebuilt CUDA flavor's, and is found
// like any flavor (LibraryOptions.Flavor, Find); there is no package to
// install it from.
const CUDALocal Flavor = "cuda-local"

// CUDAStampFile is the file, in the folder of a local CUDA build, that
// records the inputs of the build and the SHA-256 of each file it
// installed.
const CUDAStampFile = "cuda-build.stamp"

// maxCUDAArchs bounds the architectures one build compiles for.
const maxCUDAArchs = 16

// CUDAOptions controls InstallCUDA. The zero value builds libllama and
// ggml with the CUDA backend for the GPUs the CUDA driver lists, from
// $LLAMA_CPP_SRC, with the nvcc found by FindNVCC and cmake and ninja from
// PATH, on every core, into DefaultDir(CUDALocal), quietly.
type CUDAOptions struct {
	// Dir is the folder the build is installed into; empty means
	// DefaultDir(CUDALocal).
	Dir string
	// Source is the folder of the pinned llama.cpp source; empty means
	// $LLAMA_CPP_SRC.
	Source string
	// Archs are the CUDA architectures to compile machine code for, as
	// ParseCUDAArchs returns them ("90", "120a"); empty means those of the
	// GPUs the CUDA driver lists, and no GPU is then an error.
	Archs []string
	// NVCC is the CUDA compiler; empty means FindNVCC's.
	NVCC string
	// CMake is the cmake command; empty means cmake from PATH. The build
	// uses the Ninja generator (ninja from PATH).
	CMake string
	// Server also builds llama-server (with libmtmd and libllama-common,
	// which it links) from the same build, for side-by-side runs.
	Server bool
	// MTMD also builds libmtmd (Server implies it).
	MTMD bool
	// Jobs is how many files compile at once; 0 means every core.
	Jobs int
	// Force rebuilds even when the installed build matches its inputs.
	Force bool
	// KeepBuild keeps CMake's build folder after a successful build (it is
	// always kept after a failed one, so that a second run resumes).
	KeepBuild bool
	// Progress, when set, receives human-readable progress lines,
	// including the build tool's.
	Progress io.Writer
}

// CUDAResult describes what InstallCUDA did.
type CUDAResult struct {
	BuildResult
	// Dir is the folder of the build; Path (BuildResult) is its
	// libggml-cuda.
	Dir string
	// Archs are the architectures it has machine code for.
	Archs []string
	// NVCC is the compiler and NVCCVersion its release line.
	NVCC, NVCCVersion string
	// Files are the installed files, by name.
	Files []string
}

// ParseCUDAArchs reads a comma-separated list of CUDA architectures: 90,
// sm_90, compute_90 or 9.0 for compute capability 9.0; a suffix a or f
// (120a) is kept. It returns them deduplicated and ascending, as CMake's
// CUDA_ARCHITECTURES names them.
func ParseCUDAArchs(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		a, err := parseCUDAArch(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("lib: no CUDA architecture in %q (for example 90 for H100 and H200)", s)
	}
	if len(out) > maxCUDAArchs {
		return nil, fmt.Errorf("lib: %d CUDA architectures, more than the %d allowed", len(out), maxCUDAArchs)
	}
	sortArchs(out)
	return out, nil
}

func parseCUDAArch(f string) (string, error) {
	bad := fmt.Errorf("lib: %q is not a CUDA architecture (for example 90, sm_90 or 9.0)", f)
	s := strings.ToLower(f)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "sm_"), "compute_")
	if maj, min, ok := strings.Cut(s, "."); ok {
		if len(maj) == 0 || len(maj) > 2 || len(min) != 1 {
			return "", bad
		}
		s = maj + min
	}
	suffix := ""
	if n := len(s); n > 0 && (s[n-1] == 'a' || s[n-1] == 'f') {
		s, suffix = s[:n-1], s[n-1:]
	}
	if len(s) < 2 || len(s) > 3 {
		return "", bad
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 50 || strconv.Itoa(n) != s {
		return "", bad
	}
	return s + suffix, nil
}

// archNumber is the 10*major+minor of an architecture ("120a": 120).
func archNumber(a string) int {
	n, _ := strconv.Atoi(strings.TrimRight(a, "af"))
	return n
}

func sortArchs(a []string) {
	slices.SortFunc(a, func(x, y string) int {
		if c := archNumber(x) - archNumber(y); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
}

// cudaArchsOf returns the architectures of the devices, deduplicated and
// ascending.
func cudaArchsOf(devs []cudadrv.Device) ([]string, error) {
	var out []string
	for _, d := range devs {
		if d.Major < 5 || d.Major > 99 || d.Minor < 0 || d.Minor > 9 {
			return nil, fmt.Errorf("lib: CUDA device %d (%s) reports compute capability %d.%d", d.Ordinal, d.Name, d.Major, d.Minor)
		}
		a := strconv.Itoa(d.Major*10 + d.Minor)
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("lib: the CUDA driver lists no GPU: name the architectures to build for (llama-install -cuda-arch 90)")
	}
	sortArchs(out)
	return out, nil
}

// DetectCUDAArchs asks the CUDA driver for the compute capability of each
// GPU and returns their architectures ("90" for an H100), deduplicated.
func DetectCUDAArchs() ([]string, error) {
	info, err := cudadrv.Query()
	if err != nil {
		return nil, fmt.Errorf("lib: finding the GPUs to build for: %w (name them instead: llama-install -cuda-arch 90)", err)
	}
	return cudaArchsOf(info.Devices)
}

// FindNVCC returns the CUDA compiler: nvcc, when not empty (a path or a
// name on PATH); else $CUDACXX; else nvcc from PATH; else
// $CUDA_HOME/bin/nvcc, $CUDA_PATH/bin/nvcc or /usr/local/cuda/bin/nvcc;
// else the nvcc of NVIDIA's pip wheels (nvidia-cuda-nvcc, with
// nvidia-cuda-runtime, nvidia-cublas, nvidia-cuda-cccl beside it) in the
// active virtual environment or python3's site-packages.
func FindNVCC(nvcc string) (string, error) {
	return findNVCC(nvcc, os.Getenv, exec.LookPath, pythonSitePackages)
}

func findNVCC(nvcc string, getenv func(string) string, lookPath func(string) (string, error), sites func() []string) (string, error) {
	isExec := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if nvcc != "" {
		if p, err := lookPath(nvcc); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("lib: the CUDA compiler %s cannot be run", nvcc)
	}
	if c := getenv("CUDACXX"); c != "" {
		if p, err := lookPath(c); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("lib: the CUDA compiler in $CUDACXX (%s) cannot be run", c)
	}
	if p, err := lookPath("nvcc"); err == nil {
		return p, nil
	}
	var cands []string
	for _, e := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := getenv(e); d != "" {
			cands = append(cands, filepath.Join(d, "bin", "nvcc"))
		}
	}
	cands = append(cands, "/usr/local/cuda/bin/nvcc")
	var siteDirs []string
	if v := getenv("VIRTUAL_ENV"); v != "" {
		ds, _ := filepath.Glob(filepath.Join(v, "lib", "python3*", "site-packages"))
		siteDirs = append(siteDirs, ds...)
	}
	siteDirs = append(siteDirs, sites()...)
	for _, d := range siteDirs {
		// CUDA 13's wheels share one toolkit tree (nvidia/cu13); CUDA
		// 12's put each package in a folder of its own.
		cands = append(cands, filepath.Join(d, "nvidia", "cu13", "bin", "nvcc"),
			filepath.Join(d, "nvidia", "cuda_nvcc", "bin", "nvcc"))
	}
	for _, c := range cands {
		if isExec(c) {
			return c, nil
		}
	}
	return "", errors.New("lib: building for CUDA needs nvcc and none was found: install the CUDA toolkit " +
		"(nvcc on PATH, or CUDA_HOME), or NVIDIA's pip wheels in a virtual environment " +
		"(pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cublas nvidia-cuda-cccl)")
}

// pythonSitePackages asks python3 where its packages go.
func pythonSitePackages() []string {
	out, err := exec.Command("python3", "-c",
		"import site,sysconfig\nprint(sysconfig.get_paths()['purelib'])\nprint(sysconfig.get_paths()['platlib'])\n"+
			"for p in site.getsitepackages()+[site.getusersitepackages()]: print(p)").Output()
	if err != nil {
		return nil
	}
	var dirs []string
	for l := range strings.Lines(string(out)) {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(dirs, l) {
			dirs = append(dirs, l)
		}
	}
	return dirs
}

// NVCCVersion returns the release line of nvcc --version ("Cuda
// compilation tools, release 13.0, V13.0.88").
func NVCCVersion(ctx context.Context, nvcc string) (string, error) {
	out, err := exec.CommandContext(ctx, nvcc, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("lib: %s --version: %w: %s", nvcc, err, strings.TrimSpace(string(out)))
	}
	for l := range strings.Lines(string(out)) {
		if strings.Contains(l, "release") {
			return strings.TrimSpace(l), nil
		}
	}
	return "", fmt.Errorf("lib: %s --version says no release: %s", nvcc, strings.TrimSpace(string(out)))
}

// cudaConfig is what a local CUDA build is configured with.
type cudaConfig struct {
	src, build string
	archs      []string
	nvcc       string
	// wheel is set when nvcc comes from NVIDIA's pip wheels, whose tree
	// differs from the toolkit's: the build gets a folder of link names
	// (linkDir) and the linker the wheels' lib folder.
	wheel bool
	// libcuda is the driver library the build links for ggml-cuda's
	// virtual memory pool, found for a wheel build; when a wheel build
	// finds none, the pool is left out (GGML_CUDA_NO_VMM).
	libcuda string
	server  bool
	mtmd    bool
}

// cmakeArgs are the arguments of CMake's configure step: a shared Release
// build whose backends load at run time (GGML_BACKEND_DL: libggml-cuda.so
// and libggml-cpu.so beside libggml, as the prebuilt flavors have them),
// with machine code only (-real) for the architectures, the CPU backend
// in every x86 variant (ggml picks the one for the CPU at run time, as in
// the prebuilt flavors; a native-only one cannot be loaded at run time),
// and nothing fetched: no NCCL, no prebuilt web
// UI, no OpenSSL. Flash attention is built for the default quantizations
// only (GGML_CUDA_FA_ALL_QUANTS off), which roughly halves the build.
// Libraries and programs find each other beside themselves ($ORIGIN).
func (c cudaConfig) cmakeArgs() []string {
	archs := make([]string, len(c.archs))
	for i, a := range c.archs {
		archs[i] = a + "-real"
	}
	onOff := func(b bool) string {
		if b {
			return "ON"
		}
		return "OFF"
	}
	args := []string{"-S", c.src, "-B", c.build, "-G", "Ninja",
		"-DCMAKE_BUILD_TYPE=Release",
		"-DBUILD_SHARED_LIBS=ON",
		"-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
		"-DCMAKE_INSTALL_RPATH=$ORIGIN",
		"-DGGML_BACKEND_DL=ON",
		"-DGGML_NATIVE=OFF",
		"-DGGML_CPU_ALL_VARIANTS=ON",
		"-DGGML_CCACHE=OFF",
		"-DGGML_CUDA=ON",
		"-DCMAKE_CUDA_COMPILER=" + c.nvcc,
		// ggml-cuda's CMakeLists looks for the toolkit before it enables
		// CUDA, so the toolkit is named after the compiler's folder.
		"-DCUDAToolkit_ROOT=" + c.cudaHome(),
		"-DCMAKE_CUDA_ARCHITECTURES=" + strings.Join(archs, ";"),
		"-DGGML_CUDA_FA_ALL_QUANTS=OFF",
		"-DGGML_CUDA_NCCL=OFF",
		"-DGGML_RPC=OFF",
		"-DLLAMA_BUILD_TESTS=OFF",
		"-DLLAMA_BUILD_EXAMPLES=OFF",
		"-DLLAMA_BUILD_APP=OFF",
		"-DLLAMA_BUILD_COMMON=" + onOff(c.server || c.mtmd),
		"-DLLAMA_BUILD_TOOLS=" + onOff(c.server || c.mtmd),
		"-DLLAMA_BUILD_SERVER=" + onOff(c.server),
		"-DLLAMA_BUILD_UI=OFF",
		"-DLLAMA_USE_PREBUILT_UI=OFF",
		"-DLLAMA_OPENSSL=OFF",
	}
	if c.wheel {
		args = append(args, "-DCMAKE_LIBRARY_PATH="+c.linkDir())
		if c.libcuda == "" {
			args = append(args, "-DGGML_CUDA_NO_VMM=ON")
		}
	}
	return args
}

// linkDir is the folder of link names of a wheel build.
func (c cudaConfig) linkDir() string { return filepath.Join(c.build, "cuda-link-names") }

// cudaHome is the toolkit folder of nvcc (nvcc is in its bin).
func (c cudaConfig) cudaHome() string { return filepath.Dir(filepath.Dir(c.nvcc)) }

// env is the environment of the build's commands.
func (c cudaConfig) env() []string {
	env := os.Environ()
	if c.wheel {
		// nvcc links its test programs with -lcudart_static from lib64,
		// which the wheels name lib.
		lp := filepath.Join(c.cudaHome(), "lib")
		if old := os.Getenv("LIBRARY_PATH"); old != "" {
			lp += ":" + old
		}
		env = append(env, "LIBRARY_PATH="+lp)
	}
	return env
}

// targets are the build targets: only what is installed, not every tool.
// libllama brings libggml, which brings every backend (libggml-cuda, the
// CPU variants).
func (c cudaConfig) targets() []string {
	t := []string{"llama"}
	if c.server || c.mtmd {
		t = append(t, "mtmd")
	}
	if c.server {
		t = append(t, "llama-common", "llama-server")
	}
	return t
}

// cudaSourceDirs are the parts of the source a CUDA build reads, digested
// into its inputs.
var cudaSourceDirs = []string{"CMakeLists.txt", "cmake", "ggml", "src", "include", "common", "vendor", "tools", "scripts"}

// cudaInputs digests what a local CUDA build depends on: the version, the
// configuration (architectures, options), the platform, the versions of
// nvcc, the C++ compiler and cmake, and every file of the source parts
// the build reads.
func cudaInputs(c cudaConfig, nvccVersion, cxxVersion, cmakeVersion string) (string, error) {
	h := sha256.New()
	args := c.cmakeArgs()
	for i, a := range args {
		// The folders differ from run to run; what they hold is digested below.
		if i > 0 && (args[i-1] == "-S" || args[i-1] == "-B") {
			a = "."
		}
		if strings.HasPrefix(a, "-DCMAKE_CUDA_COMPILER=") || strings.HasPrefix(a, "-DCUDAToolkit_ROOT=") || strings.HasPrefix(a, "-DCMAKE_LIBRARY_PATH=") {
			continue
		}
		fmt.Fprintf(h, "%s\n", a)
	}
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s\n%s\n", Version, runtime.GOOS+"/"+runtime.GOARCH, strings.Join(c.targets(), " "),
		nvccVersion, cxxVersion, cmakeVersion)
	n := 0
	for _, part := range cudaSourceDirs {
		root := filepath.Join(c.src, part)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); name == ".git" || name == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(c.src, p)
			fmt.Fprintf(h, "%s %x\n", filepath.ToSlash(rel), sha256.Sum256(b))
			n++
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("lib: %s is not the llama.cpp source: %w", c.src, err)
		}
	}
	if n == 0 {
		return "", fmt.Errorf("lib: %s holds no llama.cpp source", c.src)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cudaStamp is written into the folder of a local CUDA build.
type cudaStamp struct {
	Version   string            `json:"version"`
	Inputs    string            `json:"inputs"`
	Archs     []string          `json:"archs"`
	NVCC      string            `json:"nvcc"`
	Files     map[string]string `json:"files"` // installed file name to its sha256
	BuildSecs float64           `json:"build_seconds"`
}

// readCUDAStamp returns the stamp of dir when it matches inputs and every
// file it lists is there with its recorded sum.
func readCUDAStamp(dir, inputs string) (cudaStamp, bool) {
	b, err := os.ReadFile(filepath.Join(dir, CUDAStampFile))
	if err != nil {
		return cudaStamp{}, false
	}
	var st cudaStamp
	if json.Unmarshal(b, &st) != nil || st.Version != Version || st.Inputs != inputs || len(st.Files) == 0 {
		return cudaStamp{}, false
	}
	for name, sum := range st.Files {
		if filepath.Base(name) != name {
			return cudaStamp{}, false
		}
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil || got != sum {
			return cudaStamp{}, false
		}
	}
	return st, true
}

// InstallCUDA builds libllama and ggml with the CUDA backend from the
// pinned llama.cpp source, for the GPUs of this machine (o.Archs, or the
// compute capabilities the CUDA driver reports), and installs them into
// their own flavor folder (DefaultDir(CUDALocal) unless o.Dir). It is for
// GPUs the prebuilt CUDA flavor has no machine code for, H100 and H200
// (sm_90) under a CUDA 13.0 driver among them.
//
// The build is llama.cpp's own CMake build (cmake and ninja from PATH,
// the CUDA compiler from FindNVCC): ggml-cuda's sources, their template
// instances, per-architecture flags and the CUDA runtime and cuBLAS
// linking are what that build describes, and a second description here
// would drift from it. It takes minutes on many cores: most of it is
// ggml-cuda, whose time grows with the number of architectures. The build
// folder, beside the install folder, is kept after a failure so that a
// second run resumes where the first stopped; a lock on it keeps two
// builds of one folder from running at once.
//
// The installed build is kept while its inputs (the source, the
// architectures, the options, and the versions of nvcc, the C++ compiler
// and cmake) are unchanged and its files match the SHA-256 sums its stamp
// (CUDAStampFile) records. Before it is installed, its libggml-cuda is
// checked to carry machine code for every architecture asked for. Linux
// only.
func InstallCUDA(ctx context.Context, o CUDAOptions) (CUDAResult, error) {
	if runtime.GOOS != "linux" {
		return CUDAResult{}, errors.New("lib: building the CUDA flavor is supported on Linux only")
	}
	dir := o.Dir
	if dir == "" {
		d, err := DefaultDir(CUDALocal)
		if err != nil {
			return CUDAResult{}, err
		}
		dir = d
	}
	src := o.Source
	if src == "" {
		src = os.Getenv(EnvSource)
	}
	if src == "" {
		return CUDAResult{}, fmt.Errorf("lib: building the CUDA flavor needs the llama.cpp %s source: set %s", Version, EnvSource)
	}
	if abs, err := filepath.Abs(src); err == nil {
		src = abs // CMake's cache records it: a second run must name the same folder
	}
	if _, err := os.Stat(filepath.Join(src, "ggml", "src", "ggml-cuda", "CMakeLists.txt")); err != nil {
		return CUDAResult{}, fmt.Errorf("lib: %s is not the llama.cpp source: %w", src, err)
	}
	archs := o.Archs
	if len(archs) == 0 {
		a, err := DetectCUDAArchs()
		if err != nil {
			return CUDAResult{}, err
		}
		archs = a
	} else {
		a, err := ParseCUDAArchs(strings.Join(archs, ","))
		if err != nil {
			return CUDAResult{}, err
		}
		archs = a
	}
	nvcc, err := FindNVCC(o.NVCC)
	if err != nil {
		return CUDAResult{}, err
	}
	// The toolkit is the folder above nvcc's own (a link on PATH, such as
	// /usr/local/bin/nvcc, would name the wrong one).
	if p, err := filepath.EvalSymlinks(nvcc); err == nil {
		nvcc = p
	}
	nvccVer, err := NVCCVersion(ctx, nvcc)
	if err != nil {
		return CUDAResult{}, err
	}
	cmake := o.CMake
	if cmake == "" {
		cmake = "cmake"
	}
	if cmake, err = exec.LookPath(cmake); err != nil {
		return CUDAResult{}, fmt.Errorf("lib: building the CUDA flavor needs cmake (apt-get install cmake ninja-build): %w", err)
	}
	ninja, err := exec.LookPath("ninja")
	if err != nil {
		return CUDAResult{}, fmt.Errorf("lib: building the CUDA flavor needs ninja (apt-get install ninja-build): %w", err)
	}
	cxx, err := findCXX("")
	if err != nil {
		return CUDAResult{}, err
	}
	cmakeVer, _ := exec.CommandContext(ctx, cmake, "--version").Output()
	cxxVer, _ := exec.CommandContext(ctx, cxx, "--version").Output()
	cfg := cudaConfig{src: src, archs: archs, nvcc: nvcc, server: o.Server, mtmd: o.MTMD || o.Server, wheel: isWheelNVCC(nvcc)}
	if cfg.wheel {
		if err := checkWheelReleases(nvcc); err != nil {
			return CUDAResult{}, err
		}
		if cfg.libcuda = findLibcuda(); cfg.libcuda == "" {
			progress(o.Progress, "llama: no CUDA driver library (libcuda.so.1) here: building without ggml-cuda's virtual memory pool")
		}
	}
	inputs, err := cudaInputs(cfg, nvccVer, firstLine(string(cxxVer)), firstLine(string(cmakeVer)))
	if err != nil {
		return CUDAResult{}, err
	}
	res := CUDAResult{Dir: dir, Archs: archs, NVCC: nvcc, NVCCVersion: nvccVer}
	if st, ok := readCUDAStamp(dir, inputs); ok && !o.Force {
		progress(o.Progress, "llama: the CUDA build in %s (%s) is up to date", dir, strings.Join(archs, ", "))
		res.Path = filepath.Join(dir, "libggml-cuda.so")
		res.Files = sortedKeys(st.Files)
		return res, nil
	}

	// A folder holding a prebuilt library (libllama.cuda.v0.4.0.so...)
	// would hold two libllamas, and the prebuilt one is found first.
	if p, err := LibraryPath(dir, "llama"); err == nil && filepath.Base(p) != "libllama.so" {
		return res, fmt.Errorf("lib: %s holds another build of the library (%s): build the CUDA flavor into a folder of its own",
			dir, filepath.Base(p))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return res, fmt.Errorf("lib: %w", err)
	}
	cfg.build = filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+"-build")
	if err := os.MkdirAll(cfg.build, 0o755); err != nil {
		return res, fmt.Errorf("lib: %w", err)
	}
	unlock, err := lockFile(cfg.build + ".lock")
	if err != nil {
		return res, fmt.Errorf("lib: locking the CUDA build folder: %w", err)
	}
	defer unlock()
	if cfg.wheel {
		if err := cfg.makeLinkDir(); err != nil {
			return res, err
		}
	}

	start := time.Now()
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	progress(o.Progress, "llama: building llama.cpp %s with CUDA for %s from %s (%s, %d jobs)",
		Version, strings.Join(archs, ", "), src, nvccVer, jobs)
	if err := runStreaming(ctx, o.Progress, cfg.env(), cmake, cfg.cmakeArgs()...); err != nil {
		return res, fmt.Errorf("lib: configuring the CUDA build: %w", err)
	}
	// ninja itself rather than cmake --build: interrupted, it stops the
	// compilers it started, and keeps what they finished for the next run.
	build := append([]string{"-C", cfg.build, "-j", strconv.Itoa(jobs)}, cfg.targets()...)
	if err := runStreaming(ctx, o.Progress, cfg.env(), ninja, build...); err != nil {
		return res, fmt.Errorf("lib: the CUDA build (its folder %s is kept: run again to resume): %w", cfg.build, err)
	}
	bin := filepath.Join(cfg.build, "bin")
	if err := checkCUDAArchs(filepath.Join(bin, "libggml-cuda.so"), archs); err != nil {
		return res, err
	}
	files, err := installBuilt(bin, dir, o.Server)
	if err != nil {
		return res, err
	}
	sums := map[string]string{}
	for _, f := range files {
		s, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			return res, fmt.Errorf("lib: %w", err)
		}
		sums[f] = s
	}
	if o.Server {
		if err := run(ctx, dir, filepath.Join(dir, ServerFile), "--version"); err != nil {
			return res, fmt.Errorf("lib: the built llama-server does not run: %w", err)
		}
	}
	elapsed := time.Since(start)
	st, _ := json.MarshalIndent(cudaStamp{Version: Version, Inputs: inputs, Archs: archs, NVCC: nvccVer, Files: sums,
		BuildSecs: elapsed.Round(time.Second).Seconds()}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, CUDAStampFile), append(st, '\n'), 0o644); err != nil {
		return res, fmt.Errorf("lib: %w", err)
	}
	if !o.KeepBuild {
		_ = os.RemoveAll(cfg.build)
	}
	progress(o.Progress, "llama: built and installed the CUDA build (%s) into %s in %s", strings.Join(archs, ", "),
		dir, elapsed.Round(time.Second))
	res.Path = filepath.Join(dir, "libggml-cuda.so")
	res.Built, res.BuildTime, res.Files = true, elapsed, files
	return res, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkCUDAArchs checks that the built libggml-cuda carries machine code
// every architecture asked for runs, as the GPU check
// (llama.CheckDevices) will read it.
func checkCUDAArchs(path string, archs []string) error {
	facts, err := cudafatbin.ReadFile(path)
	if err != nil {
		return fmt.Errorf("lib: reading the fat binaries of the built %s: %w", filepath.Base(path), err)
	}
	for _, a := range archs {
		n := archNumber(a)
		v := cudafatbin.Check(facts, cudafatbin.Version{Major: n / 10, Minor: n % 10}, cudafatbin.Version{Major: 99})
		if !v.OK || v.SASS == 0 {
			return fmt.Errorf("lib: the built %s has no machine code for sm_%s (it has %v)", filepath.Base(path), a, facts.SASS)
		}
	}
	return nil
}

// installBuilt moves the shared libraries of the build's bin folder (and
// llama-server when server) into dir, links as links. The stamp goes
// first, so that a failure part way leaves no "up to date".
func installBuilt(bin, dir string, server bool) ([]string, error) {
	entries, err := os.ReadDir(bin)
	if err != nil {
		return nil, fmt.Errorf("lib: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lib: %w", err)
	}
	_ = os.Remove(filepath.Join(dir, CUDAStampFile))
	var files []string
	for _, e := range entries {
		name := e.Name()
		if !(strings.HasPrefix(name, "lib") && strings.Contains(name, ".so")) && !(server && name == ServerFile) {
			continue
		}
		from, to := filepath.Join(bin, name), filepath.Join(dir, name)
		_ = os.Remove(to)
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err != nil {
				return nil, fmt.Errorf("lib: %w", err)
			}
			if err := os.Symlink(target, to); err != nil {
				return nil, fmt.Errorf("lib: %w", err)
			}
		} else if err := replaceFile(from, to); err != nil {
			return nil, fmt.Errorf("lib: %w", err)
		}
		files = append(files, name)
	}
	for _, l := range libraries {
		if _, err := LibraryPath(dir, l); err != nil {
			return nil, fmt.Errorf("lib: the CUDA build made no lib%s: %w", l, err)
		}
	}
	return files, nil
}

func replaceFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := to + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, to)
}

// isWheelNVCC reports whether nvcc is the one of NVIDIA's pip wheels
// (site-packages/nvidia/cu13/bin/nvcc).
func isWheelNVCC(nvcc string) bool {
	return strings.Contains(filepath.ToSlash(nvcc), "/nvidia/cu") || strings.Contains(filepath.ToSlash(nvcc), "/nvidia/cuda_nvcc/")
}

// wheelParts are the pip wheels that make up nvcc, each a part of one
// CUDA release: the driver program, its device compiler (cicc, from
// nvidia-nvvm), its headers (nvidia-cuda-crt) and the runtime. pip
// resolves a pinned nvidia-cuda-nvcc with the newest nvidia-nvvm, whose
// PTX the older ptxas refuses ("Unsupported .version"), so the CUDA
// compiler check of the configure step fails. cuBLAS and CCCL number
// their wheels on their own and are not compared.
var wheelParts = []string{"nvidia_cuda_nvcc", "nvidia_nvvm", "nvidia_cuda_crt", "nvidia_cuda_runtime"}

// checkWheelReleases refuses NVIDIA's pip wheels of more than one CUDA
// release (major.minor) beside a wheel nvcc
// (site-packages/nvidia/cu13/bin/nvcc), naming the pip command that makes
// them one: the release of nvidia-cuda-nvcc.
func checkWheelReleases(nvcc string) error {
	site := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(nvcc))))
	ents, err := os.ReadDir(site)
	if err != nil {
		return nil // not a site-packages folder we can read: configure will say what is wrong
	}
	type part struct{ name, version, release string }
	var parts []part
	var want string
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".dist-info")
		if !ok {
			continue
		}
		name, ver, ok := strings.Cut(base, "-")
		if !ok {
			continue
		}
		for _, w := range wheelParts {
			// CUDA 12's wheels carry a suffix (nvidia_cuda_nvcc_cu12).
			if name != w && !strings.HasPrefix(name, w+"_cu") {
				continue
			}
			maj, rest, _ := strings.Cut(ver, ".")
			minor, _, _ := strings.Cut(rest, ".")
			p := part{strings.ReplaceAll(name, "_", "-"), ver, maj + "." + minor}
			parts = append(parts, p)
			if w == "nvidia_cuda_nvcc" {
				want = p.release
			}
		}
	}
	if want == "" {
		return nil
	}
	var off, pins []string
	for _, p := range parts {
		pins = append(pins, fmt.Sprintf("'%s==%s.*'", p.name, want))
		if p.release != want {
			off = append(off, p.name+" "+p.version)
		}
	}
	if len(off) == 0 {
		return nil
	}
	slices.Sort(off)
	slices.Sort(pins)
	return fmt.Errorf("lib: NVIDIA's pip wheels in %s are of more than one CUDA release: nvcc is %s but %s; "+
		"nvcc cannot build with parts of another release: pip install %s",
		site, want, strings.Join(off, ", "), strings.Join(pins, " "))
}

// findLibcuda returns the CUDA driver library of this machine, or "".
func findLibcuda() string {
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/wsl/lib"} {
		p := filepath.Join(d, "libcuda.so.1")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// makeLinkDir makes, for a wheel build, the folder of the link names
// CMake's FindCUDAToolkit looks for (libcudart.so, libcublas.so...), which
// the wheels ship only under their versioned names (libcudart.so.13), and
// libcuda.so for the driver.
func (c cudaConfig) makeLinkDir() error {
	links := c.linkDir()
	if err := os.MkdirAll(links, 0o755); err != nil {
		return fmt.Errorf("lib: %w", err)
	}
	targets := map[string]string{}
	for _, name := range []string{"cudart", "cublas", "cublasLt"} {
		ms, _ := filepath.Glob(filepath.Join(c.cudaHome(), "lib", "lib"+name+".so.*"))
		if len(ms) == 0 {
			return fmt.Errorf("lib: the CUDA wheels in %s have no lib%s (pip install nvidia-cuda-runtime nvidia-cublas)", c.cudaHome(), name)
		}
		targets["lib"+name+".so"] = ms[0]
	}
	if c.libcuda != "" {
		targets["libcuda.so"] = c.libcuda
	}
	for link, target := range targets {
		p := filepath.Join(links, link)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("lib: %w", err)
		}
	}
	return nil
}

// runStreaming runs a command, passing its output to w line by line; an
// error carries the last lines. When ctx ends the command is interrupted
// (SIGINT, as Ctrl-C would), so that ninja stops its compilers, and killed
// if it has not ended half a minute later.
func runStreaming(ctx context.Context, w io.Writer, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan []string)
	go func() {
		var tail []string
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			progress(w, "%s", l)
			tail = append(tail, l)
			if len(tail) > 40 {
				tail = tail[1:]
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		done <- tail
	}()
	err := cmd.Wait()
	_ = pw.Close()
	tail := <-done
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, strings.Join(tail, "\n"))
	}
	return nil
}
