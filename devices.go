package llama

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/cudadrv"
	"github.com/x/llama/internal/vulkanicd"
	"github.com/x/llama/lib"
)

// TensorBufferOverride places the weights whose names match Pattern in
// the buffer type named BufferType, as llama.cpp's --override-tensor:
// Pattern is a regular expression in llama.cpp's (ECMAScript) syntax,
// searched in each tensor name ("blk\.[0-3]\.ffn_.*" or "exps"), and
// BufferType one of BufferTypes (such as "CPU"). A weight matched by
// several overrides takes the first.
type TensorBufferOverride struct {
	Pattern    string
	BufferType string
}

// BufferTypes lists the names of the buffer types that weights may be
// placed in with TensorBufferOverride: the one of each device of the
// loaded backends ("CPU" always; "CUDA0" and the like with GPUs), sorted.
func BufferTypes() ([]string, error) {
	bufts, err := bufferTypes()
	if err != nil {
		return nil, err
	}
	var names []string
	for n := range bufts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

func bufferTypes() (map[string]uintptr, error) {
	if err := ensureInit(); err != nil {
		return nil, err
	}
	out := map[string]uintptr{}
	for i := uintptr(0); i < capi.BackendDevCount(); i++ {
		if b := capi.BackendDevBufferType(capi.BackendDevGet(i)); b != 0 {
			out[capi.BackendBuftName(b)] = b
		}
	}
	return out, nil
}

// tensorOverrides builds llama.cpp's override array (terminated by an
// empty entry) and what it points to, which must be kept alive while the
// model loads.
func tensorOverrides(ovs []TensorBufferOverride) ([]capi.TensorBuftOverride, [][]byte, error) {
	bufts, err := bufferTypes()
	if err != nil {
		return nil, nil, err
	}
	out := make([]capi.TensorBuftOverride, 0, len(ovs)+1)
	var strs [][]byte
	for _, o := range ovs {
		b, ok := bufts[o.BufferType]
		if !ok {
			names, _ := BufferTypes()
			return nil, nil, errorf(CodeInvalid, "load model", "unknown buffer type %q for %q (available: %s)", o.BufferType, o.Pattern, strings.Join(names, ", "))
		}
		if o.Pattern == "" || strings.IndexByte(o.Pattern, 0) >= 0 {
			return nil, nil, errorf(CodeInvalid, "load model", "invalid tensor pattern %q", o.Pattern)
		}
		c := append([]byte(o.Pattern), 0)
		strs = append(strs, c)
		out = append(out, capi.TensorBuftOverride{Pattern: uintptr(unsafe.Pointer(&c[0])), Buft: b})
	}
	return append(out, capi.TensorBuftOverride{}), strs, nil
}

// gpuDevices lists the names of the devices, other than the CPU, that
// ModelOptions.Devices may name (none without a GPU backend).
func gpuDevices() ([]string, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range devs {
		if d.Type != "cpu" {
			out = append(out, d.Name)
		}
	}
	return out, nil
}

// GPUBackendErrors reports why GPU backends of the loaded build (its
// libggml-vulkan or libggml-cuda) give no device: a backend that cannot
// be loaded, with the dynamic loader's reason (ggml skips it without a
// word, so a Vulkan or CUDA build on a machine without the Vulkan loader
// or the CUDA runtime lists the CPU alone in Devices); and a Vulkan
// backend that loads but finds no device, with the reason: no Vulkan
// loader, no driver manifest (ICD .json), or a driver whose library
// cannot load, naming its missing dependency; and a CUDA backend that
// loads but finds no device, with the driver's reason: no driver library
// (a container started without the GPUs), no device, or a driver older
// than the runtime. None is reported for a CPU build.
func GPUBackendErrors() ([]error, error) {
	if err := ensureInit(); err != nil {
		return nil, err
	}
	dir, ok := capi.Loaded()
	if !ok {
		return nil, nil
	}
	var out []error
	for _, p := range lib.GPUBackendFiles(dir) {
		if err := capi.ProbeLibrary(p); err != nil {
			out = append(out, fmt.Errorf("the GPU backend %s cannot be loaded: %w", filepath.Base(p), err))
			continue
		}
		if strings.Contains(strings.ToLower(filepath.Base(p)), "vulkan") && !hasDevice("Vulkan") {
			err := vulkanicd.Diagnose(vulkanicd.Env{Getenv: os.Getenv, Dlopen: func(name string) error {
				// dlerror is per thread: the reason is read on the thread
				// that failed to load, not one the goroutine moved to.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				_, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
				return err
			}})
			if err == nil {
				err = errors.New("its drivers load but report no device")
			}
			out = append(out, fmt.Errorf("the Vulkan backend finds no device: %w", err))
		}
		if strings.Contains(strings.ToLower(filepath.Base(p)), "cuda") && !hasDevice("CUDA") {
			out = append(out, fmt.Errorf("the CUDA backend finds no device: %w", cudaNoDevice(cudadrv.Query())))
		}
	}
	return out, nil
}

// cudaNoDevice says why the CUDA driver lists no device, from what
// cudadrv.Query returned. The usual cause is a container started without
// the GPUs, which then has no driver library either.
func cudaNoDevice(info cudadrv.Info, err error) error {
	switch {
	case errors.Is(err, cudadrv.ErrNoDriver):
		return fmt.Errorf("%w; install the NVIDIA driver, or in a container pass the GPUs in (docker run --gpus all)", err)
	case err != nil:
		return err
	case len(info.Devices) == 0:
		return errors.New("the CUDA driver reports no device (CUDA_VISIBLE_DEVICES may hide them)")
	}
	return fmt.Errorf("the CUDA driver reports %d device(s), but the CUDA runtime (libcudart) does not list them: "+
		"it may be newer than the driver (CUDA %d.%d)", len(info.Devices), info.Version/1000, info.Version%1000/10)
}

// hasDevice reports whether a device's name starts with prefix.
func hasDevice(prefix string) bool {
	devs, err := Devices()
	if err != nil {
		return false
	}
	for _, d := range devs {
		if strings.HasPrefix(d.Name, prefix) {
			return true
		}
	}
	return false
}

// deviceList resolves device names to llama.cpp's device array
// (terminated by a null entry).
func deviceList(names []string) ([]uintptr, error) {
	if err := ensureInit(); err != nil {
		return nil, err
	}
	out := make([]uintptr, 0, len(names)+1)
	for _, n := range names {
		d := capi.BackendDevByName(n)
		if d == 0 || capi.BackendDevType(d) == 0 { // GGML_BACKEND_DEVICE_TYPE_CPU
			avail, _ := gpuDevices()
			if len(avail) == 0 {
				why := ""
				if errs, _ := GPUBackendErrors(); len(errs) > 0 {
					why = fmt.Sprintf(" (%v)", errors.Join(errs...))
				}
				return nil, errorf(CodeInvalid, "load model", "invalid device %q: there is no device besides the CPU%s", n, why)
			}
			return nil, errorf(CodeInvalid, "load model", "invalid device %q (devices: %s)", n, strings.Join(avail, ", "))
		}
		out = append(out, d)
	}
	return append(out, 0), nil
}
