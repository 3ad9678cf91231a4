package llama

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/cudadrv"
	"github.com/x/llama/internal/cudafatbin"
)

// npmCUDA are the facts of the npm CUDA build (node-llama-cpp 3.21.1):
// SASS for sm_86, sm_89, sm_120, sm_121; PTX for compute_75/80/90 at ISA
// 9.1.
var npmCUDA = cudafatbin.Facts{SASS: []int{86, 89, 120, 121}, PTX: []cudafatbin.PTX{
	{Arch: 75, ISA: cudafatbin.Version{Major: 9, Minor: 1}},
	{Arch: 80, ISA: cudafatbin.Version{Major: 9, Minor: 1}},
	{Arch: 90, ISA: cudafatbin.Version{Major: 9, Minor: 1}}}}

func cudaEnvOf(driver int, devs ...cudadrv.Device) cudaEnv {
	return cudaEnv{facts: npmCUDA, driver: cudadrv.Info{Version: driver, Devices: devs}, driverOK: true}
}

func TestJudgeDevices(t *testing.T) {
	cpu := Device{Name: "CPU", Type: "cpu"}
	h200 := Device{Name: "CUDA0", Description: "NVIDIA H200", Type: "gpu"}
	h200cc := cudadrv.Device{Ordinal: 0, Name: "NVIDIA H200", Major: 9}
	tests := []struct {
		name string
		devs []Device
		env  cudaEnv
		how  []string // per device
		errs []string // per device: text the error holds ("" none)
	}{
		{"H200 on a 13.0 driver: refused, with the three ways out", []Device{cpu, h200}, cudaEnvOf(13000, h200cc),
			[]string{"", ""},
			[]string{"", "CUDA0 (NVIDIA H200, compute capability 9.0) cannot run this CUDA build: it has machine code for sm_86, sm_89, sm_120, sm_121 but not sm_90, " +
				"and its PTX for compute_90 is ISA 9.1, which needs a CUDA driver >= 13.1 (this one is 13.0); to use it, update the NVIDIA driver to one of CUDA 13.1 or later, " +
				"or install the Vulkan build (llama-install -flavor vulkan), or build for sm_90 with llama-install -flavor cuda -build -cuda-arch 90"}},
		{"H200 on a 13.1 driver: PTX", []Device{h200}, cudaEnvOf(13010, h200cc),
			[]string{"compute capability 9.0, runs the compute_90 PTX, which the CUDA 13.1 driver compiles on first use"}, []string{""}},
		{"RTX 4090: SASS", []Device{{Name: "CUDA0", Type: "gpu"}}, cudaEnvOf(13000, cudadrv.Device{Major: 8, Minor: 9}),
			[]string{"compute capability 8.9, runs the sm_89 machine code"}, []string{""}},
		{"V100: no code", []Device{{Name: "CUDA0", Description: "Tesla V100", Type: "gpu"}}, cudaEnvOf(13010, cudadrv.Device{Major: 7}),
			[]string{""}, []string{"CUDA0 (Tesla V100, compute capability 7.0) cannot run this CUDA build: it has machine code for sm_86, sm_89, sm_120, sm_121 " +
				"and PTX for compute_75, compute_80, compute_90: none runs on 7.0; to use it, install the Vulkan build (llama-install -flavor vulkan), " +
				"or build for sm_70 with llama-install -flavor cuda -build -cuda-arch 70 (with a CUDA toolkit that still supports it: CUDA 13 starts at 7.5)"}},
		{"the second device by ordinal", []Device{h200, {Name: "CUDA1", Type: "gpu"}},
			cudaEnvOf(13000, h200cc, cudadrv.Device{Ordinal: 1, Major: 8, Minor: 6}),
			[]string{"", "compute capability 8.6, runs the sm_86 machine code"}, []string{"cannot run", ""}},
		{"unreadable library: not checked", []Device{h200}, cudaEnv{factsErr: errors.New("libggml-cuda.so: no .nv_fatbin section")},
			[]string{"not checked: libggml-cuda.so: no .nv_fatbin section"}, []string{""}},
		{"no driver: not checked", []Device{h200}, cudaEnv{facts: npmCUDA, devErr: cudadrv.ErrNoDriver},
			[]string{"not checked: " + cudadrv.ErrNoDriver.Error()}, []string{""}},
		{"a device the driver does not list", []Device{{Name: "CUDA3", Type: "gpu"}}, cudaEnvOf(13000, h200cc),
			[]string{"not checked: the CUDA driver does not list it"}, []string{""}},
		{"Vulkan is not checked", []Device{{Name: "Vulkan0", Type: "gpu"}}, cudaEnv{},
			[]string{""}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeDevices(tt.devs, tt.env)
			require.Len(t, got, len(tt.devs))
			for i, c := range got {
				assert.Equal(t, tt.devs[i], c.Device)
				assert.Equal(t, tt.how[i], c.How, c.Name)
				if tt.errs[i] == "" {
					assert.NoError(t, c.Err, c.Name)
					continue
				}
				require.Error(t, c.Err, c.Name)
				assert.ErrorIs(t, c.Err, ErrUnsupported)
				assert.Contains(t, c.Err.Error(), tt.errs[i])
			}
		})
	}
}

func TestPickDevices(t *testing.T) {
	refused := errorf(CodeUnsupported, "check device", "CUDA0 cannot run this CUDA build")
	cpu := DeviceCheck{Device: Device{Name: "CPU", Type: "cpu"}}
	bad0 := DeviceCheck{Device: Device{Name: "CUDA0", Type: "gpu"}, Err: refused}
	ok1 := DeviceCheck{Device: Device{Name: "CUDA1", Type: "gpu"}}
	igpu := DeviceCheck{Device: Device{Name: "Vulkan1", Type: "igpu"}}
	tests := []struct {
		name   string
		named  []string
		checks []DeviceCheck
		use    []string
		pin    bool
		warns  int
		err    error
	}{
		{"all usable: llama.cpp's default", nil, []DeviceCheck{cpu, ok1}, nil, false, 0, nil},
		{"the refused one left out", nil, []DeviceCheck{cpu, bad0, ok1}, []string{"CUDA1"}, true, 1, nil},
		{"none left: the CPU", nil, []DeviceCheck{cpu, bad0}, nil, true, 1, nil},
		{"an integrated GPU when no discrete one is left", nil, []DeviceCheck{cpu, bad0, igpu}, []string{"Vulkan1"}, true, 1, nil},
		{"named and refused: the error", []string{"CUDA1", "CUDA0"}, []DeviceCheck{cpu, bad0, ok1}, nil, false, 0, refused},
		{"named and usable", []string{"CUDA1"}, []DeviceCheck{cpu, bad0, ok1}, []string{"CUDA1"}, true, 0, nil},
		{"named but unknown: deviceList says so", []string{"CUDA7"}, []DeviceCheck{cpu}, []string{"CUDA7"}, true, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			use, pin, warns, err := pickDevices(tt.named, tt.checks)
			assert.Equal(t, tt.err, err)
			assert.Equal(t, tt.use, use)
			assert.Equal(t, tt.pin, pin)
			assert.Len(t, warns, tt.warns)
		})
	}
}

func TestCUDAOrdinal(t *testing.T) {
	for name, want := range map[string]int{"CUDA0": 0, "CUDA12": 12, "CUDA": -1, "CUDA01": -1, "CUDA-1": -1, "Vulkan0": -1, "CUDA0_Split": -1} {
		n, ok := cudaOrdinal(name)
		assert.Equal(t, want >= 0, ok, name)
		if ok {
			assert.Equal(t, want, n, name)
		}
	}
}

// TestCUDANoDevice: why the CUDA backend lists no device, from the
// driver's answer.
func TestCUDANoDevice(t *testing.T) {
	for _, tt := range []struct {
		name string
		info cudadrv.Info
		err  error
		want []string
	}{
		{"no driver library", cudadrv.Info{}, fmt.Errorf("%w: libcuda.so.1: cannot open shared object file", cudadrv.ErrNoDriver),
			[]string{"libcuda.so.1 cannot be loaded", "docker run --gpus all"}},
		{"cuInit fails", cudadrv.Info{Version: 13000}, errors.New("cuInit: CUDA error 100 (no device)"), []string{"cuInit", "no device"}},
		{"no device", cudadrv.Info{Version: 13000}, nil, []string{"reports no device", "CUDA_VISIBLE_DEVICES"}},
		{"runtime newer than the driver", cudadrv.Info{Version: 12080, Devices: []cudadrv.Device{{Name: "NVIDIA H200", Major: 9}}}, nil,
			[]string{"reports 1 device(s)", "newer than the driver (CUDA 12.8)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := cudaNoDevice(tt.info, tt.err)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
