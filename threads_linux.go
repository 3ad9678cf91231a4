package llama

import (
	"syscall"
	"unsafe"
)

// Linux's scheduling policies (sched.h).
const (
	schedOther = 0
	schedFIFO  = 1
	schedBatch = 3
)

// getSchedule returns the calling thread's policy, priority and CPUs.
func getSchedule() (schedule, error) {
	policy, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if e != 0 {
		return schedule{}, e
	}
	var prio int32
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETPARAM, 0, uintptr(unsafe.Pointer(&prio)), 0); e != 0 {
		return schedule{}, e
	}
	s := schedule{setPolicy: true, policy: int(policy), prio: int(prio), cpus: new(cpuSet)}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(*s.cpus), uintptr(unsafe.Pointer(s.cpus))); e != 0 {
		return schedule{}, e
	}
	return s, nil
}

// setSchedule applies s to the calling thread.
func setSchedule(s schedule) error {
	if s.setPolicy {
		prio := int32(s.prio)
		if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, uintptr(s.policy), uintptr(unsafe.Pointer(&prio))); e != 0 {
			return e
		}
	}
	if s.cpus != nil {
		if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(*s.cpus), uintptr(unsafe.Pointer(s.cpus))); e != 0 {
			return e
		}
	}
	return nil
}
