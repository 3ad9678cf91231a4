package lib

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/cudadrv"
	"github.com/x/llama/internal/cudafatbin"
)

func TestParseCUDAArchs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "90", want: []string{"90"}},
		{in: "sm_90", want: []string{"90"}},
		{in: "compute_90", want: []string{"90"}},
		{in: "9.0", want: []string{"90"}},
		{in: "12.0", want: []string{"120"}},
		{in: "120a, 90 ,89,90", want: []string{"89", "90", "120a"}},
		{in: "100f", want: []string{"100f"}},
		{in: "SM_86", want: []string{"86"}},
		{in: "", err: "no CUDA architecture"},
		{in: " , ", err: "no CUDA architecture"},
		{in: "9", err: "not a CUDA architecture"},
		{in: "40", err: "not a CUDA architecture"},
		{in: "090", err: "not a CUDA architecture"},
		{in: "1200", err: "not a CUDA architecture"},
		{in: "9.10", err: "not a CUDA architecture"},
		{in: "90-real", err: "not a CUDA architecture"},
		{in: "native", err: "not a CUDA architecture"},
		{in: "90;89", err: "not a CUDA architecture"},
		{in: "sm_", err: "not a CUDA architecture"},
		{in: "50,52,53,60,61,62,70,72,75,80,86,87,89,90,100,120,121", err: "more than the 16 allowed"},
		{in: strings.Repeat("90,", 10), want: []string{"90"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCUDAArchs(tt.in)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCUDAArchsOf(t *testing.T) {
	h200 := cudadrv.Device{Ordinal: 0, Name: "NVIDIA H200", Major: 9, Minor: 0}
	l4 := cudadrv.Device{Ordinal: 1, Name: "NVIDIA L4", Major: 8, Minor: 9}
	b200 := cudadrv.Device{Ordinal: 2, Name: "NVIDIA RTX PRO 6000", Major: 12, Minor: 0}
	tests := []struct {
		name string
		devs []cudadrv.Device
		want []string
		err  string
	}{
		{name: "one H200", devs: []cudadrv.Device{h200}, want: []string{"90"}},
		{name: "eight H200", devs: slices.Repeat([]cudadrv.Device{h200}, 8), want: []string{"90"}},
		{name: "mixed", devs: []cudadrv.Device{b200, h200, l4}, want: []string{"89", "90", "120"}},
		{name: "none", err: "lists no GPU"},
		{name: "nonsense capability", devs: []cudadrv.Device{{Name: "x", Major: 0, Minor: 0}}, err: "reports compute capability 0.0"},
		{name: "minor out of range", devs: []cudadrv.Device{{Name: "x", Major: 9, Minor: 12}}, err: "9.12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cudaArchsOf(tt.devs)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// writeExec writes an executable shell script.
func writeExec(t *testing.T, path, script string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755))
	return path
}

func TestFindNVCC(t *testing.T) {
	root := t.TempDir()
	onPath := writeExec(t, filepath.Join(root, "path", "nvcc"), "")
	home := writeExec(t, filepath.Join(root, "cuda", "bin", "nvcc"), "")
	venv := filepath.Join(root, "venv")
	venvNVCC := writeExec(t, filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cu13", "bin", "nvcc"), "")
	site := filepath.Join(root, "site")
	siteNVCC := writeExec(t, filepath.Join(site, "nvidia", "cuda_nvcc", "bin", "nvcc"), "")
	notExec := filepath.Join(root, "site2", "nvidia", "cu13", "bin", "nvcc")
	require.NoError(t, os.MkdirAll(filepath.Dir(notExec), 0o755))
	require.NoError(t, os.WriteFile(notExec, nil, 0o644))

	look := func(have ...string) func(string) (string, error) {
		return func(name string) (string, error) {
			for _, h := range have {
				if name == h || filepath.Base(h) == name {
					return h, nil
				}
			}
			return "", os.ErrNotExist
		}
	}
	tests := []struct {
		name    string
		nvcc    string
		env     map[string]string
		path    []string
		sites   []string
		want    string
		wantErr string
	}{
		{name: "explicit", nvcc: home, path: []string{home, onPath}, want: home},
		{name: "explicit missing", nvcc: filepath.Join(root, "nope"), path: []string{onPath}, wantErr: "cannot be run"},
		{name: "CUDACXX", env: map[string]string{"CUDACXX": home}, path: []string{home, onPath}, want: home},
		{name: "CUDACXX wrong", env: map[string]string{"CUDACXX": "/nope/nvcc"}, path: []string{onPath}, wantErr: "$CUDACXX"},
		{name: "PATH first", env: map[string]string{"CUDA_HOME": filepath.Join(root, "cuda")}, path: []string{onPath}, want: onPath},
		{name: "CUDA_HOME", env: map[string]string{"CUDA_HOME": filepath.Join(root, "cuda")}, want: home},
		{name: "CUDA_PATH", env: map[string]string{"CUDA_PATH": filepath.Join(root, "cuda")}, want: home},
		{name: "wheels in the virtual environment", env: map[string]string{"VIRTUAL_ENV": venv}, sites: []string{site}, want: venvNVCC},
		{name: "CUDA 12 wheels in site-packages", sites: []string{site}, want: siteNVCC},
		{name: "a wheel nvcc that is not executable", sites: []string{filepath.Join(root, "site2")}, wantErr: "pip install nvidia-cuda-nvcc"},
		{name: "none", wantErr: "none was found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat("/usr/local/cuda/bin/nvcc"); err == nil && tt.wantErr != "" {
				t.Fatal("this machine has /usr/local/cuda/bin/nvcc, which the lookup would find")
			}
			got, err := findNVCC(tt.nvcc, func(k string) string { return tt.env[k] }, look(tt.path...),
				func() []string { return tt.sites })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCUDACMakeArgs(t *testing.T) {
	base := cudaConfig{src: "/src", build: "/b", archs: []string{"89", "90"}, nvcc: "/usr/local/cuda/bin/nvcc"}
	tests := []struct {
		name    string
		cfg     func(c cudaConfig) cudaConfig
		has     []string
		hasNot  []string
		targets []string
	}{
		{name: "libraries only", cfg: func(c cudaConfig) cudaConfig { return c },
			has: []string{"-DCMAKE_CUDA_ARCHITECTURES=89-real;90-real", "-DGGML_CUDA=ON", "-DGGML_BACKEND_DL=ON",
				"-DGGML_CPU_ALL_VARIANTS=ON", "-DGGML_CUDA_FA_ALL_QUANTS=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
				"-DLLAMA_BUILD_SERVER=OFF", "-DCUDAToolkit_ROOT=/usr/local/cuda", "-DCMAKE_INSTALL_RPATH=$ORIGIN"},
			hasNot:  []string{"-DGGML_CUDA_NO_VMM=ON"},
			targets: []string{"llama"}},
		{name: "server", cfg: func(c cudaConfig) cudaConfig { c.server = true; c.mtmd = true; return c },
			has:     []string{"-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_COMMON=ON", "-DLLAMA_BUILD_TOOLS=ON"},
			targets: []string{"llama", "mtmd", "llama-common", "llama-server"}},
		{name: "mtmd", cfg: func(c cudaConfig) cudaConfig { c.mtmd = true; return c },
			has: []string{"-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TOOLS=ON"}, targets: []string{"llama", "mtmd"}},
		{name: "wheels without a driver", cfg: func(c cudaConfig) cudaConfig {
			c.nvcc, c.wheel = "/venv/site-packages/nvidia/cu13/bin/nvcc", true
			return c
		}, has: []string{"-DCMAKE_LIBRARY_PATH=/b/cuda-link-names", "-DGGML_CUDA_NO_VMM=ON"}, targets: []string{"llama"}},
		{name: "wheels with a driver", cfg: func(c cudaConfig) cudaConfig {
			c.nvcc, c.wheel, c.libcuda = "/venv/site-packages/nvidia/cu13/bin/nvcc", true, "/usr/lib/libcuda.so.1"
			return c
		}, has: []string{"-DCMAKE_LIBRARY_PATH=/b/cuda-link-names"}, hasNot: []string{"-DGGML_CUDA_NO_VMM=ON"}, targets: []string{"llama"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg(base)
			args := c.cmakeArgs()
			for _, a := range tt.has {
				assert.Contains(t, args, a)
			}
			for _, a := range tt.hasNot {
				assert.NotContains(t, args, a)
			}
			assert.Equal(t, tt.targets, c.targets())
		})
	}
	assert.True(t, isWheelNVCC("/v/lib/python3.12/site-packages/nvidia/cu13/bin/nvcc"))
	assert.True(t, isWheelNVCC("/v/site-packages/nvidia/cuda_nvcc/bin/nvcc"))
	assert.False(t, isWheelNVCC("/usr/local/cuda/bin/nvcc"))
}

func TestCheckWheelReleases(t *testing.T) {
	for _, tt := range []struct {
		name   string
		wheels []string
		nvcc   string // below site-packages
		err    []string
	}{
		{name: "one release", wheels: []string{"nvidia_cuda_nvcc-13.0.88", "nvidia_nvvm-13.0.88", "nvidia_cuda_crt-13.0.88",
			"nvidia_cuda_runtime-13.0.96", "nvidia_cublas-13.0.2.14", "nvidia_cuda_cccl-13.0.85"}, nvcc: "nvidia/cu13/bin/nvcc"},
		{name: "cuBLAS and CCCL number their own", wheels: []string{"nvidia_cuda_nvcc-13.5.37", "nvidia_nvvm-13.5.37",
			"nvidia_cublas-13.10.0.20", "nvidia_cuda_cccl-13.3.5.0.6"}, nvcc: "nvidia/cu13/bin/nvcc"},
		// What pip makes of "pip install nvidia-cuda-nvcc==13.0.88":
		// the newest nvvm and crt beside it.
		{name: "pinned nvcc, newest nvvm", wheels: []string{"nvidia_cuda_nvcc-13.0.88", "nvidia_nvvm-13.5.37",
			"nvidia_cuda_crt-13.5.37", "nvidia_cuda_runtime-13.0.96"}, nvcc: "nvidia/cu13/bin/nvcc",
			err: []string{"more than one CUDA release: nvcc is 13.0 but nvidia-cuda-crt 13.5.37, nvidia-nvvm 13.5.37",
				"pip install 'nvidia-cuda-crt==13.0.*' 'nvidia-cuda-nvcc==13.0.*' 'nvidia-cuda-runtime==13.0.*' 'nvidia-nvvm==13.0.*'"}},
		{name: "CUDA 12's suffixed names", wheels: []string{"nvidia_cuda_nvcc_cu12-12.9.86", "nvidia_cuda_runtime_cu12-12.4.127"},
			nvcc: "nvidia/cuda_nvcc/bin/nvcc", err: []string{"nvcc is 12.9 but nvidia-cuda-runtime-cu12 12.4.127",
				"'nvidia-cuda-runtime-cu12==12.9.*'"}},
		{name: "no dist-info: nothing to compare", nvcc: "nvidia/cu13/bin/nvcc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			site := t.TempDir()
			for _, w := range append(tt.wheels, "numpy-2.1.0", "pip-24.0") {
				require.NoError(t, os.Mkdir(filepath.Join(site, w+".dist-info"), 0o755))
			}
			err := checkWheelReleases(filepath.Join(site, tt.nvcc))
			if tt.err == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, e := range tt.err {
				assert.Contains(t, err.Error(), e)
			}
		})
	}
}

// fakeSource writes a small tree shaped as the parts of the llama.cpp
// source a CUDA build digests.
func fakeSource(t *testing.T) string {
	src := t.TempDir()
	for f, body := range map[string]string{
		"CMakeLists.txt":                     "project(llama.cpp)\n",
		"ggml/src/ggml-cuda/CMakeLists.txt":  "find_package(CUDAToolkit)\n",
		"ggml/src/ggml-cuda/arange.cu":       "// arange\n",
		"src/llama.cpp":                      "// llama\n",
		"include/llama.h":                    "// api\n",
		"tools/server/server.cpp":            "// server\n",
		"tools/ui/node_modules/x/index.js":   "// not digested\n",
		"ggml/src/ggml-cuda/.git/HEAD":       "not digested\n",
		"scripts/ui-assets.cmake":            "# ui\n",
		"vendor/cpp-httplib/httplib.h":       "// http\n",
		"common/common.cpp":                  "// common\n",
		"cmake/build-info.cmake":             "# info\n",
		"docs/build.md":                      "not read by the build\n",
		"ggml/src/ggml-cuda/template-x/a.cu": "// instance\n",
	} {
		p := filepath.Join(src, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return src
}

func TestCUDAInputs(t *testing.T) {
	src := fakeSource(t)
	base := cudaConfig{src: src, build: "/b1", archs: []string{"90"}, nvcc: "/a/bin/nvcc"}
	digest := func(c cudaConfig, nvccVer string) string {
		d, err := cudaInputs(c, nvccVer, "g++ 12", "cmake 3.25")
		require.NoError(t, err)
		return d
	}
	ref := digest(base, "release 13.0")

	same := base
	same.build, same.nvcc = "/b2", "/other/bin/nvcc"
	assert.Equal(t, ref, digest(same, "release 13.0"), "the folders and the compiler's path are not inputs")

	for name, f := range map[string]func(t *testing.T) string{
		"another architecture": func(t *testing.T) string { c := base; c.archs = []string{"89", "90"}; return digest(c, "release 13.0") },
		"another nvcc":         func(t *testing.T) string { return digest(base, "release 13.1") },
		"with the server":      func(t *testing.T) string { c := base; c.server = true; return digest(c, "release 13.0") },
		"without the VMM pool": func(t *testing.T) string { c := base; c.wheel = true; return digest(c, "release 13.0") },
	} {
		assert.NotEqual(t, ref, f(t), name)
	}

	// Files the build does not read leave the digest alone; its sources
	// do not.
	for _, f := range []string{"docs/build.md", "tools/ui/node_modules/x/index.js", "ggml/src/ggml-cuda/.git/HEAD"} {
		require.NoError(t, os.WriteFile(filepath.Join(src, f), []byte("changed"), 0o644))
		assert.Equal(t, ref, digest(base, "release 13.0"), f)
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "ggml/src/ggml-cuda/arange.cu"), []byte("// changed\n"), 0o644))
	assert.NotEqual(t, ref, digest(base, "release 13.0"))

	_, err := cudaInputs(cudaConfig{src: t.TempDir()}, "", "", "")
	require.ErrorContains(t, err, "not the llama.cpp source")
}

// fatbinELF is a minimal ELF shared object whose .nv_fatbin section holds
// one fat binary with machine code (SASS) for each architecture.
func fatbinELF(t *testing.T, archs ...int) []byte {
	t.Helper()
	le := binary.LittleEndian
	var body []byte
	for _, a := range archs {
		h := make([]byte, 64)
		le.PutUint16(h[0:], cudafatbin.KindSASS)
		le.PutUint16(h[2:], 0x101)
		le.PutUint32(h[4:], 64)
		le.PutUint64(h[8:], 8)
		le.PutUint32(h[28:], uint32(a))
		le.PutUint64(h[40:], 0x11)
		body = append(append(body, h...), make([]byte, 8)...)
	}
	fat := make([]byte, 16)
	le.PutUint32(fat[0:], cudafatbin.Magic)
	le.PutUint16(fat[4:], 1)
	le.PutUint16(fat[6:], 16)
	le.PutUint64(fat[8:], uint64(len(body)))
	fat = append(fat, body...)

	shstr := []byte("\x00.nv_fatbin\x00.shstrtab\x00")
	dataOff := uint64(64)
	strOff := dataOff + uint64(len(fat))
	shOff := (strOff + uint64(len(shstr)) + 7) &^ 7
	var b bytes.Buffer
	hdr := elf.Header64{Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: 1,
		Shoff: shOff, Ehsize: 64, Shentsize: 64, Shnum: 3, Shstrndx: 2}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	require.NoError(t, binary.Write(&b, le, hdr))
	b.Write(fat)
	b.Write(shstr)
	b.Write(make([]byte, shOff-uint64(b.Len())))
	for _, s := range []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Off: dataOff, Size: uint64(len(fat)), Addralign: 8},
		{Name: 12, Type: uint32(elf.SHT_STRTAB), Off: strOff, Size: uint64(len(shstr)), Addralign: 1},
	} {
		require.NoError(t, binary.Write(&b, le, s))
	}
	return b.Bytes()
}

// TestInstallCUDACaching runs InstallCUDA with stand-ins for cmake and
// ninja (scripts that log each call, ninja's putting prepared files where
// the build writes them) and for nvcc (a script that prints a release line), to
// check what is rebuilt and what is kept; the real compile is the
// cudabuild suite's.
func TestInstallCUDACaching(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the CUDA build is Linux only")
	}
	root := t.TempDir()
	src := fakeSource(t)
	out := filepath.Join(root, "built")
	require.NoError(t, os.MkdirAll(out, 0o755))
	for name, body := range map[string][]byte{
		"libllama.so.0.0.1": []byte("llama"), "libggml.so.0.23.0": []byte("ggml"),
		"libggml-base.so.0.23.0": []byte("base"), "libggml-cpu-x64.so": []byte("cpu"),
		"libggml-cuda.so": fatbinELF(t, 90), "llama-ui-embed": []byte("not installed"),
	} {
		require.NoError(t, os.WriteFile(filepath.Join(out, name), body, 0o755))
	}
	for link, target := range map[string]string{"libllama.so": "libllama.so.0", "libllama.so.0": "libllama.so.0.0.1",
		"libggml.so": "libggml.so.0.23.0", "libggml-base.so": "libggml-base.so.0.23.0"} {
		require.NoError(t, os.Symlink(target, filepath.Join(out, link)))
	}
	calls := filepath.Join(root, "calls")
	cmake := writeExec(t, filepath.Join(root, "bin", "cmake"), `
echo "cmake $*" >> `+calls+`
case "$1" in
--version) echo "cmake version 3.99" ;;
esac
`)
	// ninja from PATH: a stand-in that puts the prepared files where the
	// build writes them.
	writeExec(t, filepath.Join(root, "bin", "ninja"), `
echo "ninja $*" >> `+calls+`
if [ -f `+root+`/slow ]; then
  trap 'kill $!; echo "ninja interrupted" >> `+calls+`; exit 130' INT
  echo "ninja started" >> `+calls+`
  echo "ninja started"
  sleep 60 & wait
fi
[ "$1" = -C ] && mkdir -p "$2/bin" && cp -a `+out+`/. "$2/bin/"
`)
	t.Setenv("PATH", filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	nvcc := writeExec(t, filepath.Join(root, "cuda", "bin", "nvcc"), `echo "Cuda compilation tools, release 13.0, V13.0.88"`)
	dir := filepath.Join(root, "cache", "linux-amd64-cuda-local")
	buildDir := filepath.Join(root, "cache", ".linux-amd64-cuda-local-build")
	builds := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "ninja -C ")
	}
	opts := CUDAOptions{Dir: dir, Source: src, Archs: []string{"sm_90"}, NVCC: nvcc, CMake: cmake, Jobs: 1}
	ctx := context.Background()

	r, err := InstallCUDA(ctx, opts)
	require.NoError(t, err)
	assert.True(t, r.Built)
	assert.Equal(t, []string{"90"}, r.Archs)
	assert.Equal(t, "Cuda compilation tools, release 13.0, V13.0.88", r.NVCCVersion)
	assert.Equal(t, filepath.Join(dir, "libggml-cuda.so"), r.Path)
	assert.ElementsMatch(t, []string{"libggml-base.so", "libggml-base.so.0.23.0", "libggml-cpu-x64.so", "libggml-cuda.so",
		"libggml.so", "libggml.so.0.23.0", "libllama.so", "libllama.so.0", "libllama.so.0.0.1"}, r.Files)
	assert.Equal(t, 1, builds())
	assert.NoDirExists(t, buildDir, "the build folder goes after a successful build")
	p, err := LibraryPath(dir, "llama")
	require.NoError(t, err, "the folder is a library folder")
	assert.Equal(t, filepath.Join(dir, "libllama.so"), p)
	assert.Equal(t, []string{filepath.Join(dir, "libggml-cuda.so")}, GPUBackendFiles(dir))
	assert.NoFileExists(t, filepath.Join(dir, "llama-ui-embed"))
	f, err := Find(dir, CUDALocal)
	require.NoError(t, err)
	assert.Equal(t, dir, f)

	steps := []struct {
		name    string
		change  func(t *testing.T, o *CUDAOptions)
		built   bool
		wantErr string
	}{
		{name: "unchanged: kept", change: func(*testing.T, *CUDAOptions) {}},
		{name: "force", change: func(_ *testing.T, o *CUDAOptions) { o.Force = true }, built: true},
		{name: "kept again", change: func(*testing.T, *CUDAOptions) {}},
		{name: "an installed file changed", change: func(t *testing.T, _ *CUDAOptions) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "libggml-cpu-x64.so"), []byte("damaged"), 0o755))
		}, built: true},
		{name: "the stamp gone", change: func(t *testing.T, _ *CUDAOptions) {
			require.NoError(t, os.Remove(filepath.Join(dir, CUDAStampFile)))
		}, built: true},
		{name: "a source changed", change: func(t *testing.T, o *CUDAOptions) {
			require.NoError(t, os.WriteFile(filepath.Join(o.Source, "src/llama.cpp"), []byte("// new\n"), 0o644))
		}, built: true},
		{name: "an architecture the build lacks", change: func(_ *testing.T, o *CUDAOptions) { o.Archs = []string{"90", "100"} },
			wantErr: "no machine code for sm_100"},
	}
	for _, s := range steps {
		before := builds()
		s.change(t, &opts)
		r, err := InstallCUDA(ctx, opts)
		opts.Force = false
		if s.wantErr != "" {
			require.ErrorContains(t, err, s.wantErr, s.name)
			assert.DirExists(t, buildDir, "%s: a failed build keeps its folder", s.name)
			continue
		}
		require.NoError(t, err, s.name)
		assert.Equal(t, s.built, r.Built, s.name)
		want := before
		if s.built {
			want++
		}
		assert.Equal(t, want, builds(), s.name)
		assert.Len(t, r.Files, 9, s.name)
	}

	// Canceled while ninja runs: ninja is interrupted, as Ctrl-C would, and
	// the build folder stays for the next run.
	require.NoError(t, os.WriteFile(filepath.Join(root, "slow"), nil, 0o644))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts.Archs, opts.Force = []string{"90"}, true
	// The stand-in says it runs on its output, which the build's progress
	// lines carry: that line cancels.
	opts.Progress = onLine{"ninja started", cancel}
	_, err = InstallCUDA(cctx, opts)
	opts.Progress = nil
	require.Error(t, err)
	assert.ErrorContains(t, err, "run again to resume")
	b, _ := os.ReadFile(calls)
	assert.Contains(t, string(b), "ninja interrupted")
	assert.DirExists(t, buildDir)
	require.NoError(t, os.Remove(filepath.Join(root, "slow")))

	npm := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(npm, "libllama.cuda."+Version+".so"), []byte("prebuilt"), 0o755))
	_, err = InstallCUDA(ctx, CUDAOptions{Dir: npm, Source: src, Archs: []string{"90"}, NVCC: nvcc, CMake: cmake})
	require.ErrorContains(t, err, "holds another build of the library")

	_, err = InstallCUDA(ctx, CUDAOptions{Dir: dir, Source: t.TempDir(), Archs: []string{"90"}, NVCC: nvcc, CMake: cmake})
	require.ErrorContains(t, err, "not the llama.cpp source")
	_, err = InstallCUDA(ctx, CUDAOptions{Dir: dir, Source: src, Archs: []string{"nine"}, NVCC: nvcc, CMake: cmake})
	require.ErrorContains(t, err, "not a CUDA architecture")
}

func TestInstallCUDALocalFlavor(t *testing.T) {
	t.Setenv(EnvCache, t.TempDir())
	t.Setenv(EnvDir, "")
	_, err := Install(context.Background(), InstallOptions{Flavor: CUDALocal})
	require.ErrorContains(t, err, "-flavor cuda -build")
	d, err := DefaultDir(CUDALocal)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(d, "-cuda-local"), d)
}

// onLine is a progress writer that calls f when a line holds s (progress
// is written a line at a time).
type onLine struct {
	s string
	f func()
}

func (w onLine) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.s)) {
		w.f()
	}
	return len(p), nil
}
