package llama

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

// TestOffloadsToGPU: a model runs on a GPU when it has layers to offload
// and one of the devices it may use is a GPU (discrete or integrated);
// the CPU, BLAS-like accelerators and devices it is not pinned to do not
// count.
func TestOffloadsToGPU(t *testing.T) {
	cpu := Device{Name: "CPU", Type: "cpu"}
	blas := Device{Name: "BLAS", Type: "accel"}
	cuda := Device{Name: "CUDA0", Type: "gpu"}
	igpu := Device{Name: "Vulkan0", Type: "igpu"}
	for _, tc := range []struct {
		name   string
		layers int32
		names  []string
		pinned bool
		devs   []Device
		want   bool
	}{
		{"cpu build", -1, nil, false, []Device{cpu}, false},
		{"cpu build with blas", -1, nil, false, []Device{cpu, blas}, false},
		{"gpu, every layer (default)", -1, nil, false, []Device{cpu, cuda}, true},
		{"gpu, some layers", 4, nil, false, []Device{cpu, cuda}, true},
		{"gpu, CPUOnly", 0, nil, false, []Device{cpu, cuda}, false},
		{"integrated gpu", -1, nil, false, []Device{cpu, igpu}, true},
		{"pinned to the gpu", -1, []string{"CUDA0"}, true, []Device{cpu, cuda}, true},
		{"pinned to another gpu", -1, []string{"CUDA1"}, true, []Device{cpu, cuda}, false},
		{"every gpu refused", -1, nil, true, []Device{cpu, cuda}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, offloadsToGPU(tc.layers, tc.names, tc.pinned, tc.devs))
		})
	}
}

// TestOnGPUModel: on this build's devices, a model loaded by default runs
// on a GPU exactly when the library lists one, and never with CPUOnly.
func TestOnGPUModel(t *testing.T) {
	devs, err := Devices()
	require.NoError(t, err)
	gpu := offloadsToGPU(-1, nil, false, devs)
	for _, tc := range []struct {
		name string
		opts ModelOptions
		want bool
	}{
		{"default", ModelOptions{}, gpu},
		{"CPUOnly", ModelOptions{CPUOnly: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), tc.opts)
			require.NoError(t, err)
			defer m.Close()
			assert.Equal(t, tc.want, m.OnGPU())
		})
	}
}
