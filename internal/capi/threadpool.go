package capi

import (
	"errors"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Threadpools (ggml.h, ggml-cpu.h, ggml-backend.h). Without one attached,
// ggml's CPU backend starts and joins its worker threads on every graph
// computation; an attached threadpool keeps them, as llama.cpp's own tools
// do.

// ThreadpoolParams mirrors struct ggml_threadpool_params.
type ThreadpoolParams struct {
	CPUMask   [512]bool // GGML_MAX_N_THREADS
	NThreads  int32
	Prio      int32 // enum ggml_sched_priority
	Poll      uint32
	StrictCPU bool
	Paused    bool
	_         [2]byte
}

// Threadpool is a ggml_threadpool_t.
type Threadpool uintptr

var (
	// void ggml_threadpool_params_init (struct ggml_threadpool_params * p, int n_threads);
	ThreadpoolParamsInit func(p *ThreadpoolParams, n int32)
	// ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type);
	BackendDevByType func(t int32) uintptr
	// ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device);
	BackendDevBackendReg func(dev uintptr) uintptr
	// void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name);
	BackendRegGetProcAddress func(reg uintptr, name string) uintptr
	// void llama_attach_threadpool( struct llama_context * ctx, ggml_threadpool_t threadpool, ggml_threadpool_t threadpool_batch);
	AttachThreadpool func(c Context, tp, tpBatch Threadpool)
	// void llama_detach_threadpool(struct llama_context * ctx);
	DetachThreadpool func(c Context)

	// Found through the CPU backend's registry (ggml-cpu.h), since the CPU
	// backend is a library ggml loads at run time:
	// struct ggml_threadpool * ggml_threadpool_new (struct ggml_threadpool_params * params);
	ThreadpoolNew func(p *ThreadpoolParams) Threadpool
	// void ggml_threadpool_free (struct ggml_threadpool * threadpool);
	ThreadpoolFree func(tp Threadpool)
	// Not in the registry: found in the CPU backend's library file by name
	// (nil where that file cannot be found):
	// void ggml_threadpool_pause (struct ggml_threadpool * threadpool);
	ThreadpoolPause func(tp Threadpool)
)

// CPUBindings lists the bindings found in the CPU backend at run time
// rather than through the registry, by C name, for the header check.
var CPUBindings = map[string]any{
	"ggml_threadpool_new":   &ThreadpoolNew,
	"ggml_threadpool_free":  &ThreadpoolFree,
	"ggml_threadpool_pause": &ThreadpoolPause,
}

func init() {
	register(libGGMLBase, binding{fn: &ThreadpoolParamsInit, name: "ggml_threadpool_params_init"})
	register(libGGML,
		binding{fn: &BackendDevByType, name: "ggml_backend_dev_by_type"},
		binding{fn: &BackendDevBackendReg, name: "ggml_backend_dev_backend_reg"},
		binding{fn: &BackendRegGetProcAddress, name: "ggml_backend_reg_get_proc_address"},
	)
	register(libLlama,
		binding{fn: &AttachThreadpool, name: "llama_attach_threadpool"},
		binding{fn: &DetachThreadpool, name: "llama_detach_threadpool"},
	)
}

// bindCPUThreadpool finds ggml_threadpool_new and ggml_threadpool_free in
// the loaded CPU backend. Called by Load after the backends are loaded.
func bindCPUThreadpool() error {
	dev := BackendDevByType(0) // GGML_BACKEND_DEVICE_TYPE_CPU
	if dev == 0 {
		return errors.New("llama: no CPU backend was loaded")
	}
	reg := BackendDevBackendReg(dev)
	newFn := BackendRegGetProcAddress(reg, "ggml_threadpool_new")
	freeFn := BackendRegGetProcAddress(reg, "ggml_threadpool_free")
	if newFn == 0 || freeFn == 0 {
		return errors.New("llama: the CPU backend does not export threadpools")
	}
	purego.RegisterFunc(&ThreadpoolNew, newFn)
	purego.RegisterFunc(&ThreadpoolFree, freeFn)
	// The registry does not hand out ggml_threadpool_pause, but the CPU
	// backend's library exports it: find that library from the address of
	// ggml_threadpool_new. Without it, a context cannot put its threads to
	// sleep early (Context.Idle does nothing); nothing else depends on it.
	if path := libraryOf(newFn); path != "" {
		if h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			if fn, err := purego.Dlsym(h, "ggml_threadpool_pause"); err == nil {
				purego.RegisterFunc(&ThreadpoolPause, fn)
			}
		}
	}
	return nil
}

// dlInfo mirrors the C library's Dl_info (dli_fname, then the base
// address, the symbol's name and address, unused here).
type dlInfo struct {
	fname *byte
	_     [3]uintptr
}

// libraryOf returns the path of the loaded library holding addr, through
// the C library's dladdr; "" where there is none (Windows).
func libraryOf(addr uintptr) string {
	_, sym, err := libcSym("dladdr")
	if err != nil {
		return ""
	}
	var dladdr func(addr uintptr, info *dlInfo) int32
	purego.RegisterFunc(&dladdr, sym)
	var info dlInfo
	if dladdr(addr, &info) == 0 || info.fname == nil {
		return ""
	}
	return GoString(unsafe.Pointer(info.fname))
}
