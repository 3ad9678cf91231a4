// Command llama-install installs the pinned llama.cpp build into the cache
// folder (or -dir) and prints the folder. It is what CI and first-time
// setups run; the SDK only finds the library, and installs it only when
// asked (llama.LibraryOptions.Install). -source picks where the
// build comes from: the npm package (npm), llama.cpp's GitHub release
// archive (github), or by default npm where a package exists and GitHub
// otherwise. The GitHub archives have no pinned checksum: installing them
// needs -insecure.
//
// With -mtmd it also builds libmtmd, llama.cpp's multimodal library (images
// and audio, package mtmd), which no prebuilt package carries: it compiles
// tools/mtmd of the pinned llama.cpp source with a C++ compiler (apt-get
// install g++) and installs it beside the library, unless the libmtmd there
// already matches. The source is -src, else $LLAMA_CPP_SRC, else the folder
// that ../shared/tools/llama-cpp-src beside the module prints (this
// repository's development setup).
//
// With -server it also builds llama.cpp's llama-server (the reference the
// differential tests compare the server package with) from tools/server of
// the same source, linked against the installed libraries and libmtmd (so
// -server implies -mtmd), and installs it beside them, unless the one there
// already matches its inputs.
//
// With -rpc it also builds llama.cpp's RPC backend (libggml-rpc, which the
// library then loads beside its other backends) and its worker, rpc-server,
// from ggml/src/ggml-rpc and tools/rpc of the same source, against the
// installed libggml, unless the ones there already match. Start a worker
// with the printed folder's rpc-server:
//
//	"$(go run ./lib/cmd/llama-install -rpc)"/rpc-server -H 127.0.0.1 -p 50052
//
// With -flavor cuda -build it builds the library with CUDA on this machine
// instead (lib.InstallCUDA), for GPUs the prebuilt CUDA flavor has no
// machine code for (H100 and H200, sm_90, under a CUDA 13.0 driver): from
// the same source, for the architectures of the GPUs the CUDA driver lists
// or those of -cuda-arch (a comma list: 90), with the nvcc of -nvcc,
// $CUDACXX, PATH, CUDA_HOME or NVIDIA's pip wheels, and cmake and ninja.
// It goes into the cuda-local flavor's folder (-flavor cuda-local is the
// same), unless the build there already matches its inputs; -server and
// -mtmd add llama-server and libmtmd from the same build. It takes minutes
// on many cores:
//
//	LLAMA_LIB_DIR="$(go run ./lib/cmd/llama-install -flavor cuda -build -cuda-arch 90 -server)"
//
// With -ui it also builds llama.cpp's own web UI (tools/ui of the same
// source) with npm into the folder llama-ui beside the library, for the
// server's --path, unless the one there already matches its inputs; it
// needs node and npm, and the package registry npm is configured for.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/x/llama/lib"
)

// config is what the command line asks for.
type config struct {
	dir, flavor, source, src string
	mtmd, server, rpc, ui    bool
	jobs                     int
	force, insecure          bool
	// build: the CUDA flavor is built here (InstallCUDA), for archs
	// (empty: the GPUs the driver lists), with nvcc.
	build bool
	archs []string
	nvcc  string
}

// parseFlags reads the command line.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("llama-install", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.dir, "dir", "", "folder to install into (default: the cache folder)")
	fs.StringVar(&c.flavor, "flavor", "", "build flavor: empty for CPU, cuda or vulkan (cuda-local: the CUDA build made here, as -flavor cuda -build)")
	fs.StringVar(&c.source, "source", "", "where to fetch the build: empty for automatic, npm or github")
	fs.BoolVar(&c.mtmd, "mtmd", false, "also build libmtmd (multimodal) from the pinned llama.cpp source")
	fs.BoolVar(&c.server, "server", false, "also build llama-server (and libmtmd) from the pinned llama.cpp source")
	fs.BoolVar(&c.rpc, "rpc", false, "also build the RPC backend (libggml-rpc) and its worker (rpc-server) from the pinned llama.cpp source")
	fs.BoolVar(&c.ui, "ui", false, "also build llama.cpp's web UI (for --path) from the pinned llama.cpp source with npm")
	fs.StringVar(&c.src, "src", "", "with -build, -mtmd, -server, -rpc or -ui: the pinned llama.cpp source folder (default $LLAMA_CPP_SRC)")
	fs.IntVar(&c.jobs, "j", 0, "with -build, -mtmd, -server or -rpc: files compiled at once (default 2; with -build every core)")
	fs.BoolVar(&c.force, "force", false, "with -build, -mtmd, -server, -rpc or -ui: rebuild even when the installed build matches")
	fs.BoolVar(&c.insecure, "insecure", false, "allow builds with no pinned checksum (the GitHub release archives)")
	fs.BoolVar(&c.build, "build", false, "with -flavor cuda: build the library with CUDA here, from the pinned llama.cpp source, "+
		"into the cuda-local flavor's folder (needs nvcc, cmake and ninja)")
	arch := fs.String("cuda-arch", "", "with -build: CUDA architectures to build for, a comma list (90 for H100 and H200; "+
		"default: those of this machine's GPUs)")
	fs.StringVar(&c.nvcc, "nvcc", "", "with -build: the CUDA compiler (default: $CUDACXX, nvcc on PATH, CUDA_HOME, or NVIDIA's pip wheels)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("llama-install: unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if c.flavor == string(lib.CUDALocal) {
		c.build = true
	}
	if c.build {
		switch c.flavor {
		case string(lib.CUDA), string(lib.CUDALocal):
			c.flavor = string(lib.CUDALocal)
		default:
			return c, errors.New("llama-install: -build builds the CUDA flavor: use it with -flavor cuda")
		}
		if c.source != "" || c.insecure {
			return c, errors.New("llama-install: -build compiles the source: -source and -insecure do not apply")
		}
	}
	if *arch != "" {
		if !c.build {
			return c, errors.New("llama-install: -cuda-arch is for -build")
		}
		a, err := lib.ParseCUDAArchs(*arch)
		if err != nil {
			return c, err
		}
		c.archs = a
	}
	if c.nvcc != "" && !c.build {
		return c, errors.New("llama-install: -nvcc is for -build")
	}
	if c.jobs < 0 {
		return c, errors.New("llama-install: -j must not be negative")
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	s := c.src
	needSrc := c.build || c.mtmd || c.server || c.rpc
	if needSrc && s == "" && os.Getenv(lib.EnvSource) == "" {
		if s, err = devSource(); err != nil {
			fail(err)
		}
	}
	var d string
	if c.build {
		r, err := lib.InstallCUDA(ctx, lib.CUDAOptions{Dir: c.dir, Source: s, Archs: c.archs, NVCC: c.nvcc,
			Server: c.server, MTMD: c.mtmd, Jobs: c.jobs, Force: c.force, Progress: os.Stderr})
		if err != nil {
			fail(err)
		}
		if r.Built {
			fmt.Fprintf(os.Stderr, "llama: CUDA build time: %s\n", r.BuildTime.Round(1e9))
		}
		d = r.Dir
	} else {
		d, err = lib.Install(ctx, lib.InstallOptions{
			Dir: c.dir, Flavor: lib.Flavor(c.flavor), Source: lib.Source(c.source), Progress: os.Stderr, Insecure: c.insecure})
		if err != nil {
			fail(err)
		}
	}
	if c.rpc {
		r, err := lib.InstallRPC(ctx, lib.RPCOptions{Dir: d, Source: s, Jobs: c.jobs, Force: c.force, Progress: os.Stderr})
		if err != nil {
			fail(err)
		}
		for _, b := range []lib.BuildResult{r.Library, r.Server} {
			if b.Built {
				fmt.Fprintf(os.Stderr, "llama: %s build time: %s\n", filepath.Base(b.Path), b.BuildTime.Round(1e9))
			}
		}
	}
	// A CUDA build made here builds libmtmd and llama-server with the rest.
	if (c.mtmd || c.server) && !c.build {
		r, err := lib.InstallMTMD(ctx, lib.MTMDOptions{Dir: d, Source: s, Jobs: c.jobs, Force: c.force,
			Progress: os.Stderr})
		if err != nil {
			fail(err)
		}
		if r.Built {
			fmt.Fprintf(os.Stderr, "llama: libmtmd build time: %s\n", r.BuildTime.Round(1e9))
		}
		if c.server {
			r, err := lib.InstallServer(ctx, lib.ServerOptions{Dir: d, Source: s, Jobs: c.jobs, Force: c.force,
				Progress: os.Stderr})
			if err != nil {
				fail(err)
			}
			if r.Built {
				fmt.Fprintf(os.Stderr, "llama: llama-server build time: %s\n", r.BuildTime.Round(1e9))
			}
		}
	}
	if c.ui {
		if err := installUI(ctx, d, c.src, c.force); err != nil {
			fail(err)
		}
	}
	fmt.Println(d)
}

// installUI builds the web UI beside the library in d.
func installUI(ctx context.Context, d, src string, force bool) error {
	if src == "" && os.Getenv(lib.EnvSource) == "" {
		var err error
		if src, err = devSource(); err != nil {
			return err
		}
	}
	r, err := lib.InstallUI(ctx, lib.UIOptions{Dir: d, Source: src, Force: force, Progress: os.Stderr})
	if err != nil {
		return err
	}
	if r.Built {
		fmt.Fprintf(os.Stderr, "llama: web UI build time: %s\n", r.BuildTime.Round(1e9))
	}
	return nil
}

// devSource runs ../shared/tools/llama-cpp-src beside the module root, as
// the tests do, and returns the folder it prints.
func devSource() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			break
		}
		p := filepath.Dir(d)
		if p == d {
			return "", missingSource()
		}
		d = p
	}
	tool := filepath.Join(d, "..", "shared", "tools", "llama-cpp-src")
	if _, err := os.Stat(tool); err != nil {
		return "", missingSource()
	}
	out, err := exec.Command("bash", tool).Output()
	if err != nil {
		return "", fmt.Errorf("llama-install: %s: %w", tool, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func missingSource() error {
	return errors.New("llama-install: -build, -mtmd, -server, -rpc and -ui need the llama.cpp " + lib.Version + " source: pass -src or set " +
		lib.EnvSource + " to a checkout of that tag")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
