package lib

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Source selects where Install fetches the pinned build from.
type Source string

// Sources of the pinned build.
const (
	// SourceAuto uses the npm package where one exists for the platform and
	// flavor, and llama.cpp's GitHub release archive otherwise.
	SourceAuto Source = ""
	// SourceNPM uses the node-llama-cpp npm package, through the npm client.
	SourceNPM Source = "npm"
	// SourceGitHub uses llama.cpp's own GitHub release archive.
	SourceGitHub Source = "github"
)

// DefaultBaseURL is the folder of llama.cpp's GitHub release downloads: an
// archive of the pinned release is at DefaultBaseURL/Version/name.
const DefaultBaseURL = "https://github.com/ggml-org/llama.cpp/releases/download"

// archives maps GOOS/GOARCH[/flavor] to the GitHub release archives of the
// pinned build, the one holding libllama first. The names and layouts follow
// the release workflow of the pinned source (.github/workflows/release.yml):
// Linux and macOS builds are gzipped tars holding a llama-<tag>/ folder,
// Windows builds are flat zips, and a Windows CUDA build needs the CUDA
// runtime zip next to it. CUDA 12.4 is picked for Windows x64 over 13.x as
// it runs on older drivers. llama.cpp publishes no CUDA build for Linux.
var archives = map[string][]string{
	"linux/amd64":          {"llama-" + Version + "-bin-ubuntu-x64.tar.gz"},
	"linux/arm64":          {"llama-" + Version + "-bin-ubuntu-arm64.tar.gz"},
	"linux/s390x":          {"llama-" + Version + "-bin-ubuntu-s390x.tar.gz"},
	"linux/amd64/vulkan":   {"llama-" + Version + "-bin-ubuntu-vulkan-x64.tar.gz"},
	"linux/arm64/vulkan":   {"llama-" + Version + "-bin-ubuntu-vulkan-arm64.tar.gz"},
	"darwin/arm64":         {"llama-" + Version + "-bin-macos-arm64.tar.gz"},
	"darwin/amd64":         {"llama-" + Version + "-bin-macos-x64.tar.gz"},
	"windows/amd64":        {"llama-" + Version + "-bin-win-cpu-x64.zip"},
	"windows/arm64":        {"llama-" + Version + "-bin-win-cpu-arm64.zip"},
	"windows/amd64/vulkan": {"llama-" + Version + "-bin-win-vulkan-x64.zip"},
	"windows/amd64/cuda": {"llama-" + Version + "-bin-win-cuda-12.4-x64.zip",
		"cudart-llama-bin-win-cuda-12.4-x64.zip"},
	"windows/arm64/cuda": {"llama-" + Version + "-bin-win-cuda-13.4-arm64.zip",
		"cudart-llama-bin-win-cuda-13.4-arm64.zip"},
}

func platformKey(goos, goarch string, f Flavor) string {
	key := goos + "/" + goarch
	if f != CPU {
		key += "/" + string(f)
	}
	return key
}

// ArchivesFor returns the names of the GitHub release archives that together
// hold the pinned build for a platform and flavor, the one holding libllama
// first.
func ArchivesFor(goos, goarch string, f Flavor) ([]string, error) {
	a, ok := archives[platformKey(goos, goarch, f)]
	if !ok {
		return nil, fmt.Errorf("lib: llama.cpp %s publishes no %s for %s/%s", Version, flavorName(f), goos, goarch)
	}
	return append([]string(nil), a...), nil
}

// ResolveSource returns the source Install uses for s on a platform and
// flavor: SourceAuto becomes SourceNPM where an npm package exists and
// SourceGitHub where only a release archive does. It is an error when the
// chosen source has no build for the platform and flavor.
func ResolveSource(s Source, goos, goarch string, f Flavor) (Source, error) {
	switch s {
	case SourceAuto:
		if _, err := PackageFor(goos, goarch, f); err == nil {
			return SourceNPM, nil
		}
		if _, err := ArchivesFor(goos, goarch, f); err == nil {
			return SourceGitHub, nil
		}
		return "", fmt.Errorf("lib: no prebuilt llama.cpp %s for %s/%s, neither on npm nor on GitHub",
			flavorName(f), goos, goarch)
	case SourceNPM:
		if _, err := PackageFor(goos, goarch, f); err != nil {
			return "", err
		}
	case SourceGitHub:
		if _, err := ArchivesFor(goos, goarch, f); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("lib: unknown source %q (want %q, %q or empty)", s, SourceNPM, SourceGitHub)
	}
	return s, nil
}

// limits bounds what an install downloads and unpacks (variables so that
// tests can lower them).
var limits = struct {
	download int64 // bytes of one archive
	file     int64 // bytes of one library
	total    int64 // bytes of all libraries of an install
}{download: 4 << 30, file: 2 << 30, total: 8 << 30}

// fetchGitHub downloads the release archives into temporary files next to
// dst and unpacks their shared libraries into dst, returning how many files
// it wrote. No SHA-256 is pinned for these archives (llama.cpp publishes
// none we could pin, and they could not be fetched where this was written,
// which reaches package registries only): their integrity rests on HTTPS
// and on the archives' own checks (zip's central directory and CRC-32s,
// gzip's CRC-32), and the caller requires the libraries to be there.
func fetchGitHub(ctx context.Context, baseURL string, names []string, dst string, w io.Writer) (int, error) {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	x := &extractor{dst: dst, seen: map[string]bool{}, links: map[string]string{}}
	for _, name := range names {
		url := strings.TrimSuffix(baseURL, "/") + "/" + Version + "/" + name
		if err := fetchArchive(ctx, url, name, filepath.Dir(dst), x, w); err != nil {
			return x.n, err
		}
	}
	if err := x.link(); err != nil {
		return x.n, fmt.Errorf("lib: %w", err)
	}
	return x.n, nil
}

func fetchArchive(ctx context.Context, url, name, tmpDir string, x *extractor, w io.Writer) error {
	f, err := os.CreateTemp(tmpDir, ".download-*")
	if err != nil {
		return fmt.Errorf("lib: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	progress(w, "llama: downloading %s", url)
	size, err := fetchTo(ctx, url, f, w, limits.download)
	if err != nil {
		return fmt.Errorf("lib: downloading %s: %w", url, err)
	}
	if err := x.archive(f, size); err != nil {
		return fmt.Errorf("lib: unpacking %s: %w", name, err)
	}
	return nil
}

// extractor unpacks the shared libraries of archives flat into one folder.
type extractor struct {
	dst   string
	seen  map[string]bool   // names written, files and links
	links map[string]string // symbolic links: name to target name
	total int64
	n     int
}

// archive unpacks a zip or a gzipped tar, told apart by their first bytes.
func (x *extractor) archive(f *os.File, size int64) error {
	magic := make([]byte, 4)
	if _, err := f.ReadAt(magic, 0); err != nil {
		return errors.New("not a zip or gzipped tar archive")
	}
	switch {
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")), bytes.HasPrefix(magic, []byte("PK\x05\x06")):
		return x.zip(f, size)
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		return x.tgz(io.NewSectionReader(f, 0, size))
	}
	return errors.New("not a zip or gzipped tar archive")
}

func (x *extractor) zip(r io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return err
	}
	for _, f := range zr.File {
		name, err := x.entryName(f.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue
		}
		mode := f.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			rc, err := f.Open()
			if err != nil {
				return err
			}
			target, err := io.ReadAll(io.LimitReader(rc, 4096))
			rc.Close()
			if err != nil {
				return err
			}
			if err := x.symlink(name, string(target)); err != nil {
				return err
			}
		case mode.IsRegular():
			if f.UncompressedSize64 > uint64(limits.file) {
				return fmt.Errorf("%s is larger than %d bytes", f.Name, limits.file)
			}
			rc, err := f.Open()
			if err != nil {
				return err
			}
			err = x.file(name, rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
		}
	}
	return nil
}

func (x *extractor) tgz(r io.Reader) error {
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name, err := x.entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			if err := x.symlink(name, h.Linkname); err != nil {
				return err
			}
		case tar.TypeReg:
			if h.Size > limits.file {
				return fmt.Errorf("%s is larger than %d bytes", h.Name, limits.file)
			}
			if err := x.file(name, tr); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
		}
	}
	// Read to the end of the gzip stream so that its checksum is verified.
	_, err = io.Copy(io.Discard, zr)
	return err
}

// entryName checks an archive entry's name and returns the file name the
// entry is unpacked under, or "" when it is not a shared library. A name
// that would escape the archive's folder fails the whole archive.
func (x *extractor) entryName(name string) (string, error) {
	n := strings.ReplaceAll(name, `\`, "/")
	clean := path.Clean(n)
	if path.IsAbs(n) || clean == ".." || strings.HasPrefix(clean, "../") || filepath.VolumeName(n) != "" ||
		(len(n) > 1 && n[1] == ':') {
		return "", fmt.Errorf("unsafe path %q in archive", name)
	}
	if strings.HasSuffix(n, "/") {
		return "", nil
	}
	base := path.Base(clean)
	if !isSharedLibrary(base) {
		return "", nil
	}
	if x.seen[base] {
		return "", fmt.Errorf("two libraries named %s in the archives", base)
	}
	return base, nil
}

// isSharedLibrary reports whether a file name is a shared library's.
func isSharedLibrary(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasSuffix(lower, ".so") || strings.Contains(lower, ".so.") ||
		strings.HasSuffix(lower, ".dylib") || strings.HasSuffix(lower, ".dll")
}

func (x *extractor) file(name string, r io.Reader) error {
	f, err := os.OpenFile(filepath.Join(x.dst, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, limits.file+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > limits.file {
		return fmt.Errorf("larger than %d bytes", limits.file)
	}
	if x.total += n; x.total > limits.total {
		return fmt.Errorf("the libraries exceed %d bytes", limits.total)
	}
	x.seen[name] = true
	x.n++
	return nil
}

// symlink records a link between libraries of one folder (libllama.so ->
// libllama.so.0); links are made once every file is unpacked.
func (x *extractor) symlink(name, target string) error {
	if target == "" || strings.ContainsAny(target, `/\:`) || target == "." || target == ".." {
		return fmt.Errorf("link %s points outside its folder (%q)", name, target)
	}
	x.seen[name] = true
	x.links[name] = target
	return nil
}

// link makes the recorded links, as copies where the system refuses links.
func (x *extractor) link() error {
	for name, target := range x.links {
		// Follow the chain to a file, refusing loops and dangling links.
		file := target
		for hops := 0; ; hops++ {
			if !x.seen[file] || hops > len(x.links) {
				return fmt.Errorf("link %s -> %s does not lead to a library of the archive", name, target)
			}
			next, ok := x.links[file]
			if !ok {
				break
			}
			file = next
		}
		p := filepath.Join(x.dst, name)
		if err := os.Symlink(target, p); err != nil {
			if err := copyFile(filepath.Join(x.dst, file), p); err != nil {
				return err
			}
		}
		x.n++
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
