//go:build cudabuild

package lib_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/cudafatbin"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/lib"
)

// cudaTestObjects are the ggml-cuda files TestCUDACompileSM90 compiles:
// a small kernel, and a template instance of the quantized matrix
// multiplication, which has tensor-core code paths per architecture.
var cudaTestObjects = []string{
	"ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/arange.cu.o",
	"ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/template-instances/mmq-instance-q4_0.cu.o",
}

// TestCUDACompileSM90 configures the CUDA build from the pinned source
// with the options InstallCUDA uses, compiles two ggml-cuda files for
// sm_90 with a real nvcc (FindNVCC's: on PATH, or NVIDIA's pip wheels),
// links them into a libggml-cuda.so, and reads its fat binaries as the
// GPU check does: an H200 (9.0) under a CUDA 13.0 driver runs its
// machine code. A full ggml-cuda build is the GPU machine's (docs/gpu.md).
// It runs only with -tags cudabuild; no nvcc, cmake or source fails it.
func TestCUDACompileSM90(t *testing.T) {
	testenv.CC(t)
	src := testenv.LlamaSrc(t)
	nvcc, err := lib.FindNVCC("")
	require.NoError(t, err)
	ctx := context.Background()
	ver, err := lib.NVCCVersion(ctx, nvcc)
	require.NoError(t, err)
	t.Logf("nvcc: %s (%s)", nvcc, ver)

	build := t.TempDir()
	var log bytes.Buffer
	err = lib.ConfigureCUDA(ctx, src, build, nvcc, []string{"90"}, cudaTestObjects, &log)
	require.NoError(t, err, "%s", log.String())
	assert.Contains(t, log.String(), "CMAKE_CUDA_ARCHITECTURES=90-real")

	so := filepath.Join(t.TempDir(), "libggml-cuda.so")
	link := []string{"-shared", "-o", so}
	for _, o := range cudaTestObjects {
		link = append(link, filepath.Join(build, o))
	}
	out, err := exec.Command("c++", link...).CombinedOutput()
	require.NoError(t, err, "%s", out)

	require.NoError(t, lib.CheckCUDAArchs(so, []string{"90"}))
	facts, err := cudafatbin.ReadFile(so)
	require.NoError(t, err)
	assert.Equal(t, []int{90}, facts.SASS, "machine code for sm_90 only")
	assert.Empty(t, facts.PTX, "-real architectures carry no PTX")
	v := cudafatbin.Check(facts, cudafatbin.Version{Major: 9}, cudafatbin.Version{Major: 13})
	assert.True(t, v.OK, "an H200 under a CUDA 13.0 driver runs it")
	assert.Equal(t, 90, v.SASS)
	v = cudafatbin.Check(facts, cudafatbin.Version{Major: 8, Minor: 9}, cudafatbin.Version{Major: 13})
	assert.False(t, v.OK, "an L4 (8.9) does not: it was not asked for")
	require.ErrorContains(t, lib.CheckCUDAArchs(so, []string{"89", "90"}), "no machine code for sm_89")

	_, err = os.Stat(filepath.Join(build, "build.ninja"))
	require.NoError(t, err)
}
