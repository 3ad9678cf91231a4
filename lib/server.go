package lib

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ServerFile is the file name InstallServer gives llama-server, beside the
// library's own files.
const ServerFile = "llama-server"

// serverCFlags are the flags every server file compiles with: a Release
// build without the web UI's assets (the reference server is driven
// through its API only).
var serverCFlags = []string{"-O2", "-fPIC", "-DNDEBUG", "-w", "-pthread"}

// InstallServer builds llama.cpp's llama-server, the reference the
// differential tests compare the server package with, and installs it
// beside the library. Only the server's own sources (tools/server of the
// pinned source) are compiled; they are linked against the installed
// libraries (libllama-common, which carries llama.cpp's common code and
// its HTTP library, libmtmd, libllama, libggml, libggml-base), so
// llama-server computes with exactly the ggml and llama code the SDK
// loads, and any difference between the two servers is in the server
// logic. The build is kept while its inputs (sources, headers, flags,
// compiler and the libraries it links) are unchanged. Linux only.
func InstallServer(ctx context.Context, o ServerOptions) (ServerResult, error) {
	return build(ctx, o, serverStep)
}

var serverStep = buildStep{
	what: "llama-server", file: ServerFile, tmpPat: ".server-build-*", runVersion: true,
	osOK: func(goos string) bool { return goos == "linux" }, noOS: "lib: building llama-server is supported on Linux only",
	links: serverLinks,
	noLib: func(l string, err error) error {
		return fmt.Errorf("lib: llama-server links the installed %s (install the library, "+
			"and libmtmd with InstallMTMD, first): %w", l, err)
	},
	noSrc:   fmt.Sprintf("lib: building llama-server needs the llama.cpp %s source: set %s", Version, EnvSource),
	flags:   serverCFlags,
	inc:     []string{"tools/server", "tools/mtmd", "common", "include", "ggml/include", "vendor", "."},
	sources: serverSources,
	inputs: func(src string, files []string, cxx string, libs map[string]string) (string, error) {
		var linked []inputLib
		for _, l := range serverLinks {
			linked = append(linked, inputLib{filepath.Base(libs[l]), libs[l]})
		}
		// embed.cpp, the tool that writes the web UI's asset table, is
		// built and run on the way.
		return digestInputs(src, append([]string{"tools/ui/embed.cpp"}, files...), cxx, serverCFlags,
			[]string{"tools/server", "tools/mtmd", "common", "common/jinja", "include", "ggml/include",
				"vendor/nlohmann", "vendor/cpp-httplib"}, []string{"*.h", "*.hpp"}, linked)
	},
	// The web UI's asset table, empty: llama.cpp's own embedding tool
	// writes it when given no asset folder.
	prepare: func(ctx context.Context, tmp, cxx, src string) ([]string, []string, error) {
		uiDir := filepath.Join(tmp, "ui")
		if err := os.Mkdir(uiDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("lib: %w", err)
		}
		embed := filepath.Join(tmp, "ui-embed")
		if err := run(ctx, tmp, cxx, "-O1", "-std=c++17", "-o", embed, filepath.Join(src, "tools", "ui", "embed.cpp")); err != nil {
			return nil, nil, fmt.Errorf("lib: building the UI embedding tool: %w", err)
		}
		if err := run(ctx, tmp, embed, filepath.Join(uiDir, "ui.cpp"), filepath.Join(uiDir, "ui.h")); err != nil {
			return nil, nil, fmt.Errorf("lib: writing the empty UI table: %w", err)
		}
		return []string{filepath.Join(uiDir, "ui.cpp")}, []string{uiDir}, nil
	},
	linkArgs: func(built string, objs []string, libs map[string]string) []string {
		args := append([]string{"-o", built}, objs...)
		args = append(args, serverLibs(libs)...)
		return append(args, "-pthread", "-Wl,-rpath,$ORIGIN")
	},
}

// serverLinks are the installed libraries llama-server links, in link order.
var serverLinks = []string{"llama-common", "mtmd", "llama", "ggml", "ggml-base"}

func serverLibs(libs map[string]string) []string {
	var out []string
	for _, l := range serverLinks {
		out = append(out, libs[l])
	}
	return out
}

// ServerPath returns the llama-server InstallServer installed in dir, or an
// error wrapping ErrNotFound.
func ServerPath(dir string) (string, error) {
	p := filepath.Join(dir, ServerFile)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%w: %s has no %s (build it with llama-install -server)", ErrNotFound, dir, ServerFile)
	}
	return p, nil
}

// serverSources lists the .cpp files of tools/server's server-context and
// llama-server-impl libraries and of the llama-server program, as its
// CMakeLists.txt names them.
func serverSources(src string) ([]string, error) {
	cm := filepath.Join(src, "tools", "server", "CMakeLists.txt")
	b, err := os.ReadFile(cm)
	if err != nil {
		return nil, fmt.Errorf("lib: %s is not the llama.cpp source (no tools/server/CMakeLists.txt): %w", src, err)
	}
	if _, err := os.Stat(filepath.Join(src, "tools", "ui", "embed.cpp")); err != nil {
		return nil, fmt.Errorf("lib: %s is not the llama.cpp source: %w", src, err)
	}
	var files []string
	re := regexp.MustCompile(`(?s)add_(?:library|executable)\s*\(\s*\$\{TARGET\}\s+(.*?)\)`)
	for _, m := range re.FindAllSubmatch(b, -1) {
		for _, f := range strings.Fields(string(m[1])) {
			if strings.HasSuffix(f, ".cpp") {
				files = append(files, filepath.ToSlash(filepath.Join("tools", "server", f)))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("lib: %s lists no sources", cm)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			return nil, fmt.Errorf("lib: llama-server source missing: %w", err)
		}
	}
	return files, nil
}
