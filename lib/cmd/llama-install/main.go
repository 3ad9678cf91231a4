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
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/x/llama/lib"
)

func main() {
	dir := flag.String("dir", "", "folder to install into (default: the cache folder)")
	flavor := flag.String("flavor", "", "build flavor: empty for CPU, cuda or vulkan")
	source := flag.String("source", "", "where to fetch the build: empty for automatic, npm or github")
	mtmd := flag.Bool("mtmd", false, "also build libmtmd (multimodal) from the pinned llama.cpp source")
	server := flag.Bool("server", false, "also build llama-server (and libmtmd) from the pinned llama.cpp source")
	rpc := flag.Bool("rpc", false, "also build the RPC backend (libggml-rpc) and its worker (rpc-server) from the pinned llama.cpp source")
	ui := flag.Bool("ui", false, "also build llama.cpp's web UI (for --path) from the pinned llama.cpp source with npm")
	src := flag.String("src", "", "with -mtmd, -server, -rpc or -ui: the pinned llama.cpp source folder (default $LLAMA_CPP_SRC)")
	jobs := flag.Int("j", 0, "with -mtmd, -server or -rpc: files compiled at once (default 2)")
	force := flag.Bool("force", false, "with -mtmd, -server, -rpc or -ui: rebuild even when the installed build matches")
	insecure := flag.Bool("insecure", false, "allow builds with no pinned checksum (the GitHub release archives)")
	flag.Parse()
	ctx := context.Background()
	d, err := lib.Install(ctx, lib.InstallOptions{
		Dir: *dir, Flavor: lib.Flavor(*flavor), Source: lib.Source(*source), Progress: os.Stderr, Insecure: *insecure})
	if err != nil {
		fail(err)
	}
	s := *src
	if (*mtmd || *server || *rpc) && s == "" && os.Getenv(lib.EnvSource) == "" {
		if s, err = devSource(); err != nil {
			fail(err)
		}
	}
	if *rpc {
		r, err := lib.InstallRPC(ctx, lib.RPCOptions{Dir: d, Source: s, Jobs: *jobs, Force: *force, Progress: os.Stderr})
		if err != nil {
			fail(err)
		}
		for _, b := range []lib.BuildResult{r.Library, r.Server} {
			if b.Built {
				fmt.Fprintf(os.Stderr, "llama: %s build time: %s\n", filepath.Base(b.Path), b.BuildTime.Round(1e9))
			}
		}
	}
	if *mtmd || *server {
		r, err := lib.InstallMTMD(ctx, lib.MTMDOptions{Dir: d, Source: s, Jobs: *jobs, Force: *force,
			Progress: os.Stderr})
		if err != nil {
			fail(err)
		}
		if r.Built {
			fmt.Fprintf(os.Stderr, "llama: libmtmd build time: %s\n", r.BuildTime.Round(1e9))
		}
		if *server {
			r, err := lib.InstallServer(ctx, lib.ServerOptions{Dir: d, Source: s, Jobs: *jobs, Force: *force,
				Progress: os.Stderr})
			if err != nil {
				fail(err)
			}
			if r.Built {
				fmt.Fprintf(os.Stderr, "llama: llama-server build time: %s\n", r.BuildTime.Round(1e9))
			}
		}
	}
	if *ui {
		if err := installUI(ctx, d, *src, *force); err != nil {
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
	return errors.New("llama-install: -mtmd, -server, -rpc and -ui need the llama.cpp " + lib.Version + " source: pass -src or set " +
		lib.EnvSource + " to a checkout of that tag")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
