package llama

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/pretok"
	"golang.org/x/sync/semaphore"
)

// LoadMode says how model weights are read.
type LoadMode int

// Load modes. The zero value lets llama.cpp pick (mmap where supported).
const (
	LoadAuto      LoadMode = iota // llama.cpp decides (mmap where supported)
	LoadRead                      // read into memory, no mmap
	LoadMmap                      // memory-map the file
	LoadMlock                     // read and lock in RAM
	LoadMmapMlock                 // memory-map and lock in RAM
	LoadDirectIO                  // direct I/O where available
)

// LazyMode says whether llama.cpp reads the tensors an architecture marks
// (such as Gemma 4's per-layer token embeddings, of which a token uses one
// row) from the mapped file on demand instead of keeping them resident.
type LazyMode int

// Lazy modes. The zero value is llama.cpp's default.
const (
	LazyAuto LazyMode = iota // on demand for marked tensors over 4 GiB
	LazyOn                   // on demand for every marked tensor (needs mmap)
	LazyOff                  // every tensor resident
)

// SplitMode says how a model is split across several GPUs.
type SplitMode int

// Split modes. The zero value is llama.cpp's default (by layer).
const (
	SplitLayer  SplitMode = iota // split layers and KV across GPUs (default)
	SplitNone                    // use MainGPU only
	SplitRow                     // split rows (tensor parallelism where supported)
	SplitTensor                  // split tensors
)

// ModelOptions configures LoadModel. The zero value loads every layer on a
// GPU when one exists, lets llama.cpp choose mmap, and loads weights.
type ModelOptions struct {
	// GPULayers is how many layers to offload to GPUs; 0 means all of them
	// (llama.cpp's default). Set CPUOnly to offload none.
	GPULayers int
	// CPUOnly keeps every layer on the CPU.
	CPUOnly bool
	// Split is how layers are split across GPUs; MainGPU is used with SplitNone.
	Split   SplitMode
	MainGPU int
	// TensorSplit is the proportion of the model per GPU (nil: by free memory).
	TensorSplit []float32
	// Load says how weights are read.
	Load LoadMode
	// Lazy says whether marked tensors are read on demand (llama.cpp's
	// --lazy-mode): LazyOn saves the RAM of Gemma 4's per-layer
	// embeddings at the cost of a read per token and layer. A mode
	// outside the constants is an error.
	Lazy LazyMode
	// VocabOnly loads only the vocabulary and metadata: such a model
	// tokenizes, detokenizes and checks grammars, but has no weights, so
	// NewContext refuses it (ErrUnsupported).
	VocabOnly bool
	// CheckTensors validates tensor data while loading.
	CheckTensors bool
	// NoRepack keeps the weights on the CPU as stored instead of
	// repacking the ones its SIMD kernels read faster in another layout
	// (llama.cpp's extra buffer types, such as CPU_REPACK), which copies
	// them out of the mapped file (--no-repack).
	NoRepack bool
	// NoHost loads the weights bound for a GPU without a pinned host
	// buffer, which lets the extra buffer types be used (--no-host).
	NoHost bool
	// KVOverrides replace metadata values: int, int64, float64, bool or
	// string values (keys and strings up to 127 bytes).
	KVOverrides map[string]any
	// TensorBufferOverrides place the weights matching a pattern in a
	// buffer type, such as the MoE experts on the CPU (llama.cpp's -ot,
	// --cpu-moe...); an unknown buffer type is an error listing the known
	// ones (see BufferTypes).
	TensorBufferOverrides []TensorBufferOverride
	// Devices are the devices to offload to, by name (the Devices whose
	// Type is not "cpu"; nil: all of them). The CPU is not one: CPUOnly
	// keeps the model there. A CUDA device the installed build cannot
	// run on (see CheckDevices) is left out of the default, with a
	// warning, and fails the load with CodeUnsupported when named.
	Devices []string
	// RPCServers are llama.cpp RPC workers (rpc-server, see AddRPCServer)
	// as host:port, at most 16: their devices join Devices, and the
	// layers offloaded (GPULayers, all by default) are split across them
	// by TensorSplit (nil: in proportion to their free memory), the rest
	// staying on the local CPU. An unreachable address, a port where no
	// worker listens or a worker of another version fails the load with
	// Code CodeRPC; a worker failing later fails the model (Model.RPCErr).
	RPCServers []string
	// MTP also loads the model's multi-token-prediction blocks
	// (Info.MTPLayers), for a draft context on the same model
	// (ContextOptions.MTP, and draft.MTP); they take memory beside the
	// trunk. A model without them loads as without MTP.
	MTP bool
	// Progress, when set, is called with the load progress in [0, 1].
	Progress func(progress float32)
	// Fit lowers the layers offloaded by default (GPULayers 0) when, by
	// the tensors' sizes, they would not fit the GPUs' free memory less
	// Fit.Margin on each, with room for the offloaded layers' KV cache of
	// a context of Fit.MinContext (llama-server's --fit); the rest stay on
	// the CPU, with a warning in the log. A mixture of experts offloads
	// its layers' dense parts first, then the experts that fit, from the
	// first layer. Only the default layer split is planned: not with
	// TensorSplit, TensorBufferOverrides or RPCServers. Fit.Off offloads
	// every layer whatever the memory.
	Fit FitOptions
}

// Model is a loaded GGUF model and its vocabulary.
//
// A Model is safe for concurrent use. Close frees it together with every
// Context, Adapter and SamplerChain made from it (contexts first, which
// ends their Generate calls with ErrClosed); Close waits for calls in
// progress on the Model to return, and calls after Close return ErrClosed.
// Methods on a nil *Model return errors matching ErrInvalid (or zero
// values).
type Model struct {
	modelLink              // for package mtmd (bridge.go)
	mu        sync.RWMutex // read-held by calls, write-held by Close
	runlock   func()       // mu.RUnlock, made once: use returns it per call
	ptr       capi.Model
	// underUse: Close found contexts open (see closedErr).
	underUse atomic.Bool
	vocab    capi.Vocab
	nVocb    int32
	path     string
	// mtp: loaded with ModelOptions.MTP.
	mtp bool
	// encoderOnly: encoder without decoder (BERT-like); Embed encodes.
	encoderOnly bool
	vocabOnly   bool                // ModelOptions.VocabOnly: no weights, no context
	tokenizing  *semaphore.Weighted // text bytes being tokenized (maxTokenizing)
	bpeOnce     sync.Once           // bpe: the vocabulary is BPE (see isBPE)
	bpe         bool
	specialOnce sync.Once // special: the vocabulary's special tokens
	special     SpecialTokens

	childMu  sync.Mutex
	children map[closer]struct{}

	byteOnce sync.Once // byte tokens, for Grammar.Match
	byteTok  [256]Token
	hasBytes bool

	gvOnce sync.Once // gv: the vocabulary as grammars filter it
	gv     *grammarVocab

	onGPU      bool      // its layers run on a GPU (OnGPU)
	gpuLayers  int32     // llama_model_params.n_gpu_layers (-1: all)
	gpuDevices []string  // the devices it was pinned to (gpuPinned)
	gpuPinned  bool      // gpuDevices are the only ones it may use
	mapped     bool      // its weights are mapped from the file
	size       uint64    // bytes of its tensors
	kvOnce     sync.Once // kv, kvErr: its KV cache per cell (FitContext)
	kv         kvShape
	kvErr      error
	rpcServers []string              // the workers it uses
	rpcDevices []Device              // their devices, at load
	rpcErr     atomic.Pointer[Error] // a worker failed
}

type closer interface{ closeFromParent() }

// progress callbacks: one C callback for the process, dispatched by id.
var (
	progressCB     uintptr
	progressCBOnce sync.Once
	progressFns    sync.Map // uintptr → func(float32) bool
	progressID     atomic.Uintptr
)

// progressTrampoline calls the load's progress function. A panic there
// stops the load (it must not unwind through llama.cpp's frames) and is
// the load's error, kept in progressPanics.
func progressTrampoline(p float32, user uintptr) (goOn bool) {
	f, ok := progressFns.Load(user)
	if !ok {
		return true
	}
	defer func() {
		if v := recover(); v != nil {
			progressPanics.Store(user, NewPanicError("load model: progress", v))
			goOn = false
		}
	}()
	return f.(func(float32) bool)(p)
}

// progressPanics holds the panic of a load's progress function, by id.
var progressPanics sync.Map // uintptr → *PanicError

// LoadModel loads a GGUF model. A split model loads from the path of its
// first split (name-00001-of-0000N.gguf); LoadModelSplits takes the paths
// explicitly. Cancelling ctx aborts the load. The first LoadModel loads the
// library where Init with the zero LibraryOptions finds it (it never
// installs it; see Init).
func LoadModel(ctx context.Context, path string, opts ModelOptions) (*Model, error) {
	return loadModel(ctx, []string{path}, opts)
}

// LoadModelSplits loads a model stored in several files, given in order.
func LoadModelSplits(ctx context.Context, paths []string, opts ModelOptions) (*Model, error) {
	if len(paths) == 0 {
		return nil, errorf(CodeInvalid, "load model", "no paths")
	}
	return loadModel(ctx, paths, opts)
}

func loadModel(ctx context.Context, paths []string, opts ModelOptions) (*Model, error) {
	if ctx == nil {
		return nil, errorf(CodeInvalid, "load model", "nil context.Context")
	}
	if err := ensureInit(); err != nil {
		return nil, err
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, &Error{Code: CodeLoad, Op: "load model", Err: err}
		}
		if st.IsDir() {
			return nil, errorf(CodeLoad, "load model", "%s is a folder", p)
		}
	}
	// Damage llama.cpp would abort the process on is refused here; the
	// first file of a split model holds the hyperparameters.
	for i, p := range paths {
		if err := checkGGUF(p, opts.KVOverrides, i == 0 && !opts.VocabOnly); err != nil {
			return nil, errorf(CodeLoad, "load model", "%s: %v", p, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Code: CodeCanceled, Op: "load model", Err: err}
	}
	p := capi.ModelDefaultParams()
	switch {
	case opts.CPUOnly:
		p.NGPULayers = 0
	case opts.GPULayers > 0:
		p.NGPULayers = int32(min(opts.GPULayers, math.MaxInt32))
	case opts.GPULayers < 0:
		return nil, errorf(CodeInvalid, "load model", "negative GPULayers %d", opts.GPULayers)
	}
	if opts.Split < 0 || opts.Split > 3 {
		return nil, errorf(CodeInvalid, "load model", "unknown Split mode %d", opts.Split)
	}
	p.SplitMode = [...]int32{1, 0, 2, 3}[opts.Split]
	p.MainGPU = int32(opts.MainGPU)
	if opts.Load < LoadAuto || opts.Load > LoadDirectIO {
		return nil, errorf(CodeInvalid, "load model", "unknown Load mode %d", opts.Load)
	}
	p.LoadMode = [...]int32{-1, 0, 1, 2, 3, 4}[opts.Load]
	switch opts.Lazy {
	case LazyAuto:
		p.LazyMode = 1
	case LazyOn:
		p.LazyMode = 2
	case LazyOff:
		p.LazyMode = 0
	default:
		return nil, errorf(CodeInvalid, "load model", "unknown Lazy mode %d", opts.Lazy)
	}
	p.VocabOnly = opts.VocabOnly
	p.CheckTensors = opts.CheckTensors
	p.LoadMTP = opts.MTP && !opts.VocabOnly
	p.UseExtraBufts, p.NoHost = !opts.NoRepack, opts.NoHost
	var keep []any
	if len(opts.TensorSplit) > 0 {
		maxDev := int(capi.MaxDevices())
		if len(opts.TensorSplit) > maxDev {
			return nil, errorf(CodeInvalid, "load model", "TensorSplit has %d entries, at most %d devices", len(opts.TensorSplit), maxDev)
		}
		ts := make([]float32, maxDev)
		copy(ts, opts.TensorSplit)
		keep = append(keep, ts)
		p.TensorSplit = uintptr(unsafe.Pointer(&ts[0]))
	}
	if len(opts.KVOverrides) > 0 {
		ov, err := kvOverrides(opts.KVOverrides)
		if err != nil {
			return nil, err
		}
		keep = append(keep, ov)
		p.KVOverrides = uintptr(unsafe.Pointer(&ov[0]))
	}
	// A device this build cannot run on is left out (or, when named,
	// refused) before llama.cpp places anything there: ggml would abort
	// the process on the first kernel (see CheckDevices).
	gpuNames, pinDevices := opts.Devices, len(opts.Devices) > 0
	if !opts.VocabOnly {
		var err error
		if gpuNames, pinDevices, err = modelDevices(opts.Devices); err != nil {
			return nil, err
		}
		if err := refusedBufferType(opts.TensorBufferOverrides); err != nil {
			return nil, err
		}
	}
	if n, ovs, ok := planLayers(paths, opts, gpuNames, pinDevices); ok {
		p.NGPULayers, opts.TensorBufferOverrides = n, ovs
	}
	if len(opts.TensorBufferOverrides) > 0 {
		ov, strs, err := tensorOverrides(opts.TensorBufferOverrides)
		if err != nil {
			return nil, err
		}
		keep = append(keep, ov, strs)
		p.TensorBuftOverrides = uintptr(unsafe.Pointer(&ov[0]))
	}
	var rpcInfo []Device
	var rpcLoaded *bool // set once the model holds its claim on the workers
	if pinDevices || len(opts.RPCServers) > 0 {
		devs := []uintptr{0}
		if len(gpuNames) > 0 {
			var err error
			if devs, err = deviceList(gpuNames); err != nil {
				return nil, err
			}
		}
		if len(opts.RPCServers) > 0 {
			rdevs, info, err := rpcModelDevices(ctx, opts.RPCServers)
			if err != nil {
				return nil, err
			}
			loaded := false
			defer func() {
				if !loaded {
					rpcRelease(opts.RPCServers)
				}
			}()
			rpcLoaded = &loaded
			devs = append(append(devs[:len(devs)-1:len(devs)-1], rdevs...), 0)
			rpcInfo = info
		}
		keep = append(keep, devs)
		p.Devices = uintptr(unsafe.Pointer(&devs[0]))
	}
	var id uintptr
	if opts.Progress != nil || ctx.Done() != nil {
		progressCBOnce.Do(func() { progressCB = purego.NewCallback(progressTrampoline) })
		id = progressID.Add(1)
		progressFns.Store(id, func(f float32) bool {
			if opts.Progress != nil {
				opts.Progress(f)
			}
			return ctx.Err() == nil
		})
		defer progressFns.Delete(id)
		defer progressPanics.Delete(id)
		p.ProgressCallback = progressCB
		p.ProgressCallbackUserData = id
	}
	var m capi.Model
	shell := &Model{rpcServers: opts.RPCServers}
	mark := logErrorMark()
	if len(paths) == 1 {
		if err := shell.rpcGuard("load model", func() { m = capi.ModelLoadFromFile(paths[0], p) }); err != nil {
			return nil, err
		}
	} else {
		cs := make([][]byte, len(paths))
		ptrs := make([]uintptr, len(paths))
		for i, s := range paths {
			cs[i] = append([]byte(s), 0)
			ptrs[i] = uintptr(unsafe.Pointer(&cs[i][0]))
		}
		if err := shell.rpcGuard("load model", func() {
			m = capi.ModelLoadFromSplits(unsafe.Pointer(&ptrs[0]), uintptr(len(ptrs)), p)
		}); err != nil {
			return nil, err
		}
		keep = append(keep, cs)
	}
	runtime.KeepAlive(keep)
	if m == 0 {
		if v, ok := progressPanics.Load(id); ok && id != 0 {
			return nil, v.(*PanicError)
		}
		if err := ctx.Err(); err != nil {
			return nil, &Error{Code: CodeCanceled, Op: "load model", Err: err}
		}
		if why := llamaSaid(mark); why != "" {
			return nil, errorf(CodeLoad, "load model", "llama.cpp could not load %s: %s%s", paths[0], why, allocHint(why, "offload fewer layers (ModelOptions.GPULayers, -ngl)"))
		}
		return nil, errorf(CodeLoad, "load model", "llama.cpp could not load %s (not a GGUF model it supports, or corrupt)", paths[0])
	}
	v := capi.ModelGetVocab(m)
	model := &Model{ptr: m, vocab: v, nVocb: capi.VocabNTokens(v), path: paths[0], children: map[closer]struct{}{},
		encoderOnly: capi.ModelHasEncoder(m) && !capi.ModelHasDecoder(m)}
	model.runlock = model.mu.RUnlock
	model.tokenizing = semaphore.NewWeighted(maxTokenizing)
	model.mtp = opts.MTP && !opts.VocabOnly
	model.vocabOnly = opts.VocabOnly
	model.modelLink = bridge.NewModel((*modelBridge)(model))
	if devs, err := Devices(); err == nil && !opts.VocabOnly && len(opts.RPCServers) == 0 {
		model.onGPU = offloadsToGPU(p.NGPULayers, gpuNames, pinDevices, devs)
	}
	model.gpuLayers, model.size = p.NGPULayers, capi.ModelSize(m)
	model.mapped = opts.Load == LoadAuto || opts.Load == LoadMmap || opts.Load == LoadMmapMlock
	model.gpuDevices, model.gpuPinned = slices.Clone(gpuNames), pinDevices
	if len(opts.RPCServers) > 0 {
		model.rpcServers = slices.Clone(opts.RPCServers)
		model.rpcDevices = rpcInfo
		rpcTrack(model)
		*rpcLoaded = true
	}
	return model, nil
}

func kvOverrides(kv map[string]any) ([]capi.ModelKVOverride, error) {
	out := make([]capi.ModelKVOverride, 0, len(kv)+1)
	for k, v := range kv {
		var o capi.ModelKVOverride
		if len(k) == 0 || len(k) >= len(o.Key) {
			return nil, errorf(CodeInvalid, "load model", "override key %q must have 1 to %d bytes", k, len(o.Key)-1)
		}
		copy(o.Key[:], k)
		val := (*[128]byte)(unsafe.Pointer(&o.Value))
		switch x := v.(type) {
		case int:
			o.Tag = capi.KVOverrideInt
			*(*int64)(unsafe.Pointer(val)) = int64(x)
		case int64:
			o.Tag = capi.KVOverrideInt
			*(*int64)(unsafe.Pointer(val)) = x
		case float64:
			o.Tag = capi.KVOverrideFloat
			*(*float64)(unsafe.Pointer(val)) = x
		case bool:
			o.Tag = capi.KVOverrideBool
			if x {
				val[0] = 1
			}
		case string:
			if len(x) >= len(val) {
				return nil, errorf(CodeInvalid, "load model", "override %q: string longer than %d bytes", k, len(val)-1)
			}
			o.Tag = capi.KVOverrideStr
			copy(val[:], x)
		default:
			return nil, errorf(CodeInvalid, "load model", "override %q: unsupported type %T", k, v)
		}
		out = append(out, o)
	}
	return append(out, capi.ModelKVOverride{}), nil // key "" ends the list
}

// closedErr is the ErrClosed error of a call on a closed context, which
// names the cause when the context's model was closed under it.
func (c *Context) closedErr(op string) error {
	if c.byModel.Load() {
		return &Error{Code: CodeClosed, Op: op, Msg: "context is closed: its Model was closed first (close an engine or context before its model)"}
	}
	return closedErr(op, "context")
}

// Close frees the model and everything made from it. It is idempotent.
// A NewContext, NewSamplerChain or LoadAdapter racing with Close either
// finishes first (and its result is closed with the model) or fails with
// ErrClosed. Closing a nil *Model returns an error matching ErrInvalid.
//
// Close what uses the model first: an engine (engine.Engine.Close) or a
// server, then the model. Closing the model under them is safe but ends
// their work: their contexts are closed with the model, and every call on
// such a context (the engine's requests among them) then fails with an
// error matching ErrClosed that says the model was closed first.
func (m *Model) Close() error {
	if m == nil {
		return errorf(CodeInvalid, "close", "nil *Model")
	}
	m.childMu.Lock()
	kids := make([]closer, 0, len(m.children))
	for c := range m.children {
		kids = append(kids, c)
	}
	// nil from now on: addChild refuses, so that a child being created
	// meanwhile is freed by its maker instead of outliving the model.
	m.children = nil
	m.childMu.Unlock()
	// Contexts first (they stop using adapters and chains), then the rest.
	rank := func(c closer) int {
		switch c.(type) {
		case *Context:
			return 0
		case *SamplerChain:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(kids, func(a, b closer) int { return rank(a) - rank(b) })
	for _, c := range kids {
		if cx, ok := c.(*Context); ok {
			cx.byModel.Store(true)
			m.underUse.Store(true)
		}
		c.closeFromParent()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr != 0 {
		ptr := m.ptr
		m.ptr = 0
		m.vocab = 0
		if len(m.rpcServers) > 0 {
			// After a worker failed, its buffers cannot be freed: left.
			_ = m.rpcGuard("close", func() { capi.ModelFree(ptr) })
			rpcUntrack(m)
		} else {
			capi.ModelFree(ptr)
		}
	}
	return nil
}

func (m *Model) addChild(c closer) bool {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	if m.children == nil {
		return false
	}
	m.children[c] = struct{}{}
	return true
}

func (m *Model) removeChild(c closer) {
	m.childMu.Lock()
	delete(m.children, c)
	m.childMu.Unlock()
}

// use read-locks the model for a call; it reports ErrClosed after Close.
func (m *Model) use(op string) (func(), error) {
	if m == nil {
		return nil, errorf(CodeInvalid, op, "nil *Model")
	}
	m.mu.RLock()
	if m.ptr == 0 {
		m.mu.RUnlock()
		return nil, m.closedErr(op)
	}
	return m.runlock, nil
}

// closedErr is the ErrClosed error of a call on the closed model, which
// says so when Close found contexts still open (an engine's, say).
func (m *Model) closedErr(op string) error {
	if m.underUse.Load() {
		return &Error{Code: CodeClosed, Op: op, Msg: "model is closed: it was closed while contexts made from it were open (close an engine or context before its model)"}
	}
	return closedErr(op, "model")
}

// Path returns the file the model was loaded from.
func (m *Model) Path() string {
	if m == nil {
		return ""
	}
	return m.path
}

// Metadata.

func (m *Model) strCall(op string, f func(buf unsafe.Pointer, n uintptr) int32) (string, bool) {
	buf := make([]byte, 256)
	for {
		n := f(unsafe.Pointer(&buf[0]), uintptr(len(buf)))
		if n < 0 {
			return "", false
		}
		if int(n) < len(buf) {
			return string(buf[:n]), true
		}
		buf = make([]byte, int(n)+1)
	}
}

// Meta returns every metadata key and value of the model, values rendered
// as strings by llama.cpp (arrays are summarized by it).
func (m *Model) Meta() (map[string]string, error) {
	done, err := m.use("meta")
	if err != nil {
		return nil, err
	}
	defer done()
	n := capi.ModelMetaCount(m.ptr)
	out := make(map[string]string, n)
	for i := int32(0); i < n; i++ {
		k, _ := m.strCall("meta", func(b unsafe.Pointer, s uintptr) int32 { return capi.ModelMetaKeyByIndex(m.ptr, i, b, s) })
		v, _ := m.strCall("meta", func(b unsafe.Pointer, s uintptr) int32 { return capi.ModelMetaValStrByIndex(m.ptr, i, b, s) })
		out[k] = v
	}
	return out, nil
}

// MetaValue returns one metadata value.
func (m *Model) MetaValue(key string) (string, bool) {
	done, err := m.use("meta")
	if err != nil {
		return "", false
	}
	defer done()
	return m.strCall("meta", func(b unsafe.Pointer, s uintptr) int32 { return capi.ModelMetaValStr(m.ptr, key, b, s) })
}

// Info summarizes a model.
type Info struct {
	Architecture  string // general.architecture
	Name          string // general.name
	Description   string // llama.cpp's one-line description
	FileType      string // quantization, e.g. "Q8_0"
	Size          uint64 // bytes of all tensors
	Params        uint64 // number of parameters
	TrainContext  int    // training context length
	EmbeddingSize int
	Layers        int
	Heads         int
	HeadsKV       int
	SlidingWindow int
	VocabSize     int
	VocabType     string // "spm", "bpe", "wpm", "ugm", "rwkv", "plamo2" or "none"
	HasEncoder    bool
	HasDecoder    bool
	Recurrent     bool
	Hybrid        bool
	ClassifierOut int // outputs of a classifier head (rerankers), 0 if none
	// MTPLayers is the number of multi-token-prediction blocks the file
	// carries (GLM-4.5, Qwen3.5, DeepSeek V3 and others), which a context
	// with ContextOptions.MTP runs when the model was loaded with
	// ModelOptions.MTP; 0 if none.
	MTPLayers int
}

// Info returns the model's main facts.
func (m *Model) Info() (Info, error) {
	done, err := m.use("info")
	if err != nil {
		return Info{}, err
	}
	defer done()
	desc, _ := m.strCall("info", func(b unsafe.Pointer, s uintptr) int32 { return capi.ModelDesc(m.ptr, b, s) })
	arch, _ := m.strCall("info", func(b unsafe.Pointer, s uintptr) int32 {
		return capi.ModelMetaValStr(m.ptr, "general.architecture", b, s)
	})
	name, _ := m.strCall("info", func(b unsafe.Pointer, s uintptr) int32 {
		return capi.ModelMetaValStr(m.ptr, "general.name", b, s)
	})
	vt := []string{"none", "spm", "bpe", "wpm", "ugm", "rwkv", "plamo2"}
	t := capi.VocabType(m.vocab)
	vts := "unknown"
	if t >= 0 && int(t) < len(vt) {
		vts = vt[t]
	}
	// llama.cpp aborts when asked for the heads of a model without layers
	// (a vocabulary-only load).
	layers, heads, headsKV := int(capi.ModelNLayer(m.ptr)), 0, 0
	if layers > 0 {
		heads, headsKV = int(capi.ModelNHead(m.ptr)), int(capi.ModelNHeadKV(m.ptr))
	}
	return Info{
		Architecture: arch, Name: name, Description: desc,
		FileType: capi.FtypeName(capi.ModelFtype(m.ptr)), Size: capi.ModelSize(m.ptr), Params: capi.ModelNParams(m.ptr),
		TrainContext: int(capi.ModelNCtxTrain(m.ptr)), EmbeddingSize: int(capi.ModelNEmbd(m.ptr)),
		Layers: layers, Heads: heads, HeadsKV: headsKV,
		SlidingWindow: int(capi.ModelNSwa(m.ptr)), VocabSize: int(m.nVocb), VocabType: vts,
		HasEncoder: capi.ModelHasEncoder(m.ptr), HasDecoder: capi.ModelHasDecoder(m.ptr),
		Recurrent: capi.ModelIsRecurrent(m.ptr), Hybrid: capi.ModelIsHybrid(m.ptr),
		ClassifierOut: int(capi.ModelNClsOut(m.ptr)),
		MTPLayers:     m.mtpLayers(),
	}, nil
}

// mtpLayers is the number of multi-token-prediction blocks; 0 where the
// library cannot tell.
func (m *Model) mtpLayers() int {
	if capi.ModelNLayerNextn == nil {
		return 0
	}
	return int(capi.ModelNLayerNextn(m.ptr))
}

// EmbeddingSize returns the size of the model's embeddings.
func (m *Model) EmbeddingSize() int {
	done, err := m.use("embedding size")
	if err != nil {
		return 0
	}
	defer done()
	return int(capi.ModelNEmbd(m.ptr))
}

// TrainContext returns the context length the model was trained with.
func (m *Model) TrainContext() int {
	done, err := m.use("train context")
	if err != nil {
		return 0
	}
	defer done()
	return int(capi.ModelNCtxTrain(m.ptr))
}

// ChatTemplate returns the model's chat template: the default one when name
// is empty, else a named one (such as "tool_use"). ok is false if absent.
func (m *Model) ChatTemplate(name string) (tmpl string, ok bool) {
	done, err := m.use("chat template")
	if err != nil {
		return "", false
	}
	defer done()
	var np unsafe.Pointer
	var cname []byte
	if name != "" {
		cname = append([]byte(name), 0)
		np = unsafe.Pointer(&cname[0])
	}
	p := capi.ModelChatTemplate(m.ptr, np)
	runtime.KeepAlive(cname)
	if p == nil {
		return "", false
	}
	return capi.GoString(p), true
}

// Vocabulary.

// VocabSize returns the number of tokens in the vocabulary.
func (m *Model) VocabSize() int {
	if m == nil {
		return 0
	}
	return int(m.nVocb)
}

// SpecialTokens are a vocabulary's special tokens; NoToken where absent.
type SpecialTokens struct {
	BOS, EOS, EOT, SEP, NL, PAD, MASK              Token
	FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep, FIMSep Token
	AddBOS, AddEOS, AddSEP                         bool
}

// SpecialTokens returns the vocabulary's special tokens.
func (m *Model) SpecialTokens() SpecialTokens {
	done, err := m.use("special tokens")
	if err != nil {
		n := NoToken
		return SpecialTokens{n, n, n, n, n, n, n, n, n, n, n, n, n, false, false, false}
	}
	defer done()
	// The vocabulary does not change after load: read it once, not
	// sixteen C calls a request.
	m.specialOnce.Do(func() {
		v := m.vocab
		m.special = SpecialTokens{
			BOS: Token(capi.VocabBOS(v)), EOS: Token(capi.VocabEOS(v)), EOT: Token(capi.VocabEOT(v)),
			SEP: Token(capi.VocabSEP(v)), NL: Token(capi.VocabNL(v)), PAD: Token(capi.VocabPAD(v)),
			MASK:   Token(capi.VocabMASK(v)),
			FIMPre: Token(capi.VocabFIMPre(v)), FIMSuf: Token(capi.VocabFIMSuf(v)), FIMMid: Token(capi.VocabFIMMid(v)),
			FIMPad: Token(capi.VocabFIMPad(v)), FIMRep: Token(capi.VocabFIMRep(v)), FIMSep: Token(capi.VocabFIMSep(v)),
			AddBOS: capi.VocabGetAddBOS(v), AddEOS: capi.VocabGetAddEOS(v), AddSEP: capi.VocabGetAddSEP(v),
		}
	})
	return m.special
}

// TokenAttr is a bit set of token attributes.
type TokenAttr uint32

// Token attributes.
const (
	AttrUnknown     TokenAttr = 1 << 0
	AttrUnused      TokenAttr = 1 << 1
	AttrNormal      TokenAttr = 1 << 2
	AttrControl     TokenAttr = 1 << 3
	AttrUserDefined TokenAttr = 1 << 4
	AttrByte        TokenAttr = 1 << 5
	AttrNormalized  TokenAttr = 1 << 6
	AttrLStrip      TokenAttr = 1 << 7
	AttrRStrip      TokenAttr = 1 << 8
	AttrSingleWord  TokenAttr = 1 << 9
)

// CheckToken returns an error unless t is a token of the vocabulary.
func (m *Model) CheckToken(t Token) error {
	if m == nil {
		return errorf(CodeInvalid, "token", "nil *Model")
	}
	if t < 0 || int32(t) >= m.nVocb {
		return errorf(CodeInvalid, "token", "token id %d out of range [0, %d)", t, m.nVocb)
	}
	return nil
}

// TokenAttr returns a token's attributes.
func (m *Model) TokenAttr(t Token) (TokenAttr, error) {
	if err := m.CheckToken(t); err != nil {
		return 0, err
	}
	done, err := m.use("token attr")
	if err != nil {
		return 0, err
	}
	defer done()
	return TokenAttr(capi.VocabGetAttr(m.vocab, int32(t))), nil
}

// TokenText returns a token's text as stored in the vocabulary.
func (m *Model) TokenText(t Token) (string, error) {
	if err := m.CheckToken(t); err != nil {
		return "", err
	}
	done, err := m.use("token text")
	if err != nil {
		return "", err
	}
	defer done()
	return capi.VocabGetText(m.vocab, int32(t)), nil
}

// TokenScore returns a token's score.
func (m *Model) TokenScore(t Token) (float32, error) {
	if err := m.CheckToken(t); err != nil {
		return 0, err
	}
	done, err := m.use("token score")
	if err != nil {
		return 0, err
	}
	defer done()
	return capi.VocabGetScore(m.vocab, int32(t)), nil
}

// IsEOG reports whether t ends generation (EOS, EOT and the like). Out of
// range tokens are not.
func (m *Model) IsEOG(t Token) bool {
	if m.CheckToken(t) != nil {
		return false
	}
	done, err := m.use("is eog")
	if err != nil {
		return false
	}
	defer done()
	return capi.VocabIsEOG(m.vocab, int32(t))
}

// IsControl reports whether t is a control token.
func (m *Model) IsControl(t Token) bool {
	if m.CheckToken(t) != nil {
		return false
	}
	done, err := m.use("is control")
	if err != nil {
		return false
	}
	defer done()
	return capi.VocabIsControl(m.vocab, int32(t))
}

// TokenizeOptions says how text becomes tokens.
type TokenizeOptions struct {
	// AddSpecial adds the BOS/EOS/SEP tokens the model wants around a text.
	AddSpecial bool
	// ParseSpecial turns special token text (such as "<|im_start|>") into
	// special tokens instead of plain text.
	ParseSpecial bool
}

// SingleToken returns the token text is, special token text parsed, and
// whether text is exactly one token. Grammar triggers and preserved
// tokens use it: text that is one token is matched as that token.
func (m *Model) SingleToken(text string) (Token, bool) {
	toks, err := m.Tokenize(text, TokenizeOptions{ParseSpecial: true})
	if err != nil || len(toks) != 1 {
		return NoToken, false
	}
	return toks[0], true
}

// singleTokenLocked is SingleToken for a caller holding m.use (a grammar's
// token names, resolved while a sampler chain is built): a second read
// lock would wait behind a Close that waits for the first.
func (m *Model) singleTokenLocked(text string) (Token, bool) {
	toks, err := m.tokenizeLocked(text, TokenizeOptions{ParseSpecial: true})
	if err != nil || len(toks) != 1 {
		return NoToken, false
	}
	return toks[0], true
}

// Tokenize turns text into tokens. It is safe for concurrent use, but
// llama.cpp's tokenizer holds 40 to 70 bytes of memory for each byte of
// text while it runs, so a model tokenizes at most 16 MiB of text at once
// across goroutines: a call that finds that much in progress waits for
// room (a longer text waits to run alone).
func (m *Model) Tokenize(text string, opts TokenizeOptions) ([]Token, error) {
	if m == nil {
		return nil, errorf(CodeInvalid, "tokenize", "nil *Model")
	}
	// What takes the model's lock itself is read first (each is kept), so
	// that no read lock is taken twice: a Close waiting between them would
	// wait for ever.
	bpe := len(text) > pretok.MaxRun && m.isBPE()
	var sp SpecialTokens
	if bpe {
		sp = m.SpecialTokens()
	}
	done, err := m.use("tokenize")
	if err != nil {
		return nil, err
	}
	defer done()
	// Taken under the lock, never the other way round (see
	// singleTokenLocked).
	defer m.tokenizingRoom(len(text))()
	// Runs longer than pretok.MaxRun would overflow the BPE
	// pre-tokenizer's stack: they are cut and their pieces tokenized one
	// after the other.
	if bpe {
		if pieces := pretok.CutLongRuns(text, pretok.MaxRun); len(pieces) > 1 {
			var out []Token
			if opts.AddSpecial && sp.AddBOS && sp.BOS != NoToken {
				out = append(out, sp.BOS)
			}
			po := opts
			po.AddSpecial = false
			for _, p := range pieces {
				toks, err := m.tokenizeLocked(p, po)
				if err != nil {
					return nil, err
				}
				out = append(out, toks...)
			}
			if opts.AddSpecial && sp.AddEOS && sp.EOS != NoToken {
				out = append(out, sp.EOS)
			}
			return out, nil
		}
	}
	return m.tokenizeLocked(text, opts)
}

// tokenizingRoom waits for room to tokenize n bytes of text within the
// model's budget (maxTokenizing) and returns its release. A caller holding
// m.use takes it under that lock, never the other way round (see
// singleTokenLocked).
func (m *Model) tokenizingRoom(n int) (release func()) {
	if m.tokenizing == nil || n <= 0 {
		return func() {}
	}
	w := int64(min(n, maxTokenizing))
	_ = m.tokenizing.Acquire(context.Background(), w) // no deadline: the calls ahead of it end
	return func() { m.tokenizing.Release(w) }
}

// maxTokenizing is the most text bytes a model tokenizes at once (see
// Tokenize): 64 concurrent /tokenize requests of 4 MB would have held
// about 18 GB.
const maxTokenizing = 16 << 20

// isBPE reports whether the vocabulary is BPE (GGUF's "gpt2"), whose
// pre-tokenizer is the recursive one.
func (m *Model) isBPE() bool {
	m.bpeOnce.Do(func() {
		kind, ok := m.MetaValue("tokenizer.ggml.model")
		m.bpe = !ok || kind == "gpt2"
	})
	return m.bpe
}

// tokenizeLocked runs llama.cpp's tokenizer on text; the caller holds
// m.use.
func (m *Model) tokenizeLocked(text string, opts TokenizeOptions) ([]Token, error) {
	if len(text) > math.MaxInt32/2 {
		return nil, errorf(CodeInvalid, "tokenize", "text of %d bytes is too long", len(text))
	}
	var tp unsafe.Pointer
	if len(text) > 0 {
		tp = unsafe.Pointer(unsafe.StringData(text))
	}
	toks := make([]Token, len(text)+3)
	for {
		var op unsafe.Pointer
		if len(toks) > 0 {
			op = unsafe.Pointer(&toks[0])
		}
		n := capi.Tokenize(m.vocab, tp, int32(len(text)), op, int32(len(toks)), opts.AddSpecial, opts.ParseSpecial)
		if n == math.MinInt32 {
			return nil, errorf(CodeInvalid, "tokenize", "too many tokens")
		}
		if n >= 0 {
			return toks[:n], nil
		}
		toks = make([]Token, -n)
	}
}

// TokenPiece returns the text of one token; special tokens render as their
// text when special is true and as "" otherwise. A piece may be part of a
// UTF-8 character.
func (m *Model) TokenPiece(t Token, special bool) (string, error) {
	if err := m.CheckToken(t); err != nil {
		return "", err
	}
	done, err := m.use("token piece")
	if err != nil {
		return "", err
	}
	defer done()
	var buf [64]byte
	b := m.appendPiece(buf[:0], t, special)
	return string(b), nil
}

// appendPiece appends a token's piece; the model must be in use and t valid.
func (m *Model) appendPiece(dst []byte, t Token, special bool) []byte {
	start := len(dst)
	if cap(dst)-start < 32 {
		dst = append(dst, make([]byte, 32)...)[:start]
	}
	for {
		room := dst[start:cap(dst)]
		n := capi.TokenToPiece(m.vocab, int32(t), unsafe.Pointer(&room[0]), int32(len(room)), 0, special)
		if n >= 0 {
			return dst[:start+int(n)]
		}
		dst = append(dst[:start], make([]byte, -n)...)[:start]
	}
}

// DetokenizeOptions says how tokens become text.
type DetokenizeOptions struct {
	// RemoveSpecial drops BOS/EOS tokens the model adds.
	RemoveSpecial bool
	// UnparseSpecial renders special tokens as their text.
	UnparseSpecial bool
}

// Detokenize turns tokens into text.
func (m *Model) Detokenize(tokens []Token, opts DetokenizeOptions) (string, error) {
	if m == nil {
		return "", errorf(CodeInvalid, "detokenize", "nil *Model")
	}
	for _, t := range tokens {
		if err := m.CheckToken(t); err != nil {
			return "", err
		}
	}
	if len(tokens) == 0 {
		return "", nil
	}
	done, err := m.use("detokenize")
	if err != nil {
		return "", err
	}
	defer done()
	buf := make([]byte, len(tokens)*8+16)
	for {
		n := capi.Detokenize(m.vocab, unsafe.Pointer(&tokens[0]), int32(len(tokens)), unsafe.Pointer(&buf[0]),
			int32(len(buf)), opts.RemoveSpecial, opts.UnparseSpecial)
		if n >= 0 {
			return string(buf[:n]), nil
		}
		buf = make([]byte, -n)
	}
}

// validUTF8Prefix returns how many leading bytes of b form complete UTF-8
// characters (an invalid byte counts as complete, so it is never held back
// forever).
func validUTF8Prefix(b []byte) int {
	i := len(b)
	// Look back at most 3 bytes for an incomplete sequence start.
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c&0xC0 == 0x80 {
			continue // continuation byte
		}
		if c >= 0xC0 {
			need := 2
			if c >= 0xF0 {
				need = 4
			} else if c >= 0xE0 {
				need = 3
			}
			if k < need && !utf8.FullRune(b[len(b)-k:]) {
				i = len(b) - k
			}
		}
		break
	}
	return i
}

// String describes the model by its path.
func (m *Model) String() string {
	if m == nil {
		return "llama.Model(nil)"
	}
	return fmt.Sprintf("llama.Model(%s)", m.path)
}

// isEOG is IsEOG for a model already in use and a valid token.
func isEOG(m *Model, t Token) bool { return capi.VocabIsEOG(m.vocab, int32(t)) }
