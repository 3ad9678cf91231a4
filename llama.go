package llama

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
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
	CodeBusy                  // another goroutine is using the object, or it is still in use
	CodeRPC                   // an RPC worker is unreachable, not a worker, of another version, or failed
)

var codeNames = [...]string{"unknown", "library", "closed", "invalid argument", "load failed",
	"no KV slot", "canceled", "decode failed", "grammar", "unsupported", "busy", "rpc"}

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
// errors.Is(err, context.Canceled) also holds. A grammar or JSON Schema
// that is malformed (Code CodeGrammar, reported before any generation)
// matches ErrInvalid as well as ErrGrammar, since it is bad input.
type Error struct {
	Code ErrorCode
	Op   string // the operation, e.g. "decode"
	Msg  string
	Err  error // the underlying error, if any

	input bool // bad input: also matches ErrInvalid
	work  bool // a grammar failed for the work its engine would do (see grammarSampler.take)
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
	return ok && t.Op == "" && t.Msg == "" && t.Err == nil && (t.Code == e.Code || e.input && t.Code == CodeInvalid)
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
	// ErrBusy reports a Context used by two goroutines at once (Generate,
	// Decode... on one Context must not overlap), or an Adapter closed
	// while a Context still uses it.
	ErrBusy = &Error{Code: CodeBusy}
	// ErrRPC reports an RPC worker (ModelOptions.RPCServers) that cannot
	// be used or that failed.
	ErrRPC = &Error{Code: CodeRPC}
)

// PanicError is a Go panic turned into an error: a panic of a Custom
// sampler's method, which llama.cpp calls (a panic must not unwind through
// its frames, which would leave its state half changed), or of a
// SampleParallel job on a helper goroutine (which would end the process).
// The package engine reports the panics it recovers in its loop (in a
// drafter, a sampler, its own code) the same way. It is a failure of the
// program, not of the input: a server answers it as an internal error.
type PanicError struct {
	Op    string // where it happened, e.g. "custom sampler top3: apply"
	Value any    // the value given to panic
	Stack []byte // the panicking goroutine's stack (runtime/debug.Stack)
}

// NewPanicError returns a PanicError for v, the value of recover, with
// the stack of the calling goroutine; call it from the deferred function
// that recovered, so that the stack shows where the panic was raised.
func NewPanicError(op string, v any) *PanicError {
	return &PanicError{Op: op, Value: v, Stack: debug.Stack()}
}

// Error formats the error as "llama: op: panic: value".
func (e *PanicError) Error() string {
	return fmt.Sprintf("llama: %s: panic: %v", e.Op, e.Value)
}

// Unwrap returns the value given to panic when it is an error (a runtime
// error, say), else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

func errorf(code ErrorCode, op, format string, args ...any) error {
	return &Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)}
}

func closedErr(op, what string) error {
	return &Error{Code: CodeClosed, Op: op, Msg: what + " is closed"}
}

// LibraryOptions says where the llama.cpp shared library comes from. The
// zero value looks in $LLAMA_LIB_DIR, then in the cache folder, and reports
// a missing library as an error (matching ErrLibrary) that names the
// command installing it: installing is an explicit act, with
// `go run github.com/x/llama/lib/cmd/llama-install`, lib.Install, or
// Install here.
type LibraryOptions struct {
	// Dir is a folder holding the libraries; it must hold them.
	Dir string
	// Flavor picks a GPU build (lib.CUDA, lib.Vulkan; lib.CUDALocal for
	// the CUDA build made on the machine by llama-install -flavor cuda -build).
	Flavor lib.Flavor
	// Install installs the pinned build into the cache folder when it is
	// missing there (never into Dir or $LLAMA_LIB_DIR, which must hold
	// it), through the npm client, showing progress on stderr.
	Install bool
	// Quiet suppresses install progress.
	Quiet bool
	// Insecure allows installing a build with no pinned checksum (see
	// lib.InstallOptions.Insecure): on platforms with no npm package.
	Insecure bool
	// MTMD also makes libmtmd (llama.cpp's multimodal library, used by
	// package mtmd) available: when the library's folder has none, Init
	// builds it with lib.InstallMTMD, which needs a C++ compiler and the
	// pinned llama.cpp source in $LLAMA_CPP_SRC and takes minutes. Without
	// it, package mtmd loads a libmtmd installed earlier (go run
	// github.com/x/llama/lib/cmd/llama-install -mtmd) and everything else
	// works without one.
	MTMD bool
	// NUMA is how ggml places its compute threads on a machine of several
	// NUMA nodes (llama-server's --numa), set when the library loads. A
	// machine of one node is unaffected.
	NUMA NUMAStrategy
}

// NUMAStrategy is a placement of the compute threads over NUMA nodes.
type NUMAStrategy int

// NUMA strategies, as llama.cpp's --numa names them.
const (
	NUMANone       NUMAStrategy = iota // no NUMA placement (the default)
	NUMADistribute                     // spread the threads evenly over all nodes
	NUMAIsolate                        // keep the threads on the node the process started on
	NUMANumactl                        // use the CPU map numactl gave the process
)

var (
	initMu sync.Mutex
	inited bool
)

// Init loads the llama.cpp library. Calling it is optional: the first
// LoadModel calls it with the zero LibraryOptions, which finds an installed
// library and never installs one; call Init with Install first to install
// it when missing. Only the first successful call has an effect; the
// library stays loaded for the life of the process.
func Init(opts LibraryOptions) error {
	return initLibrary(context.Background(), opts)
}

// initLibrary is Init whose install, if any, stops when ctx ends.
func initLibrary(ctx context.Context, opts LibraryOptions) error {
	initMu.Lock()
	defer initMu.Unlock()
	if inited {
		return nil
	}
	dir, err := lib.Find(opts.Dir, opts.Flavor)
	explicit := opts.Dir != "" || os.Getenv(lib.EnvDir) != ""
	switch {
	case err == nil:
	case opts.Install && !explicit:
		o := lib.InstallOptions{Flavor: opts.Flavor, Insecure: opts.Insecure}
		if !opts.Quiet {
			o.Progress = os.Stderr
		}
		if dir, err = lib.Install(ctx, o); err != nil {
			if ctx.Err() != nil {
				return &Error{Code: CodeCanceled, Op: "init", Err: err}
			}
			return &Error{Code: CodeLibrary, Op: "init", Err: err}
		}
	default:
		return &Error{Code: CodeLibrary, Op: "init", Msg: notInstalled(opts), Err: err}
	}
	if opts.MTMD {
		if _, err := lib.MTMDPath(dir); err != nil {
			o := lib.MTMDOptions{Dir: dir}
			if !opts.Quiet {
				o.Progress = os.Stderr
			}
			if _, err := lib.InstallMTMD(ctx, o); err != nil {
				return &Error{Code: CodeLibrary, Op: "init", Err: err}
			}
		}
	}
	files, err := libraryFiles(dir)
	if err != nil {
		return &Error{Code: CodeLibrary, Op: "init", Err: err}
	}
	if opts.NUMA < NUMANone || opts.NUMA > NUMANumactl {
		return errorf(CodeInvalid, "init", "unknown NUMA strategy %d", opts.NUMA)
	}
	if err := capi.Load(files); err != nil {
		return &Error{Code: CodeLibrary, Op: "init", Err: err}
	}
	if opts.NUMA != NUMANone {
		capi.NumaInit(int32(opts.NUMA)) // ggml's values: distribute 1, isolate 2, numactl 3
	}
	applyLogger()
	inited = true
	return nil
}

// notInstalled says how to install the library Init did not find.
func notInstalled(opts LibraryOptions) string {
	cmd := lib.InstallCommand
	if opts.Flavor != lib.CPU {
		cmd += " -flavor " + string(opts.Flavor)
	}
	dir := opts.Dir
	if dir == "" {
		dir = os.Getenv(lib.EnvDir)
	}
	if dir != "" {
		return fmt.Sprintf("the llama.cpp library is not installed in %s: install it with `%s -dir %s`", dir, cmd, dir)
	}
	return fmt.Sprintf("the llama.cpp library is not installed: install it with `%s`, lib.Install, "+
		"or llama.Init(llama.LibraryOptions{Install: true})", cmd)
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

// ensureInit loads the library where Init with the zero LibraryOptions
// finds it, unless it is loaded.
func ensureInit() error {
	initMu.Lock()
	ok := inited
	initMu.Unlock()
	if ok {
		return nil
	}
	return initLibrary(context.Background(), LibraryOptions{})
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
	logger    atomic.Pointer[slog.Logger]
	logLevel  atomic.Int64 // slog.Level of the last message, for continuations
	logMu     sync.Mutex   // guards logBuf only; never held while logging
	logBuf    []byte       // a partial line awaiting its end
	logHeld   atomic.Bool  // logBuf is not empty
	logCB     uintptr
	logCBOnce sync.Once

	// The last error lines llama.cpp logged, kept whatever the logger, so
	// that a call that fails can say why (llama.cpp reports the reason of
	// a failed load only in its log).
	errLogMu  sync.Mutex
	errLogSeq uint64 // error lines seen so far
	errLog    [8]string
)

// maxLogErrorLine bounds the bytes kept of one error line.
const maxLogErrorLine = 512

// noteLogError keeps an error line of llama.cpp's log.
func noteLogError(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	if len(s) > maxLogErrorLine {
		// A name from a model file can make a line long; it goes into
		// errors that reach HTTP clients.
		s = strings.ToValidUTF8(s[:maxLogErrorLine], "") + "…"
	}
	errLogMu.Lock()
	errLog[errLogSeq%uint64(len(errLog))] = s
	errLogSeq++
	errLogMu.Unlock()
}

// logErrorMark returns the mark of the error lines logged so far.
func logErrorMark() uint64 {
	errLogMu.Lock()
	defer errLogMu.Unlock()
	return errLogSeq
}

// allocHint is "; " and what to do, when llama.cpp's reason why says a
// buffer could not be allocated: a model or a context larger than the
// device's free memory.
func allocHint(why, do string) string {
	switch {
	case !strings.Contains(why, "allocate"):
		return ""
	case strings.Contains(why, "allocate CPU"):
		return "; there is not enough free memory for it" // offloading fewer layers will not help
	}
	return "; there is not enough free memory for it: " + do
}

// llamaSaid returns what llama.cpp logged as an error since mark: the
// line that gives the reason (its "error loading model:" or "failed to
// ..." line, without the function name before it), or "". Lines of
// other calls running at the same time may be among them.
func llamaSaid(mark uint64) string {
	errLogMu.Lock()
	var lines []string
	for i := max(mark, errLogSeq-min(errLogSeq, uint64(len(errLog)))); i < errLogSeq; i++ {
		lines = append(lines, errLog[i%uint64(len(errLog))])
	}
	errLogMu.Unlock()
	best := ""
	for _, l := range lines {
		if _, after, ok := strings.Cut(l, "error loading model: "); ok {
			return after
		}
		if _, after, ok := strings.Cut(l, "failed to initialize the context: "); ok {
			return after
		}
		if best == "" && !strings.HasSuffix(l, ": failed to load model") {
			best = l
		}
	}
	if _, after, ok := strings.Cut(best, ": "); ok && !strings.ContainsAny(best[:len(best)-len(after)-2], " ") {
		best = after // "func_name: reason"
	}
	return best
}

// SetLogger sends llama.cpp's log to l; nil (the default) drops it.
// Messages are logged at the slog level matching ggml's (debug, info, warn,
// error), one record per line. Records from several threads are logged
// concurrently (no lock is held while l handles one).
func SetLogger(l *slog.Logger) {
	logger.Store(l)
	initMu.Lock()
	ok := inited
	initMu.Unlock()
	if ok {
		applyLogger()
	}
}

func applyLogger() {
	// The callback stays installed without a logger: it keeps llama.cpp's
	// error lines for the errors of failed calls (llamaSaid).
	logCBOnce.Do(func() { logCB = purego.NewCallback(logCallback) })
	capi.LogSet(logCB, 0)
	bridge.LogChanged(logCB)
}

func logCallback(level int32, text *byte, _ uintptr) uintptr {
	// A handler that panics loses its line: the panic must not unwind
	// through llama.cpp's frames.
	defer func() { _ = recover() }()
	if level == 4 {
		noteLogError(cstring(text))
	}
	l := logger.Load()
	if l == nil {
		return 0
	}
	lv := slog.Level(logLevel.Load())
	switch level {
	case 1:
		lv = slog.LevelDebug
	case 2:
		lv = slog.LevelInfo
	case 3:
		lv = slog.LevelWarn
	case 4:
		lv = slog.LevelError
	}
	logLevel.Store(int64(lv))
	s := cstring(text)
	if !logHeld.Load() && strings.HasSuffix(s, "\n") {
		// Whole lines and nothing pending: no lock at all.
		logLines(l, lv, s)
		return 0
	}
	logMu.Lock()
	logBuf = append(logBuf, s...)
	var lines string
	if i := strings.LastIndexByte(string(logBuf), '\n'); i >= 0 {
		lines = string(logBuf[:i+1])
		logBuf = append(logBuf[:0], logBuf[i+1:]...)
	}
	logHeld.Store(len(logBuf) > 0)
	logMu.Unlock()
	logLines(l, lv, lines)
	return 0
}

// logLines logs each non-empty line of s (s ends with a newline or is "").
func logLines(l *slog.Logger, lv slog.Level, s string) {
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			i = len(s)
		}
		if line := s[:i]; line != "" {
			l.Log(context.Background(), lv, line, "source", "llama.cpp")
		}
		s = s[min(i+1, len(s)):]
	}
}

func cstring(p *byte) string {
	if p == nil {
		return ""
	}
	return capi.GoString(unsafe.Pointer(p))
}
