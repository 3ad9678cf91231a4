// Package cudadrv asks the CUDA driver (libcuda, through purego: no cgo)
// for its version and the compute capability of each device, which is
// what deciding whether a CUDA build can run needs. It starts no context
// on any device and runs nothing there.
package cudadrv

import (
	"errors"
	"fmt"
)

// ErrNoDriver reports a machine without the CUDA driver library.
var ErrNoDriver = errors.New("no CUDA driver (libcuda.so.1 cannot be loaded)")

// maxDevices bounds the devices read.
const maxDevices = 64

// Device is a CUDA device, by the ordinal the CUDA runtime (and ggml's
// CUDA0, CUDA1...) gives it: both follow CUDA_VISIBLE_DEVICES.
type Device struct {
	Ordinal      int
	Name         string
	Major, Minor int // compute capability
}

// Info is what the driver says.
type Info struct {
	// Version is cuDriverGetVersion's number: 1000*major + 10*minor
	// (13000 for CUDA 13.0).
	Version int
	Devices []Device
}

// Query loads libcuda (ErrNoDriver when it cannot, with the loader's
// reason), initialises it and reads the driver version and the devices.
func Query() (Info, error) { return query() }

// cuError is a CUresult other than CUDA_SUCCESS.
type cuError struct {
	fn   string
	code int32
}

func (e cuError) Error() string {
	name := map[int32]string{100: "no device", 35: "driver older than the runtime", 999: "unknown",
		3: "not initialized", 101: "invalid device", 304: "OS call failed", 46: "devices unavailable"}[e.code]
	if name == "" {
		name = "error"
	}
	return fmt.Sprintf("%s: CUDA error %d (%s)", e.fn, e.code, name)
}
