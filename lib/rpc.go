package lib

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// RPCFile is the file name InstallRPC gives libggml-rpc: the name ggml's
// backend loader looks for beside the library, so that the library loads
// the RPC backend with the others (ggml_backend_load_all_from_path).
const RPCFile = "libggml-rpc.so"

// RPCServerFile is the file name InstallRPC gives the worker, llama.cpp's
// rpc-server, beside the library.
const RPCServerFile = "rpc-server"

// RPCOptions controls InstallRPC.
type RPCOptions = BuildOptions

// RPCResult describes what InstallRPC did.
type RPCResult struct {
	// Library is libggml-rpc's build; Server is rpc-server's.
	Library, Server BuildResult
}

// rpcCFlags build ggml-rpc as a backend module the installed libggml
// loads at run time (GGML_BACKEND_DL: it exports ggml_backend_init), as
// llama.cpp's CMake build does with GGML_BACKEND_DL and GGML_RPC on.
var rpcCFlags = []string{"-O2", "-fPIC", "-DNDEBUG", "-w", "-pthread", "-DGGML_BACKEND_DL", "-DGGML_BACKEND_SHARED",
	"-DGGML_BACKEND_BUILD", "-DGGML_SHARED", "-DGGML_BUILD"}

// InstallRPC builds llama.cpp's RPC backend from the pinned source
// (ggml/src/ggml-rpc, which no prebuilt package carries) as libggml-rpc,
// and its worker, rpc-server (tools/rpc), against the installed libggml
// and libggml-base, and installs both beside the library. There the
// library loads libggml-rpc as one of its backends, and rpc-server finds
// the library's backends (the CPU variants and libggml-rpc) beside itself.
// Each is kept while its inputs are unchanged. Linux only.
func InstallRPC(ctx context.Context, o RPCOptions) (RPCResult, error) {
	var r RPCResult
	var err error
	if r.Library, err = build(ctx, o, rpcLibStep); err != nil {
		return r, err
	}
	r.Server, err = build(ctx, o, rpcServerStep)
	return r, err
}

// RPCServerPath returns the rpc-server InstallRPC installed in dir, or an
// error wrapping ErrNotFound.
func RPCServerPath(dir string) (string, error) {
	p := filepath.Join(dir, RPCServerFile)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%w: %s has no %s (build it with llama-install -rpc)", ErrNotFound, dir, RPCServerFile)
	}
	return p, nil
}

// RPCPath returns the libggml-rpc InstallRPC installed in dir, or an error
// wrapping ErrNotFound.
func RPCPath(dir string) (string, error) {
	p := filepath.Join(dir, RPCFile)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%w: %s has no %s (build it with llama-install -rpc)", ErrNotFound, dir, RPCFile)
	}
	return p, nil
}

var rpcLinks = []string{"ggml", "ggml-base"}

func rpcNoLib(l string, err error) error {
	return fmt.Errorf("lib: the RPC backend links the installed %s (install the library first): %w", l, err)
}

var rpcNoSrc = fmt.Sprintf("lib: building the RPC backend needs the llama.cpp %s source: set %s", Version, EnvSource)

var rpcLibStep = buildStep{
	what: "libggml-rpc", file: RPCFile, tmpPat: ".rpc-build-*",
	osOK: func(goos string) bool { return goos == "linux" }, noOS: "lib: building the RPC backend is supported on Linux only",
	links: rpcLinks, noLib: rpcNoLib, noSrc: rpcNoSrc,
	flags: rpcCFlags,
	inc:   []string{"ggml/include", "ggml/src", "ggml/src/ggml-rpc"},
	sources: func(src string) ([]string, error) {
		return rpcSources(src, "ggml/src/ggml-rpc/ggml-rpc.cpp", "ggml/src/ggml-rpc/transport.cpp")
	},
	inputs: func(src string, files []string, cxx string, libs map[string]string) (string, error) {
		return digestInputs(src, files, cxx, rpcCFlags, []string{"ggml/include", "ggml/src", "ggml/src/ggml-rpc"}, nil, sortedLibs(libs))
	},
	linkArgs: func(built string, objs []string, libs map[string]string) []string {
		args := append([]string{"-shared", "-o", built}, objs...)
		return append(args, libs["ggml"], libs["ggml-base"], "-pthread", "-Wl,-soname,"+RPCFile,
			"-Wl,-rpath,$ORIGIN", "-Wl,--no-undefined")
	},
	check: func(built, _ string) error {
		syms, err := dynamicSymbols(built)
		if err != nil {
			return fmt.Errorf("lib: reading the symbols of %s: %w", built, err)
		}
		for _, s := range []string{"ggml_backend_init", "ggml_backend_rpc_add_server", "ggml_backend_rpc_start_server"} {
			if !syms[s] {
				return fmt.Errorf("lib: %s does not export %s", built, s)
			}
		}
		return nil
	},
}

var rpcServerStep = buildStep{
	what: "rpc-server", file: RPCServerFile, tmpPat: ".rpc-server-build-*",
	osOK: func(goos string) bool { return goos == "linux" }, noOS: "lib: building rpc-server is supported on Linux only",
	links: rpcLinks, noLib: rpcNoLib, noSrc: rpcNoSrc,
	flags:   []string{"-O2", "-DNDEBUG", "-w", "-pthread"},
	inc:     []string{"ggml/include"},
	sources: func(src string) ([]string, error) { return rpcSources(src, "tools/rpc/rpc-server.cpp") },
	inputs: func(src string, files []string, cxx string, libs map[string]string) (string, error) {
		return digestInputs(src, files, cxx, []string{"-O2", "-DNDEBUG", "-w", "-pthread"}, []string{"ggml/include"}, nil, sortedLibs(libs))
	},
	linkArgs: func(built string, objs []string, libs map[string]string) []string {
		args := append([]string{"-o", built}, objs...)
		return append(args, libs["ggml"], libs["ggml-base"], "-pthread", "-Wl,-rpath,$ORIGIN")
	},
}

func rpcSources(src string, files ...string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(src, "ggml", "include", "ggml-rpc.h")); err != nil {
		return nil, fmt.Errorf("lib: %s is not the llama.cpp source: %w", src, err)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			return nil, fmt.Errorf("lib: %s is not the llama.cpp source: %w", src, err)
		}
	}
	return files, nil
}
