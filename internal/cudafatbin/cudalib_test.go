//go:build cudalib

package cudafatbin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/lib"
)

// TestNPMCUDALibrary reads the npm CUDA build's libggml-cuda.so (in the
// folder LLAMA_CUDA_LIB_DIR names, else the cache folder llama-install
// -flavor cuda installs into) and checks the verdicts its facts give. It
// needs no GPU.
func TestNPMCUDALibrary(t *testing.T) {
	dir := os.Getenv("LLAMA_CUDA_LIB_DIR")
	if dir == "" {
		var err error
		dir, err = lib.DefaultDir(lib.CUDA)
		require.NoError(t, err)
	}
	f, err := ReadFile(filepath.Join(dir, "libggml-cuda.so"))
	require.NoError(t, err)
	assert.Equal(t, npmFacts.SASS, f.SASS)
	assert.Equal(t, npmFacts.PTX, f.PTX)
	assert.Greater(t, f.Containers, 100)

	v130, v131 := Version{13, 0}, Version{13, 1}
	tests := []struct {
		name   string
		cc     Version
		driver Version
		want   Verdict
	}{
		{"sm_90, driver 13.0: refused, needs 13.1", Version{9, 0}, v130, Verdict{PTX: 90, NeedDriver: v131, ISA: Version{9, 1}}},
		{"sm_90, driver 13.1: PTX JIT", Version{9, 0}, v131, Verdict{OK: true, PTX: 90}},
		{"sm_89: SASS", Version{8, 9}, v130, Verdict{OK: true, SASS: 89}},
		{"sm_70: no code", Version{7, 0}, v131, Verdict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Check(f, tt.cc, tt.driver))
		})
	}
}
