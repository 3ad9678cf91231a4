package cudafatbin

// minDriver maps a PTX ISA version to the first CUDA release whose
// driver can JIT it, from the "PTX ISA release history" table of
// NVIDIA's PTX ISA manual (parallel-thread-execution, Release Notes).
// A driver loads PTX of its own CUDA version's ISA or older.
var minDriver = map[Version]Version{
	{6, 0}: {9, 0}, {6, 1}: {9, 1}, {6, 2}: {9, 2}, {6, 3}: {10, 0}, {6, 4}: {10, 1}, {6, 5}: {10, 2},
	{7, 0}: {11, 0}, {7, 1}: {11, 1}, {7, 2}: {11, 2}, {7, 3}: {11, 3}, {7, 4}: {11, 4},
	{7, 5}: {11, 5}, {7, 6}: {11, 6}, {7, 7}: {11, 7}, {7, 8}: {11, 8},
	{8, 0}: {12, 0}, {8, 1}: {12, 1}, {8, 2}: {12, 2}, {8, 3}: {12, 3}, {8, 4}: {12, 4},
	{8, 5}: {12, 5}, {8, 6}: {12, 7}, {8, 7}: {12, 8}, {8, 8}: {12, 9},
	{9, 0}: {13, 0}, {9, 1}: {13, 1},
}

// MinDriver returns the oldest CUDA driver version that can JIT PTX of
// ISA version isa. An ISA newer than the table follows the rule of its
// recent releases (ISA 9.N came with CUDA 13.N): major + 4, same minor.
// One older than the table (before CUDA 9) needs nothing a CUDA 13
// runtime's driver lacks: it maps to 9.0.
func MinDriver(isa Version) Version {
	if v, ok := minDriver[isa]; ok {
		return v
	}
	if isa.Less(Version{6, 0}) {
		return Version{9, 0}
	}
	return Version{isa.Major + 4, isa.Minor}
}

// Verdict is Check's answer for one device.
type Verdict struct {
	// OK: the device can run the library.
	OK bool
	// SASS is the architecture of the machine code the device runs (0:
	// none fits), PTX the one of the PTX its driver compiles (0: none, or
	// SASS fits).
	SASS, PTX int
	// NeedDriver, when the device is refused, is the oldest driver that
	// could JIT the library's PTX for it (zero: no PTX fits the device at
	// all, whatever the driver).
	NeedDriver Version
	// ISA is the PTX ISA version of the PTX NeedDriver is about.
	ISA Version
}

// Check decides whether a device of compute capability cc (major.minor)
// can run a library of facts f under a CUDA driver of version driver:
//   - machine code runs on the devices of the same major capability and
//     a minor one at least its own (sm_86 runs on 8.6 and 8.9, not 9.0);
//   - otherwise the driver compiles PTX of a virtual architecture at most
//     the device's (compute_80 for 9.0), when its ISA version is one the
//     driver knows (MinDriver).
//
// Check is pure: it reads neither the device nor the driver.
func Check(f Facts, cc Version, driver Version) Verdict {
	dev := cc.Major*10 + cc.Minor
	var v Verdict
	for _, a := range f.SASS {
		if a/10 == cc.Major && a%10 <= cc.Minor && a <= dev {
			v.SASS = max(v.SASS, a)
		}
	}
	if v.SASS != 0 {
		v.OK = true
		return v
	}
	best := 0 // the newest PTX the driver compiles for the device
	for _, p := range f.PTX {
		if p.Arch > dev {
			continue
		}
		need := MinDriver(p.ISA)
		if !driver.Less(need) {
			best = max(best, p.Arch)
			continue
		}
		if v.NeedDriver == (Version{}) || need.Less(v.NeedDriver) || need == v.NeedDriver && p.Arch > v.PTX {
			v.NeedDriver, v.ISA, v.PTX = need, p.ISA, p.Arch
		}
	}
	if best != 0 {
		return Verdict{OK: true, PTX: best}
	}
	return v
}
