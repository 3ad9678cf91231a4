package llama

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/capi"
	"github.com/x/llama/lib"
)

// Token is a token id of a model's vocabulary.
type Token int32

// NoToken is the value of a special token the vocabulary does not have.
const NoToken Token = -1

// ErrorCode classifies an [Error].
type ErrorCode int

// Error codes.
const (
	CodeUnknown     ErrorCode = iota
	CodeLibrary               // the shared library is missing or of another ABI
	CodeClosed                // the object was closed
	CodeInvalid               // an argument was out of range or malformed
	CodeLoad                  // a model, adapter or state file failed to load
	CodeNoKVSlot              // the context has no room for the batch
	CodeCanceled              // a context.Context ended the call
	CodeDecode                // llama.cpp reported a decode or encode failure
	CodeGrammar               // a grammar failed to parse
	CodeUnsupported           // the model or context cannot do what was asked
)

var codeNames = [...]string{"unknown", "library", "closed", "invalid argument", "load failed",
	"no KV slot", "canceled", "decode failed", "grammar", "unsupported"}

// String names the code.
func (c ErrorCode) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Error is the error type of this package. Use errors.As to reach its Code,
// or errors.Is with the sentinels ErrClosed, ErrInvalid, ... which match by
// code. When a context.Context ended a call, Err is its error, so
// errors.Is(err, context.Canceled) also holds.
type Error struct {
	Code ErrorCode
	Op   string // the operation, e.g. "decode"
	Msg  string
	Err  error // the underlying error, if any
}

// Error formats the error as "llama: op: message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("llama: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	switch {
	case e.Msg != "" && e.Err != nil:
		b.WriteString(e.Msg + ": " + e.Err.Error())
	case e.Msg != "":
		b.WriteString(e.Msg)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		b.WriteString(e.Code.String())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is a sentinel *Error (no Op, no Msg) of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Msg == "" && t.Err == nil && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrClosed      = &Error{Code: CodeClosed}
	ErrInvalid     = &Error{Code: CodeInvalid}
	ErrLibrary     = &Error{Code: CodeLibrary}
	ErrLoad        = &Error{Code: CodeLoad}
	ErrNoKVSlot    = &Error{Code: CodeNoKVSlot}
	ErrCanceled    = &Error{Code: CodeCanceled}
	ErrDecode      = &Error{Code: CodeDecode}
	ErrGrammar     = &Error{Code: CodeGrammar}
	ErrUnsupported = &Error{Code: CodeUnsupported}
)

func errorf(code ErrorCode, op, format string, args ...any) error {
	return &Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)}
}

func closedErr(op, what string) error {
	return &Error{Code: CodeClosed, Op: op, Msg: what + " is closed"}
}

// LibraryOptions says where the llama.cpp shared library comes from. The
// zero value looks in $LLAMA_LIB_DIR, then in the cache folder, and installs
// the pinned build there when it is missing, showing progress on stderr.
type LibraryOptions struct {
	// Dir is a folder holding the libraries; it must hold them.
	Dir string
	// Flavor picks a GPU build when installing (lib.CUDA, lib.Vulkan).
	Flavor lib.Flavor
	// NoInstall makes a missing library an error instead of installing it.
	NoInstall bool
	// Quiet suppresses install progress.
	Quiet bool
	// MTMD also makes libmtmd (llama.cpp's multimodal library, used by
	// package mtmd) available: when the library's folder has none, Init
	// builds it with lib.InstallMTMD, which needs a C++ compiler and the
	// pinned llama.cpp source in $LLAMA_CPP_SRC and takes minutes. Without
	// it, package mtmd loads a libmtmd installed earlier (go run
	// github.com/x/llama/lib/cmd/llama-install -mtmd) and everything else
	// works without one.
	MTMD bool
}

var (
	initMu sync.Mutex
	inited bool
)

// Init loads the llama.cpp library. Calling it is optional: the first
// LoadModel calls it with the zero LibraryOptions. Only the first successful
// call has an effect; the library stays loaded for the life of the process.
func Init(opts LibraryOptions) error {
	initMu.Lock()
	defer initMu.Unlock()
	if inited {
		return nil
	}
	dir, err := lib.Find(opts.Dir, opts.Flavor)
	if err != nil && !opts.NoInstall && opts.Dir == "" && os.Getenv(lib.EnvDir) == "" {
		var w *os.File
		if !opts.Quiet {
			w = os.Stderr
		}
		o := lib.InstallOptions{Flavor: opts.Flavor}
		if w != nil {
			o.Progress = w
		}
		dir, err = lib.Install(context.Background(), o)
	}
	if err != nil {
		return &Error{Code: CodeLibrary, Op: "init", Err: err}
	}
	if opts.MTMD {
		if _, err := lib.MTMDPath(dir); err != nil {
			o := lib.MTMDOptions{Dir: dir}
			if !opts.Quiet {
				o.Progress = os.Stderr
			}
			if _, err := lib.InstallMTMD(context.Background(), o); err != nil {
				return &Error{Code: CodeLibrary, Op: "init", Err: err}
			}
		}
	}
	files, err := libraryFiles(dir)
	if err != nil {
		return &Error{Code: CodeLibrary, Op: "init", Err: err}
	}
	if err := capi.Load(files); err != nil {
		return &Error{Code: CodeLibrary, Op: "init", Err: err}
	}
	applyLogger()
	inited = true
	return nil
}

// libraryFiles names the libraries of the build in dir for capi: package lib
// knows their file names (the npm build's or llama.cpp's own archives'),
// capi only opens what it is given.
func libraryFiles(dir string) (capi.Files, error) {
	f := capi.Files{BackendDir: dir}
	for _, l := range []struct {
		name string
		path *string
	}{{"llama", &f.Llama}, {"ggml", &f.GGML}, {"ggml-base", &f.GGMLBase}} {
		p, err := lib.LibraryPath(dir, l.name)
		if err != nil {
			return capi.Files{}, err
		}
		*l.path = p
	}
	return f, nil
}

func ensureInit() error {
	initMu.Lock()
	ok := inited
	initMu.Unlock()
	if ok {
		return nil
	}
	return Init(LibraryOptions{})
}

// LibraryDir returns the folder the library was loaded from, once loaded.
func LibraryDir() (string, bool) { return capi.Loaded() }

// SystemInfo returns llama.cpp's description of the CPU features and
// backends in use.
func SystemInfo() (string, error) {
	if err := ensureInit(); err != nil {
		return "", err
	}
	return capi.PrintSystemInfo(), nil
}

// Device is a compute device ggml found.
type Device struct {
	Name        string
	Description string
	Type        string // "cpu", "gpu", "igpu" or "accel"
	FreeMemory  uint64
	TotalMemory uint64
}

// Devices lists the compute devices of the loaded backends.
func Devices() ([]Device, error) {
	if err := ensureInit(); err != nil {
		return nil, err
	}
	types := []string{"cpu", "gpu", "igpu", "accel", "meta"}
	n := capi.BackendDevCount()
	out := make([]Device, 0, n)
	for i := uintptr(0); i < n; i++ {
		d := capi.BackendDevGet(i)
		var free, total uintptr
		capi.BackendDevMemory(d, &free, &total)
		t := capi.BackendDevType(d)
		ts := "unknown"
		if t >= 0 && int(t) < len(types) {
			ts = types[t]
		}
		out = append(out, Device{Name: capi.BackendDevName(d), Description: capi.BackendDevDescription(d),
			Type: ts, FreeMemory: uint64(free), TotalMemory: uint64(total)})
	}
	return out, nil
}

// Logging.

var (
	logMu     sync.Mutex
	logger    *slog.Logger
	logBuf    strings.Builder
	logLevel  slog.Level
	logCB     uintptr
	logCBOnce sync.Once
)

// SetLogger sends llama.cpp's log to l; nil (the default) drops it.
// Messages are logged at the slog level matching ggml's (debug, info, warn,
// error), one record per line.
func SetLogger(l *slog.Logger) {
	logMu.Lock()
	logger = l
	logMu.Unlock()
	initMu.Lock()
	ok := inited
	initMu.Unlock()
	if ok {
		applyLogger()
	}
}

func applyLogger() {
	logMu.Lock()
	l := logger
	logMu.Unlock()
	if l == nil {
		capi.LogSet(capi.NoopFunc, 0)
		bridge.LogChanged(capi.NoopFunc)
		return
	}
	logCBOnce.Do(func() { logCB = purego.NewCallback(logCallback) })
	capi.LogSet(logCB, 0)
	bridge.LogChanged(logCB)
}

func logCallback(level int32, text *byte, _ uintptr) uintptr {
	s := cstring(text)
	logMu.Lock()
	defer logMu.Unlock()
	if logger == nil {
		return 0
	}
	switch level {
	case 1:
		logLevel = slog.LevelDebug
	case 2:
		logLevel = slog.LevelInfo
	case 3:
		logLevel = slog.LevelWarn
	case 4:
		logLevel = slog.LevelError
	}
	logBuf.WriteString(s)
	for {
		all := logBuf.String()
		i := strings.IndexByte(all, '\n')
		if i < 0 {
			break
		}
		line := all[:i]
		rest := all[i+1:]
		logBuf.Reset()
		logBuf.WriteString(rest)
		if line != "" {
			logger.Log(context.Background(), logLevel, line, "source", "llama.cpp")
		}
	}
	return 0
}

func cstring(p *byte) string {
	if p == nil {
		return ""
	}
	return capi.GoString(unsafe.Pointer(p))
}
