//go:build !linux

package cudadrv

// query: only Linux is read (the CUDA builds installed are Linux's; on
// Windows the driver is nvcuda.dll, not read here).
func query() (Info, error) { return Info{}, ErrNoDriver }
