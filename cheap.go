package llama

import (
	"os"
	"strings"

	"github.com/x/llama/internal/capi"
)

// The C heap.
//
// Go runs the library's calls on whichever thread is free, and glibc's
// malloc gives each thread that allocates an arena of its own, up to
// eight per core, each keeping what was freed in it for that arena's
// reuse. llama.cpp allocates and frees tens of MB while it samples under
// a grammar (a vector for each of a large vocabulary's tokens), so a
// server's memory grew by an arena's worth for each thread its loop had
// run on. So when the package is initialized it caps the process's arenas
// at defaultMallocArenas, unless the environment sets the cap
// (MALLOC_ARENA_MAX, or glibc.malloc.arena_max in GLIBC_TUNABLES), which
// glibc then applies itself from the start. glibc lets the first threads
// make arenas before it applies a cap, so those the Go runtime's first
// threads made before this init stay (a few); no thread makes another
// after it. C libraries other than glibc have no arenas, and nothing is
// done there.

// defaultMallocArenas is the cap on glibc's malloc arenas (M_ARENA_MAX)
// set at initialization.
const defaultMallocArenas = 2

func init() {
	if mallocArenas(os.Getenv) > 0 {
		capi.SetMallocArenas(defaultMallocArenas)
	}
}

// mallocArenas returns the cap to set, 0 where the environment sets one.
func mallocArenas(getenv func(string) string) int {
	if getenv("MALLOC_ARENA_MAX") != "" || strings.Contains(getenv("GLIBC_TUNABLES"), "glibc.malloc.arena_max") {
		return 0
	}
	return defaultMallocArenas
}

// TrimMemory returns the free memory of the C heap to the system (glibc's
// malloc_trim): what llama.cpp frees stays in the process's malloc arenas
// for reuse, counted in its resident size, until then. It takes
// milliseconds, growing with the memory held, during which other threads'
// C allocations wait, so call it when idle; an engine does after a busy
// period (engine.Options.TrimIdle). It reports false where the C library
// has no such call (not glibc). The Go heap is the Go runtime's to
// return (runtime/debug.FreeOSMemory).
func TrimMemory() bool { return capi.MallocTrim() }
