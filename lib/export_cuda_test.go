//go:build cudabuild

package lib

import (
	"context"
	"io"
)

// CheckCUDAArchs is checkCUDAArchs, for the cudabuild suite.
var CheckCUDAArchs = checkCUDAArchs

// ConfigureCUDA configures the CUDA build of the source in build as
// InstallCUDA does, for the architectures with nvcc, and then builds the
// ninja targets (object files) there, output to w.
func ConfigureCUDA(ctx context.Context, src, build, nvcc string, archs, targets []string, w io.Writer) error {
	cfg := cudaConfig{src: src, build: build, archs: archs, nvcc: nvcc, wheel: isWheelNVCC(nvcc)}
	if cfg.wheel {
		cfg.libcuda = findLibcuda()
		if err := cfg.makeLinkDir(); err != nil {
			return err
		}
	}
	if err := runStreaming(ctx, w, cfg.env(), "cmake", cfg.cmakeArgs()...); err != nil {
		return err
	}
	return runStreaming(ctx, w, cfg.env(), "ninja", append([]string{"-C", build, "-j", "2"}, targets...)...)
}
