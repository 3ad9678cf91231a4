package cudadrv

import (
	"bytes"
	"fmt"

	"github.com/ebitengine/purego"
)

// CUdevice_attribute values.
const (
	attrCCMajor = 75
	attrCCMinor = 76
)

type api struct {
	init      func(flags uint32) int32
	version   func(v *int32) int32
	count     func(n *int32) int32
	get       func(dev *int32, ordinal int32) int32
	attribute func(v *int32, attr int32, dev int32) int32
	name      func(buf *byte, n int32, dev int32) int32
}

func load() (*api, error) {
	// The library stays loaded: ggml's CUDA backend holds it anyway, and
	// unloading libcuda is not safe.
	h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	var a api
	for _, s := range []struct {
		fn   any
		name string
	}{
		{&a.init, "cuInit"}, {&a.version, "cuDriverGetVersion"}, {&a.count, "cuDeviceGetCount"},
		{&a.get, "cuDeviceGet"}, {&a.attribute, "cuDeviceGetAttribute"}, {&a.name, "cuDeviceGetName"},
	} {
		p, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("libcuda.so.1 lacks %s: %v", s.name, err)
		}
		purego.RegisterFunc(s.fn, p)
	}
	return &a, nil
}

func query() (Info, error) {
	a, err := load()
	if err != nil {
		return Info{}, err
	}
	var info Info
	var v int32
	if r := a.version(&v); r != 0 {
		return Info{}, cuError{"cuDriverGetVersion", r}
	}
	info.Version = int(v)
	if r := a.init(0); r != 0 {
		return info, cuError{"cuInit", r}
	}
	var n int32
	if r := a.count(&n); r != 0 {
		return info, cuError{"cuDeviceGetCount", r}
	}
	for i := range min(max(n, 0), maxDevices) {
		var dev, major, minor int32
		if r := a.get(&dev, i); r != 0 {
			return info, cuError{"cuDeviceGet", r}
		}
		if r := a.attribute(&major, attrCCMajor, dev); r != 0 {
			return info, cuError{"cuDeviceGetAttribute", r}
		}
		if r := a.attribute(&minor, attrCCMinor, dev); r != 0 {
			return info, cuError{"cuDeviceGetAttribute", r}
		}
		var buf [256]byte
		name := ""
		if a.name(&buf[0], int32(len(buf)), dev) == 0 {
			if i := bytes.IndexByte(buf[:], 0); i >= 0 {
				name = string(buf[:i])
			}
		}
		info.Devices = append(info.Devices, Device{Ordinal: int(i), Name: name, Major: int(major), Minor: int(minor)})
	}
	return info, nil
}
