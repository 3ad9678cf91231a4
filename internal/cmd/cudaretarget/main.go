// Command cudaretarget rewrites, in a CUDA library's fat binaries, the
// architecture that each machine-code entry of one GPU architecture is
// marked for, so that a GPU of that architecture finds no code it can
// run in the library, as with a build made for other GPUs:
//
//	cudaretarget -from 90 -to 86 DIR/libggml-cuda.so
//
// .ci/gpu-run uses it on a copy of the sm_90 build, on an H200, to check
// what the device check promises: such a build is refused and the model
// runs on the CPU, where llama-server on the same copy aborts at its
// first kernel. The machine code itself is not changed: this is no way to
// port a build to another GPU.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/x/llama/internal/cudafatbin"
)

func main() {
	from := flag.Int("from", 90, "the architecture whose machine code is re-marked (90: sm_90)")
	to := flag.Int("to", 86, "the architecture it is marked for instead")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: cudaretarget [-from 90] [-to 86] LIBRARY")
		os.Exit(2)
	}
	n, err := cudafatbin.Retarget(flag.Arg(0), *from, *to)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cudaretarget:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d entries of sm_%d machine code now marked sm_%d\n", flag.Arg(0), n, *from, *to)
}
