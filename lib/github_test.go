package lib

// These tests serve archives built here in the layouts of llama.cpp's
// release workflow (.github/workflows/release.yml of the pinned source):
// the real release archives cannot be downloaded where this was written,
// which reaches package registries only.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entry is a file of a test archive; a non-empty link makes it a symbolic
// link to that name.
type entry struct{ name, body, link string }

func zipOf(t *testing.T, entries []entry) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		if e.link != "" {
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		} else {
			h.SetMode(0o755)
		}
		f, err := zw.CreateHeader(h)
		require.NoError(t, err)
		_, err = f.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func tgzOf(t *testing.T, entries []entry) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o755, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.link != "" {
			h = &tar.Header{Name: e.name, Mode: 0o777, Linkname: e.link, Typeflag: tar.TypeSymlink}
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// plain is the name llama.cpp's archives give library l on the running
// platform.
func plain(l string) string {
	n := libNames(runtime.GOOS, l)
	return n[len(n)-1]
}

// releaseEntries is a fake build of the running platform as llama.cpp's
// release lays it out: the libraries, a CPU backend and programs, under
// folder ("" for the flat Windows zips).
func releaseEntries(folder string) []entry {
	var es []entry
	for _, l := range []string{"llama", "ggml", "ggml-base", "ggml-cpu-haswell"} {
		es = append(es, entry{name: folder + plain(l), body: "fake " + l})
	}
	return append(es, entry{name: folder + "llama-server", body: "program"},
		entry{name: folder + "LICENSE", body: "MIT"})
}

// releaseServer serves files under /<release>/<name>; a name mapped to nil
// is a 404.
func releaseServer(t *testing.T, files map[string][]byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/"+Version+"/")
		b := files[name]
		if !ok || b == nil {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func archiveName(t *testing.T) string {
	names, err := ArchivesFor(runtime.GOOS, runtime.GOARCH, CPU)
	require.NoError(t, err)
	return names[0]
}

func TestInstallFromGitHub(t *testing.T) {
	folder := "llama-" + Version + "/"
	for _, tc := range []struct {
		name    string
		archive []byte
	}{
		{"zip", zipOf(t, releaseEntries(folder))},
		{"flat zip", zipOf(t, releaseEntries(""))},
		{"gzipped tar", tgzOf(t, releaseEntries(folder))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvDir, "")
			t.Setenv(EnvCache, t.TempDir())
			url := releaseServer(t, map[string][]byte{archiveName(t): tc.archive})
			var out bytes.Buffer
			dir, err := Install(context.Background(), InstallOptions{Source: SourceGitHub, BaseURL: url, Progress: &out, Insecure: true})
			require.NoError(t, err)

			want, err := DefaultDir(CPU)
			require.NoError(t, err)
			assert.Equal(t, want, dir)
			files, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, f := range files {
				names = append(names, f.Name())
			}
			assert.ElementsMatch(t, []string{plain("llama"), plain("ggml"), plain("ggml-base"),
				plain("ggml-cpu-haswell")}, names, "only the libraries, flat")
			b, err := os.ReadFile(filepath.Join(dir, plain("ggml-base")))
			require.NoError(t, err)
			assert.Equal(t, "fake ggml-base", string(b))

			found, err := Find("", CPU)
			require.NoError(t, err)
			assert.Equal(t, dir, found)
			p, err := LibraryPath(found, "llama")
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(dir, plain("llama")), p)

			log := out.String()
			assert.Contains(t, log, "llama: installing llama.cpp "+Version)
			assert.Contains(t, log, "llama: downloading "+url+"/"+Version+"/"+archiveName(t))
			assert.Contains(t, log, "llama: downloaded ")
			assert.Contains(t, log, "llama: installed 4 files into "+dir)

			// A second install finds the folder filled and downloads nothing.
			out.Reset()
			again, err := Install(context.Background(), InstallOptions{Source: SourceGitHub, BaseURL: "http://127.0.0.1:1", Progress: &out, Insecure: true})
			require.NoError(t, err)
			assert.Equal(t, dir, again)
			assert.Empty(t, out.String())
		})
	}
}

func TestInstallFromGitHubWindowsCUDA(t *testing.T) {
	names, err := ArchivesFor("windows", "amd64", CUDA)
	require.NoError(t, err)
	require.Len(t, names, 2, "the build and the CUDA runtime")
	url := releaseServer(t, map[string][]byte{
		names[0]: zipOf(t, []entry{{name: "llama.dll", body: "l"}, {name: "ggml.dll", body: "g"},
			{name: "ggml-base.dll", body: "b"}, {name: "ggml-cuda.dll", body: "c"}, {name: "llama-server.exe", body: "x"}}),
		names[1]: zipOf(t, []entry{{name: "cudart64_12.dll", body: "rt"}, {name: "cublas64_12.dll", body: "blas"}}),
	})
	dir := filepath.Join(t.TempDir(), "lib")
	var out bytes.Buffer
	got, err := install(context.Background(), InstallOptions{Dir: dir, Flavor: CUDA, Source: SourceGitHub, BaseURL: url, Progress: &out, Insecure: true}, "windows", "amd64")
	require.NoError(t, err)
	assert.Equal(t, dir, got)
	for _, f := range []string{"llama.dll", "ggml.dll", "ggml-base.dll", "ggml-cuda.dll", "cudart64_12.dll", "cublas64_12.dll"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	assert.NoFileExists(t, filepath.Join(dir, "llama-server.exe"))
	assert.Equal(t, 2, strings.Count(out.String(), "llama: downloading "))
}

func TestExtractKeepsLinksBetweenLibraries(t *testing.T) {
	// The Linux and macOS archives hold each library once, under its full
	// version, with links for its soname and plain name.
	folder := "llama-" + Version + "/"
	archive := tgzOf(t, []entry{
		{name: folder + "libllama.so.0.0.1", body: "llama"},
		{name: folder + "libllama.so.0", link: "libllama.so.0.0.1"},
		{name: folder + "libllama.so", link: "libllama.so.0"},
	})
	dst := t.TempDir()
	f := filepath.Join(t.TempDir(), "a.tar.gz")
	require.NoError(t, os.WriteFile(f, archive, 0o644))
	fh, err := os.Open(f)
	require.NoError(t, err)
	defer fh.Close()
	x := &extractor{dst: dst, seen: map[string]bool{}, links: map[string]string{}}
	require.NoError(t, x.archive(fh, int64(len(archive))))
	require.NoError(t, x.link())
	assert.Equal(t, 3, x.n)
	b, err := os.ReadFile(filepath.Join(dst, "libllama.so"))
	require.NoError(t, err)
	assert.Equal(t, "llama", string(b))
	target, err := os.Readlink(filepath.Join(dst, "libllama.so"))
	require.NoError(t, err)
	assert.Equal(t, "libllama.so.0", target)
}

func TestInstallFromGitHubFailures(t *testing.T) {
	folder := "llama-" + Version + "/"
	good := releaseEntries(folder)
	// A stored (uncompressed) library with a byte changed fails its CRC-32.
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for _, e := range good {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Store})
		require.NoError(t, err)
		_, err = f.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	corrupt := bytes.Replace(zbuf.Bytes(), []byte("fake llama"), []byte("fake LLAMA"), 1)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		limit   int64 // limits.file when not zero
		want    string
	}{
		{name: "path escape", want: "unsafe path",
			handler: serve(zipOf(t, append(good, entry{name: folder + "../../evil.so", body: "x"})))},
		{name: "absolute path", want: "unsafe path",
			handler: serve(tgzOf(t, append(good, entry{name: "/tmp/evil.so", body: "x"})))},
		{name: "link out of the folder", want: "points outside its folder",
			handler: serve(tgzOf(t, append(good, entry{name: folder + "libevil.so", link: "../../etc/passwd"})))},
		{name: "dangling link", want: "does not lead to a library",
			handler: serve(tgzOf(t, append(good, entry{name: folder + "libevil.so", link: "libgone.so"})))},
		{name: "no libllama", want: "holds no " + strings.Join(libNames(runtime.GOOS, "llama"), " or "),
			handler: serve(zipOf(t, good[1:]))},
		{name: "two libraries of one name", want: "two libraries named " + plain("ggml"),
			handler: serve(zipOf(t, append(good, entry{name: "other/" + plain("ggml"), body: "x"})))},
		{name: "library too large", want: "is larger than 4 bytes", limit: 4,
			handler: serve(zipOf(t, good))},
		{name: "corrupt zip", want: "checksum error", handler: serve(corrupt)},
		{name: "not an archive", want: "not a zip or gzipped tar archive", handler: serve([]byte("<html>hello</html>"))},
		{name: "404", want: "HTTP 404 Not Found", handler: http.NotFound},
		{name: "truncated body", want: "unexpected EOF", handler: func(w http.ResponseWriter, _ *http.Request) {
			b := zipOf(t, good)
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			_, _ = w.Write(b[:len(b)/2])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.limit != 0 {
				saved := limits.file
				limits.file = tc.limit
				t.Cleanup(func() { limits.file = saved })
			}
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			parent := t.TempDir()
			dir := filepath.Join(parent, "lib")
			_, err := Install(context.Background(), InstallOptions{Dir: dir, Source: SourceGitHub, BaseURL: srv.URL, Insecure: true})
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "lib: "), err.Error())
			left, rerr := os.ReadDir(parent)
			require.NoError(t, rerr)
			assert.Empty(t, left, "a failed install leaves nothing behind")
			assert.NoFileExists(t, filepath.Join(filepath.Dir(parent), "evil.so"))
		})
	}
}

// serve answers every request with b and its length.
func serve(b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	}
}

func TestResolveSource(t *testing.T) {
	for _, tc := range []struct {
		source       Source
		goos, goarch string
		flavor       Flavor
		want         Source
		wantErr      string
	}{
		{SourceAuto, "linux", "amd64", CPU, SourceNPM, ""},
		{SourceAuto, "linux", "amd64", CUDA, SourceNPM, ""},
		{SourceAuto, "darwin", "arm64", CPU, SourceNPM, ""},
		{SourceAuto, "linux", "arm64", Vulkan, SourceGitHub, ""},
		{SourceAuto, "windows", "arm64", CUDA, SourceGitHub, ""},
		{SourceAuto, "linux", "s390x", CPU, SourceGitHub, ""},
		{SourceAuto, "plan9", "386", CPU, "", "neither on npm nor on GitHub"},
		{SourceGitHub, "linux", "amd64", CPU, SourceGitHub, ""},
		{SourceGitHub, "linux", "amd64", CUDA, "", "publishes no cuda build for linux/amd64"},
		{SourceNPM, "linux", "amd64", CPU, SourceNPM, ""},
		{SourceNPM, "linux", "arm64", Vulkan, "", "no prebuilt llama.cpp vulkan build"},
		{"ftp", "linux", "amd64", CPU, "", `unknown source "ftp"`},
	} {
		got, err := ResolveSource(tc.source, tc.goos, tc.goarch, tc.flavor)
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, "%q %s/%s %q", tc.source, tc.goos, tc.goarch, tc.flavor)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%q %s/%s %q", tc.source, tc.goos, tc.goarch, tc.flavor)
	}
}

func TestLibraryPath(t *testing.T) {
	versioned, unversioned := "libllama."+Version+".so", "libllama.so"
	vulkan := "libllama.vulkan." + Version + ".so"
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"npm build", []string{versioned}, versioned},
		{"release archive", []string{unversioned}, unversioned},
		{"both: the versioned name first", []string{unversioned, versioned}, versioned},
		{"npm Vulkan build", []string{vulkan}, vulkan},
		{"neither", []string{"libggml.so"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
			}
			p, err := libraryPath("linux", dir, "llama")
			if tc.want == "" {
				assert.ErrorIs(t, err, ErrNotFound)
				assert.ErrorContains(t, err, versioned+" or "+vulkan+" or libllama.cuda."+Version+".so or "+unversioned)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(dir, tc.want), p)
		})
	}
	assert.Equal(t, []string{"llama.dll"}, libNames("windows", "llama"))
	assert.Equal(t, []string{"libggml." + Version + ".dylib", "libggml.dylib"}, libNames("darwin", "ggml"))
}

// The download reports progress, with the total when the server sends it,
// and refuses a body over the limit whether its length is announced or not.
func TestFetchTo(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 3<<20)
	sized := httptest.NewServer(serve(body))
	defer sized.Close()
	chunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.(http.Flusher).Flush() // no Content-Length
		_, _ = w.Write(body)
	}))
	defer chunked.Close()
	for _, tc := range []struct {
		name, url string
		limit     int64
		progress  string
		err       string
	}{
		{"sized", sized.URL, 1 << 30, "llama: downloaded 3.0 of 3.0 MiB (100%)", ""},
		{"chunked", chunked.URL, 1 << 30, "llama: downloaded 3.0 MiB\n", ""},
		{"sized over the limit", sized.URL, 1 << 20, "", "3145728 bytes is more than the 1048576 bytes allowed"},
		{"chunked over the limit", chunked.URL, 1 << 20, "", "more than the 1048576 bytes allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, dst bytes.Buffer
			n, err := fetchTo(context.Background(), tc.url, &dst, &out, tc.limit)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, int64(len(body)), n)
			assert.Equal(t, body, dst.Bytes())
			assert.Contains(t, out.String(), tc.progress)
		})
	}
}

// TestInstallGitHubNeedsInsecure: the GitHub archives have no pinned
// checksum, so installing them without Insecure is refused before any
// download (for an explicit source, and for the automatic one where no npm
// package exists).
func TestInstallGitHubNeedsInsecure(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	cases := []struct {
		name         string
		src          Source
		goos, goarch string
		flavor       Flavor
	}{
		{"explicit", SourceGitHub, "linux", "amd64", CPU},
		{"automatic", SourceAuto, "linux", "arm64", Vulkan},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "lib")
			_, err := install(context.Background(), InstallOptions{Dir: dir, Source: tc.src, Flavor: tc.flavor, BaseURL: srv.URL}, tc.goos, tc.goarch)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "no pinned checksum")
			assert.Contains(t, err.Error(), "Insecure")
			assert.NoDirExists(t, dir)
		})
	}
	assert.Zero(t, hits.Load(), "nothing was downloaded")
}
