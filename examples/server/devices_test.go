package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestFlagDevices checks -dev and --list-devices: the listing has
// llama-server's shape (the devices besides the CPU, or "(none)"), the
// names it lists are accepted, none and CPU keep the model on the CPU, and
// an unknown name stops the start.
func TestFlagDevices(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		cpuOnly bool
		draft   bool // the draft model's options
		devices []string
	}{
		{args: []string{"-dev", "none"}, cpuOnly: true},
		{args: []string{"--device", "CPU"}, cpuOnly: true},
		{args: []string{"-dev", "CUDA0,CUDA1"}, devices: []string{"CUDA0", "CUDA1"}},
		{args: []string{"-dev", "CUDA0", "-dev", "none"}, cpuOnly: true},
		{env: map[string]string{"LLAMA_ARG_DEVICE": "Vulkan0"}, devices: []string{"Vulkan0"}},
		{args: []string{"-devd", "CUDA1"}, draft: true, devices: []string{"CUDA1"}},
		{args: []string{"--spec-draft-device", "none"}, draft: true, cpuOnly: true},
	} {
		c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
		require.NoError(t, err, "%v", tc.args)
		mo := c.opts.ModelOptions
		if tc.draft {
			mo = c.opts.Engine.Speculative.DraftModelOptions
		}
		assert.Equal(t, tc.cpuOnly, mo.CPUOnly, "%v %v", tc.args, tc.env)
		assert.Equal(t, tc.devices, mo.Devices, "%v %v", tc.args, tc.env)
	}
	for _, bad := range []string{"", ",", "CUDA0,"} {
		_, err := parseFlags([]string{"-dev", bad}, noEnv, io.Discard)
		assert.ErrorContains(t, err, "-dev", "%q", bad)
		_, err = parseFlags([]string{"-devd", bad}, noEnv, io.Discard)
		assert.ErrorContains(t, err, "-devd", "%q", bad)
	}

	c, err := parseFlags([]string{"--list-devices"}, noEnv, io.Discard)
	require.NoError(t, err)
	require.True(t, c.listDevices)
	var out bytes.Buffer
	require.NoError(t, printDevices(&out))
	devs, err := llama.Devices()
	require.NoError(t, err)
	var gpus []string // what -dev may name
	for _, d := range devs {
		if d.Type != "cpu" {
			gpus = append(gpus, d.Name)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.Equal(t, "Available devices:", lines[0])
	if len(gpus) == 0 {
		assert.Equal(t, []string{"  (none)"}, lines[1:])
	}
	// A device's verdict, when it was checked, is on a line of its own
	// ("    usable: ..." or "    refused: ...").
	var listed []string
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "    ") && !strings.HasPrefix(l, "  note: ") {
			listed = append(listed, l)
		}
	}
	for i, g := range gpus {
		assert.True(t, strings.HasPrefix(listed[i], "  "+g+": "), listed[i])
	}

	model := testenv.Model(t, "stories260K.gguf")
	want, err := greedy(t, model, "-dev", "none")
	require.NoError(t, err)
	got, err := greedy(t, model, "-dev", "CPU")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	for _, g := range gpus {
		_, err := greedy(t, model, "-dev", g)
		assert.NoError(t, err, "the listed device %s is accepted", g)
	}
	_, err = greedy(t, model, "-dev", "NOPE0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid device "NOPE0"`)
	_, err = greedy(t, model, "-md", model, "--spec-type", "draft-simple", "-devd", "NOPE1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid device "NOPE1"`, "the draft model's devices are checked too")
}

// TestGPUBuildWithoutItsRuntime: a GPU build whose backend cannot be
// loaded (here a libggml-vulkan.so the dynamic loader refuses, as the
// Vulkan build is refused where the Vulkan loader is absent) runs on the
// CPU; --list-devices says why no device is listed, and -dev naming the
// GPU stops the start with that reason, not a crash.
func TestGPUBuildWithoutItsRuntime(t *testing.T) {
	src := testenv.LibraryDir(t)
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".so") {
			require.NoError(t, os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())))
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "libggml-vulkan.so"), []byte("not a shared library"), 0o755))
	bin := buildServer(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "LLAMA_LIB_DIR="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("--list-devices")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Available devices:\n  (none)\n")
	assert.Contains(t, out, "note: the GPU backend libggml-vulkan.so cannot be loaded: ")
	out, err = run("-m", testenv.Model(t, "stories260K.gguf"), "-dev", "Vulkan0", "-t", "1", "--port", "0")
	require.Error(t, err, out)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode(), "an error exit, not a crash: %s", out)
	assert.Contains(t, out, `invalid device "Vulkan0": there is no device besides the CPU (the GPU backend libggml-vulkan.so cannot be loaded: `)
}

// TestDefaultLogHasLlamaCppWarnings starts the server without -v: the
// warnings llama.cpp logs while loading stories260K (its bad special
// token ids) reach the default log, its info lines do not; with -v they
// both do.
func TestDefaultLogHasLlamaCppWarnings(t *testing.T) {
	bin := buildServer(t)
	model := testenv.Model(t, "stories260K.gguf")
	for _, tc := range []struct {
		args     []string
		wantInfo bool
	}{
		{[]string{"-m", model, "-t", "1"}, false},
		{[]string{"-m", model, "-t", "1", "-v"}, true},
	} {
		c := startServer(t, bin, tc.args...)
		require.NoError(t, c.stop())
		logs := c.logs.String()
		assert.Regexp(t, `level=WARN msg="load: bad special token: [^"]*" source=llama.cpp`, logs, "%v", tc.args)
		assert.Equal(t, tc.wantInfo, strings.Contains(logs, "level=INFO msg=\"llama_model_loader:"), "%v: %s", tc.args, logs)
	}
}

// TestWriteDevices checks the listing's verdict lines on devices this
// machine does not have: an H200 the npm CUDA build cannot run on a 13.0
// driver, a GPU it runs, a Vulkan device (not checked) and a note.
func TestWriteDevices(t *testing.T) {
	refusal := &llama.Error{Code: llama.CodeUnsupported, Op: "check device", Msg: "CUDA0 (NVIDIA H200, compute capability 9.0) cannot run this CUDA build: ..."}
	var out bytes.Buffer
	writeDevices(&out, []llama.DeviceCheck{
		{Device: llama.Device{Name: "CPU", Type: "cpu"}},
		{Device: llama.Device{Name: "CUDA0", Description: "NVIDIA H200", Type: "gpu", TotalMemory: 143155 << 20, FreeMemory: 142000 << 20}, Err: refusal},
		{Device: llama.Device{Name: "CUDA1", Description: "NVIDIA GeForce RTX 4090", Type: "gpu", TotalMemory: 24 << 30, FreeMemory: 23 << 30},
			How: "compute capability 8.9, runs the sm_89 machine code"},
		{Device: llama.Device{Name: "Vulkan0", Description: "AMD Radeon", Type: "gpu", TotalMemory: 16 << 30, FreeMemory: 16 << 30}},
	}, []error{errors.New("the GPU backend libggml-vulkan.so cannot be loaded: libvulkan.so.1: cannot open shared object file")})
	assert.Equal(t, `Available devices:
  CUDA0: NVIDIA H200 (143155 MiB, 142000 MiB free)
    refused: CUDA0 (NVIDIA H200, compute capability 9.0) cannot run this CUDA build: ...
  CUDA1: NVIDIA GeForce RTX 4090 (24576 MiB, 23552 MiB free)
    usable: compute capability 8.9, runs the sm_89 machine code
  Vulkan0: AMD Radeon (16384 MiB, 16384 MiB free)
  note: the GPU backend libggml-vulkan.so cannot be loaded: libvulkan.so.1: cannot open shared object file
`, out.String())
}
