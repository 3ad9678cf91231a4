package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/x/llama/hub"
	ihub "github.com/x/llama/internal/hub"
)

// urlCacheDir is where --model-url and --mmproj-url files go when -m or
// -mm does not name the file: $LLAMA_CACHE, else llama.cpp under the
// user's cache folder, as llama-server.
func urlCacheDir(getenv func(string) string) (string, error) {
	if d := getenv("LLAMA_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "llama.cpp"), nil
}

// pullDocker pulls the GGUF of an OCI model image (-dr/--docker-repo) into
// the cache folder, as llama-server does, through the hub's download
// (resumed, checked against the layer's digest, with a progress bar on
// progress); a file already there is used as is, --offline never
// downloads.
func pullDocker(ctx context.Context, ref string, offline bool, getenv func(string) string, progress io.Writer) (string, error) {
	dir, err := urlCacheDir(getenv)
	if err != nil {
		return "", err
	}
	bar := hub.ProgressBar(progress)
	return ihub.PullOCI(ctx, ref, ihub.OCIOptions{Dir: dir, Offline: offline,
		Progress: func(p ihub.Progress) { bar(hub.Progress(p)) }})
}

// splitPart matches the name of the first part of a split GGUF.
var splitPart = regexp.MustCompile(`-00001-of-(\d{5})\.gguf$`)

// urlParts lists the URLs of a model: the URL, or every part when it names
// the first part of a split model (name-00001-of-0000N.gguf).
func urlParts(u string) []string {
	m := splitPart.FindStringSubmatchIndex(u)
	if m == nil {
		return []string{u}
	}
	n, _ := strconv.Atoi(u[m[2]:m[3]])
	parts := []string{u}
	for i := 2; i <= n; i++ {
		parts = append(parts, fmt.Sprintf("%s-%05d-of-%s.gguf", u[:m[0]], i, u[m[2]:m[3]]))
	}
	return parts
}

// fetchURL makes the file at rawURL local and returns its path: the URL's
// file name in the cache folder, or dst when it is not empty (for a split
// model, every part under its own name in dst's folder). A file already
// there is used as is (llama-server also checks the server's ETag for a
// newer one); --offline never downloads.
func fetchURL(ctx context.Context, rawURL, dst string, offline bool, getenv func(string) string, progress io.Writer) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", rawURL)
	}
	if u.Path == "" || u.Path[len(u.Path)-1] == '/' {
		return "", fmt.Errorf("%q does not name a file", rawURL)
	}
	parts := urlParts(u.Scheme + "://" + u.Host + u.EscapedPath())
	dir := filepath.Dir(dst)
	if dst == "" {
		if dir, err = urlCacheDir(getenv); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bar := hub.ProgressBar(progress)
	var first string
	for i, p := range parts {
		name := path.Base(p)
		if unescaped, err := url.PathUnescape(name); err == nil {
			name = unescaped
		}
		if name == "" || name == "." || name == "/" || name == ".." {
			return "", fmt.Errorf("%q does not name a file", rawURL)
		}
		local := filepath.Join(dir, filepath.Base(name))
		if i == 0 && dst != "" && len(parts) == 1 {
			local = dst
		}
		if i == 0 {
			first = local
		}
		if st, err := os.Stat(local); err == nil && st.Mode().IsRegular() {
			continue
		}
		if offline {
			return "", fmt.Errorf("%s is not downloaded and --offline is set", local)
		}
		get := p
		if i == 0 && u.RawQuery != "" {
			get += "?" + u.RawQuery
		}
		if err := download(ctx, get, local, name, bar); err != nil {
			return "", err
		}
	}
	return first, nil
}

// download writes the body of url to local, through a temporary file
// renamed at the end.
func download(ctx context.Context, rawURL, local, name string, bar func(hub.Progress)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading %s: %s", rawURL, resp.Status)
	}
	tmp := local + ".downloadInProgress"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	pw := &progressWriter{w: f, p: hub.Progress{File: name, Total: max(resp.ContentLength, 0)}, bar: bar}
	_, err = io.Copy(pw, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && resp.ContentLength > 0 && pw.p.Downloaded != resp.ContentLength {
		err = errors.New("the download ended early")
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("downloading %s: %w", rawURL, err)
	}
	pw.p.Done = true
	bar(pw.p)
	return os.Rename(tmp, local)
}

type progressWriter struct {
	w   io.Writer
	p   hub.Progress
	bar func(hub.Progress)
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.p.Downloaded += int64(n)
	pw.bar(pw.p)
	return n, err
}
