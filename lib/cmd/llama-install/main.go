// Command llama-install installs the pinned llama.cpp build into the cache
// folder (or -dir) and prints the folder. It is what CI and first-time
// setups run; the SDK also installs on first use.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/x/llama/lib"
)

func main() {
	dir := flag.String("dir", "", "folder to install into (default: the cache folder)")
	flavor := flag.String("flavor", "", "build flavor: empty for CPU, cuda or vulkan")
	flag.Parse()
	d, err := lib.Install(context.Background(), lib.InstallOptions{Dir: *dir, Flavor: lib.Flavor(*flavor), Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(d)
}
