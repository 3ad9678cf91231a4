//go:build cudalib

package cudafatbin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/cudafatbin"
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
	f, err := cudafatbin.ReadFile(filepath.Join(dir, "libggml-cuda.so"))
	require.NoError(t, err)
	assert.Equal(t, cudafatbin.NPMFacts.SASS, f.SASS)
	assert.Equal(t, cudafatbin.NPMFacts.PTX, f.PTX)
	assert.Greater(t, f.Containers, 100)

	v130, v131 := cudafatbin.Version{13, 0}, cudafatbin.Version{13, 1}
	tests := []struct {
		name   string
		cc     cudafatbin.Version
		driver cudafatbin.Version
		want   cudafatbin.Verdict
	}{
		{"sm_90, driver 13.0: refused, needs 13.1", cudafatbin.Version{9, 0}, v130, cudafatbin.Verdict{PTX: 90, NeedDriver: v131, ISA: cudafatbin.Version{9, 1}}},
		{"sm_90, driver 13.1: PTX JIT", cudafatbin.Version{9, 0}, v131, cudafatbin.Verdict{OK: true, PTX: 90}},
		{"sm_89: SASS", cudafatbin.Version{8, 9}, v130, cudafatbin.Verdict{OK: true, SASS: 89}},
		{"sm_70: no code", cudafatbin.Version{7, 0}, v131, cudafatbin.Verdict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, cudafatbin.Check(f, tt.cc, tt.driver))
		})
	}
}
