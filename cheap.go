package llama

import (
	"os"
	"strings"

	"github.com/x/llama/internal/capi"
)

// The C heap: see the package documentation's section of that name.

// defaultMallocArenas is the cap on glibc's malloc arenas (M_ARENA_MAX)
// set at initialization.
const defaultMallocArenas = 2

// init caps the arenas now, on the main thread and before any call into
// llama.cpp: glibc lets the first threads make arenas before it applies a
// cap, so those the Go runtime's first threads made stay (a few), but no
// thread makes another after it. From Init it would come too late.
func init() {
	if !envCapsArenas(os.Getenv) {
		capi.SetMallocArenas(defaultMallocArenas)
	}
}

// envCapsArenas reports whether the environment sets glibc's arena cap,
// which glibc then applies itself from the start.
func envCapsArenas(getenv func(string) string) bool {
	return getenv("MALLOC_ARENA_MAX") != "" || strings.Contains(getenv("GLIBC_TUNABLES"), "glibc.malloc.arena_max")
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
