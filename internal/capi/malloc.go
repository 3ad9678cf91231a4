package capi

import (
	"sync"

	"github.com/ebitengine/purego"
)

// glibc's mallopt parameter for the most arenas (M_ARENA_MAX).
const mArenaMax = -8

var (
	mallocOnce sync.Once
	mallopt    func(param, value int32) int32
	mallocTrim func(pad uintptr) int32
)

// mallocFuncs finds the C library's malloc tuning calls, glibc's; the
// others have none (or mallopt as a stub that refuses).
func mallocFuncs() {
	mallocOnce.Do(func() {
		if _, p, err := libcSym("mallopt"); err == nil {
			purego.RegisterFunc(&mallopt, p)
		}
		if _, p, err := libcSym("malloc_trim"); err == nil {
			purego.RegisterFunc(&mallocTrim, p)
		}
	})
}

// SetMallocArenas caps the C heap's arenas at n (glibc's M_ARENA_MAX),
// reporting whether the C library took it.
func SetMallocArenas(n int) bool {
	mallocFuncs()
	if mallopt == nil || n < 1 || n > 1<<20 {
		return false
	}
	return mallopt(mArenaMax, int32(n)) == 1
}

// MallocTrim returns the free pages of every arena of the C heap to the
// system (glibc's malloc_trim(0)), reporting whether the C library has
// the call.
func MallocTrim() bool {
	mallocFuncs()
	if mallocTrim == nil {
		return false
	}
	mallocTrim(0)
	return true
}
