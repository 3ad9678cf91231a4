// Package capi binds the C API of llama.cpp (include/llama.h of the pinned
// release) through purego, without cgo. It is a thin, unchecked mirror of the
// header: the root package llama wraps it and checks every argument before a
// call. Each binding file covers one area of llama.h and shows the C
// declaration above each binding; bindings_test.go holds those declarations
// against the real header and layout_test.go holds the struct mirrors
// against the C compiler's view of them.
package capi

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// which library a symbol lives in
type libID int

const (
	libLlama libID = iota
	libGGML
	libGGMLBase
)

type binding struct {
	fn   any
	name string
	lib  libID
}

var registry []binding

func register(l libID, bs ...binding) {
	for _, b := range bs {
		b.lib = l
		registry = append(registry, b)
	}
}

// Symbols lists every bound C symbol, for the binding checker.
func Symbols() []string {
	out := make([]string, len(registry))
	for i, b := range registry {
		out[i] = b.name
	}
	return out
}

var (
	loadOnce sync.Once
	loadErr  error
	loadDir  string

	// AbortFlagFunc is a C function pointer used as the abort callback: it
	// reads the first byte of its argument and returns non-zero when it is
	// set (libc's strlen over a two-byte buffer {flag, 0}). Polling a byte in
	// C costs nothing per graph node, where a Go callback would cost a
	// transition into Go for every node of every decode.
	AbortFlagFunc uintptr
	// NoopFunc is a C function with no arguments and no side effects
	// (llama_time_us), used as a log callback that drops messages: extra
	// arguments are ignored under the C calling conventions we run on.
	NoopFunc uintptr

	// Calloc and CFree are the C library's calloc and free, for memory C
	// keeps pointers to (abort flags, the Go sampler interface, sampler
	// names): Go memory must not be kept by C.
	Calloc func(n, size uintptr) unsafe.Pointer
	CFree  func(p unsafe.Pointer)
)

// Expected ABI facts of the pinned build, checked at load.
const wantVersionPrefix = "0.4.0"

// Files names the shared libraries of one llama.cpp build. Where they come
// from (a folder of the user's, the install cache) is decided by package lib
// and the root package; capi only opens them.
type Files struct {
	// Llama, GGML and GGMLBase are the paths of libllama, libggml and
	// libggml-base.
	Llama, GGML, GGMLBase string
	// BackendDir is the folder the ggml backends (CPU variants, GPU
	// backends) are loaded from: normally the folder holding the libraries.
	BackendDir string
}

// Load opens the libraries, binds every symbol and loads the ggml backends
// from f.BackendDir. It may be called once per process; later calls return
// the first result (and an error if they name another folder).
func Load(f Files) error {
	loadOnce.Do(func() {
		loadDir = f.BackendDir
		loadErr = load(f)
	})
	if loadErr == nil && filepath.Clean(f.BackendDir) != filepath.Clean(loadDir) {
		return fmt.Errorf("llama: library already loaded from %s, cannot load %s too", loadDir, f.BackendDir)
	}
	return loadErr
}

// Loaded reports the folder the library was loaded from, if any.
func Loaded() (string, bool) {
	if loadDir == "" || loadErr != nil {
		return "", false
	}
	return loadDir, true
}

func load(f Files) error {
	open := func(p string) (uintptr, string, error) {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return 0, "", fmt.Errorf("llama: cannot load %s: %w", p, err)
		}
		return h, p, nil
	}
	hBase, _, err := open(f.GGMLBase)
	if err != nil {
		return err
	}
	hGGML, _, err := open(f.GGML)
	if err != nil {
		return err
	}
	hLlama, llamaPath, err := open(f.Llama)
	if err != nil {
		return err
	}
	handles := map[libID]uintptr{libLlama: hLlama, libGGML: hGGML, libGGMLBase: hBase}
	var missing []string
	for _, b := range registry {
		if _, err := purego.Dlsym(handles[b.lib], b.name); err != nil {
			missing = append(missing, b.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("llama: %s is not llama.cpp v%s: it lacks %d symbols (%s)",
			llamaPath, wantVersionPrefix, len(missing), strings.Join(first(missing, 8), ", "))
	}
	for _, b := range registry {
		purego.RegisterLibFunc(b.fn, handles[b.lib], b.name)
	}
	bindMTP(hLlama)
	bindHot(func(name string) uintptr {
		p, _ := purego.Dlsym(hLlama, name)
		return p
	})
	if err := checkABI(); err != nil {
		return fmt.Errorf("llama: %s: %w", llamaPath, err)
	}
	NoopFunc, _ = purego.Dlsym(hLlama, "llama_time_us")
	if AbortFlagFunc, err = libcStrlen(); err != nil {
		return err
	}
	// Quiet until the root package installs its logger.
	LogSet(NoopFunc, 0)
	BackendInit()
	BackendLoadAllFromPath(f.BackendDir)
	return bindCPUThreadpool()
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

// checkABI compares the library's version and its default parameter structs
// with what these mirrors expect: a library whose structs differ in layout
// shows other values at the expected offsets.
func checkABI() error {
	if v := Version(); !strings.HasPrefix(v, wantVersionPrefix) {
		return fmt.Errorf("library reports version %q, bindings are for %s", v, wantVersionPrefix)
	}
	mp := ModelDefaultParams()
	if mp.NGPULayers != -1 || mp.SplitMode != 1 || mp.LoadMode != -1 || mp.LazyMode != 1 ||
		mp.VocabOnly || !mp.UseExtraBufts || mp.NoAlloc || mp.LoadMTP {
		return errors.New("llama_model_params does not have the expected layout (another ABI)")
	}
	cp := ContextDefaultParams()
	if cp.NCtx != 512 || cp.NBatch != 2048 || cp.NUbatch != 512 || cp.NSeqMax != 1 ||
		cp.NOutputsMaxPerSeq != 1 || cp.FlashAttnType != -1 || cp.YarnExtFactor != -1 ||
		cp.TypeK != 1 || cp.TypeV != 1 || cp.AbortCallback != 0 || cp.Embeddings ||
		!cp.OffloadKQV || !cp.NoPerf || !cp.OpOffload || !cp.SwaFull || cp.KVUnified ||
		cp.Samplers != 0 || cp.NSamplers != 0 || cp.CtxOther != 0 {
		return errors.New("llama_context_params does not have the expected layout (another ABI)")
	}
	if sp := SamplerChainDefaultParams(); !sp.NoPerf {
		return errors.New("llama_sampler_chain_params does not have the expected layout (another ABI)")
	}
	return nil
}

// libcNames are the C library's file names to try on this system.
func libcNames() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{"/usr/lib/libSystem.B.dylib"}
	case "windows":
		return []string{"msvcrt.dll"}
	default:
		// libdl: dladdr before glibc 2.34
		return []string{"libc.so.6", "libc.so.7", "libc.so", "libdl.so.2"}
	}
}

// libcSym returns the address of the C library's symbol name and the
// library's handle.
func libcSym(name string) (h, sym uintptr, err error) {
	for _, n := range libcNames() {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			continue
		}
		if p, err := purego.Dlsym(h, name); err == nil {
			return h, p, nil
		}
	}
	return 0, 0, fmt.Errorf("llama: cannot find the C library's %s", name)
}

func libcStrlen() (uintptr, error) {
	h, p, err := libcSym("strlen")
	if err != nil {
		return 0, fmt.Errorf("%w for the abort callback", err)
	}
	purego.RegisterLibFunc(&Calloc, h, "calloc")
	purego.RegisterLibFunc(&CFree, h, "free")
	return p, nil
}

// CString copies s into a NUL-terminated string in C memory (free it with
// CFree); nil when out of memory.
func CString(s string) *byte {
	p := Calloc(uintptr(len(s))+1, 1)
	if p == nil {
		return nil
	}
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return (*byte)(p)
}

// GoString copies a NUL-terminated C string.
func GoString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// ProbeLibrary opens the shared library at path and closes it again,
// returning the dynamic loader's error when it cannot be opened (a
// dependency missing, such as the Vulkan loader of a GPU backend).
func ProbeLibrary(path string) error {
	h, err := purego.Dlopen(path, purego.RTLD_LAZY|purego.RTLD_LOCAL)
	if err != nil {
		return err
	}
	_ = purego.Dlclose(h)
	return nil
}
