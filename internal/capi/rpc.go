package capi

import (
	"errors"

	"github.com/ebitengine/purego"
)

// The RPC backend (ggml-rpc.h). libggml-rpc is a backend module the
// library loads from its folder when it is there (lib.InstallRPC builds
// it); its functions are reached through the backend registry.
var (
	// ggml_backend_reg_t ggml_backend_reg_by_name(const char * name);
	BackendRegByName func(name string) uintptr
	// size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg);
	BackendRegDevCount func(reg uintptr) uintptr
	// ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index);
	BackendRegDevGet func(reg uintptr, i uintptr) uintptr
	// ggml_abort_callback_t ggml_set_abort_callback(ggml_abort_callback_t callback);
	GGMLSetAbortCallback func(cb uintptr) uintptr

	// ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint);
	RPCAddServer func(endpoint string) uintptr
)

func init() {
	register(libGGML,
		binding{fn: &BackendRegByName, name: "ggml_backend_reg_by_name"},
	)
	register(libGGMLBase,
		binding{fn: &BackendRegDevCount, name: "ggml_backend_reg_dev_count"},
		binding{fn: &BackendRegDevGet, name: "ggml_backend_reg_dev_get"},
		binding{fn: &GGMLSetAbortCallback, name: "ggml_set_abort_callback"},
	)
}

// ErrNoRPC reports a library without the RPC backend.
var ErrNoRPC = errors.New("the library has no RPC backend (libggml-rpc): build it with llama-install -rpc")

// LoadRPC binds the RPC backend's functions, once the library is loaded.
func LoadRPC() error {
	reg := BackendRegByName("RPC")
	if reg == 0 {
		return ErrNoRPC
	}
	add := BackendRegGetProcAddress(reg, "ggml_backend_rpc_add_server")
	if add == 0 {
		return ErrNoRPC
	}
	purego.RegisterFunc(&RPCAddServer, add)
	return nil
}
