package llama

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/cudadrv"
	"github.com/x/llama/internal/cudafatbin"
	"github.com/x/llama/lib"
)

// DeviceCheck is a device with the verdict of CheckDevices on it.
type DeviceCheck struct {
	Device
	// Err is nil when the installed build can run on the device;
	// otherwise an *Error of code CodeUnsupported that says what is
	// missing and the ways out.
	Err error
	// How says how the build runs there ("sm_89 machine code"), or why
	// the device was not checked; "" for devices with nothing to check.
	How string
}

// CheckDevices lists Devices, each with whether the installed build can
// run on it, without running anything there.
//
// Only CUDA devices are checked: ggml's CUDA backend lists and loads onto
// a GPU it has no code for, and aborts the process on the first kernel it
// launches there. A CUDA device of compute capability X.Y runs the build
// when libggml-cuda has machine code (SASS) for X.y with y <= Y, or PTX
// for an architecture at most X.Y whose PTX ISA version the driver can
// compile (ISA 9.1 needs a CUDA 13.1 driver). The facts come from
// libggml-cuda's fat binaries and from libcuda (driver version, compute
// capability); when either cannot be read the device is not refused, and
// How says why it was not checked.
//
// LoadModel applies the verdicts: a refused device named in
// ModelOptions.Devices fails the load with its error; otherwise the model
// loads on the devices left (the CPU when none is), with a warning
// through SetLogger's logger.
func CheckDevices() ([]DeviceCheck, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	if !hasCUDA(devs) {
		return judgeDevices(devs, cudaEnv{}), nil
	}
	return judgeDevices(devs, readCUDAEnv()), nil
}

func hasCUDA(devs []Device) bool {
	for _, d := range devs {
		if _, ok := cudaOrdinal(d.Name); ok {
			return true
		}
	}
	return false
}

// cudaOrdinal reads ggml's CUDA device name (CUDA0, CUDA1...).
func cudaOrdinal(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "CUDA")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

// cudaEnv are the facts of the CUDA checks: the library's and the
// driver's, each with the reason it could not be read.
type cudaEnv struct {
	facts    cudafatbin.Facts
	factsErr error
	driver   cudadrv.Info
	driverOK bool // driver.Version was read
	devErr   error
}

func readCUDAEnv() cudaEnv {
	var env cudaEnv
	dir, _ := capi.Loaded()
	path := ""
	for _, p := range lib.GPUBackendFiles(dir) {
		if strings.Contains(filepath.Base(p), "cuda") {
			path = p
		}
	}
	if path == "" {
		env.factsErr = fmt.Errorf("no CUDA backend library in %s", dir)
	} else if f, err := cudafatbin.ReadFile(path); err != nil {
		env.factsErr = fmt.Errorf("%s: %w", filepath.Base(path), err)
	} else {
		env.facts = f
	}
	info, err := cudadrv.Query()
	env.driver, env.driverOK, env.devErr = info, info.Version > 0, err
	return env
}

// judgeDevices gives each device its verdict from env (pure: it reads
// neither the devices nor the driver).
func judgeDevices(devs []Device, env cudaEnv) []DeviceCheck {
	out := make([]DeviceCheck, 0, len(devs))
	for _, d := range devs {
		c := DeviceCheck{Device: d}
		if n, ok := cudaOrdinal(d.Name); ok {
			c.How, c.Err = judgeCUDA(d, n, env)
		}
		out = append(out, c)
	}
	return out
}

func judgeCUDA(d Device, ordinal int, env cudaEnv) (string, error) {
	if env.factsErr != nil {
		return "not checked: " + env.factsErr.Error(), nil
	}
	var dev *cudadrv.Device
	for i := range env.driver.Devices {
		if env.driver.Devices[i].Ordinal == ordinal {
			dev = &env.driver.Devices[i]
		}
	}
	if !env.driverOK || dev == nil {
		why := "the CUDA driver does not list it"
		if env.devErr != nil {
			why = env.devErr.Error()
		}
		return "not checked: " + why, nil
	}
	cc := cudafatbin.Version{Major: dev.Major, Minor: dev.Minor}
	drv := cudafatbin.DriverVersion(env.driver.Version)
	v := cudafatbin.Check(env.facts, cc, drv)
	switch {
	case v.OK && v.SASS != 0:
		return fmt.Sprintf("compute capability %v, runs the sm_%d machine code", cc, v.SASS), nil
	case v.OK:
		return fmt.Sprintf("compute capability %v, runs the compute_%d PTX, which the CUDA %v driver compiles on first use", cc, v.PTX, drv), nil
	}
	arch := strconv.Itoa(dev.Major*10 + dev.Minor)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, compute capability %v) cannot run this CUDA build: it has machine code for %s",
		d.Name, d.Description, cc, archList("sm_", env.facts.SASS, "no architecture"))
	var ways []string
	if v.NeedDriver != (cudafatbin.Version{}) {
		fmt.Fprintf(&b, " but not sm_%s, and its PTX for compute_%d is ISA %v, which needs a CUDA driver >= %v (this one is %v)",
			arch, v.PTX, v.ISA, v.NeedDriver, drv)
		ways = append(ways, fmt.Sprintf("update the NVIDIA driver to one of CUDA %v or later", v.NeedDriver))
	} else {
		var ptx []int
		for _, p := range env.facts.PTX {
			ptx = append(ptx, p.Arch)
		}
		fmt.Fprintf(&b, " and PTX for %s: none runs on %v", archList("compute_", ptx, "no architecture"), cc)
	}
	ways = append(ways, "install the Vulkan build (llama-install -flavor vulkan)")
	build := "build for sm_" + arch + " with llama-install -flavor cuda -build -cuda-arch " + arch
	if dev.Major*10+dev.Minor < 75 {
		build += " (with a CUDA toolkit that still supports it: CUDA 13 starts at 7.5)"
	}
	ways = append(ways, build)
	b.WriteString("; to use it, " + strings.Join(ways, ", or "))
	return "", errorf(CodeUnsupported, "check device", "%s", b.String())
}

func archList(prefix string, archs []int, none string) string {
	if len(archs) == 0 {
		return none
	}
	s := make([]string, len(archs))
	for i, a := range archs {
		s[i] = prefix + strconv.Itoa(a)
	}
	return strings.Join(s, ", ")
}

// pickDevices applies the verdicts to a load naming the devices named
// (ModelOptions.Devices; none: llama.cpp's default choice). It returns
// the devices to pass instead of the default (pin: pass use, even empty,
// which keeps the model on the CPU), the refusals to warn about, or the
// refusal of a named device.
func pickDevices(named []string, checks []DeviceCheck) (use []string, pin bool, warns []error, err error) {
	if len(named) > 0 {
		for _, n := range named {
			for _, c := range checks {
				if c.Name == n && c.Err != nil {
					return nil, false, nil, c.Err
				}
			}
		}
		return named, true, nil, nil
	}
	var gpus, igpus []string
	for _, c := range checks {
		switch {
		case c.Err != nil:
			warns = append(warns, c.Err)
		case c.Type == "gpu":
			gpus = append(gpus, c.Name)
		case c.Type == "igpu":
			igpus = append(igpus, c.Name)
		}
	}
	if len(warns) == 0 {
		return nil, false, nil, nil
	}
	// llama.cpp's default without the refused: the GPUs, or the
	// integrated ones when there is none.
	if len(gpus) == 0 {
		gpus = igpus
	}
	return gpus, true, warns, nil
}

// modelDevices checks the devices for a model load (see CheckDevices).
func modelDevices(named []string) (use []string, pin bool, err error) {
	devs, err := Devices()
	if err != nil {
		return nil, false, err
	}
	if !hasCUDA(devs) {
		return named, len(named) > 0, nil
	}
	checks := judgeDevices(devs, readCUDAEnv())
	use, pin, warns, err := pickDevices(named, checks)
	if err != nil {
		return nil, false, err
	}
	if l := logger.Load(); l != nil && len(warns) > 0 {
		on := "the CPU"
		if len(use) > 0 {
			on = strings.Join(use, ", ")
		}
		for _, w := range warns {
			l.Log(context.Background(), slog.LevelWarn, "skipping a device this build cannot run on; the model loads on "+on,
				"source", "llama", "err", w)
		}
	}
	return use, pin, nil
}

// refusedBufferType returns the refusal of the device whose buffer type
// (CUDA0, CUDA0_Split...) a tensor override names, if refused.
func refusedBufferType(ovs []TensorBufferOverride) error {
	if len(ovs) == 0 {
		return nil
	}
	checks, err := CheckDevices()
	if err != nil {
		return err
	}
	for _, o := range ovs {
		for _, c := range checks {
			if c.Err != nil && (o.BufferType == c.Name || strings.HasPrefix(o.BufferType, c.Name+"_")) {
				return c.Err
			}
		}
	}
	return nil
}
