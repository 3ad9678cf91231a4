package hub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/internal/hub"
	"github.com/x/llama/internal/hub/hubtest"
)

// blob is deterministic test contents of n bytes, different per name.
func blob(name string, n int) []byte {
	b := make([]byte, n)
	x := uint32(len(name)) * 2654435761
	for _, c := range name {
		x = x*31 + uint32(c)
	}
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func repoOf(names ...string) *hubtest.Repo {
	r := &hubtest.Repo{Files: map[string][]byte{"README.md": []byte("# a model\n")}}
	for _, n := range names {
		r.Files[n] = blob(n, 300_000+len(n))
	}
	return r
}

func newHub(t *testing.T) *hubtest.Hub {
	gated := repoOf("gated-Q4_K_M.gguf")
	gated.Gated = true
	return hubtest.New(t, map[string]*hubtest.Repo{
		"org/quants":  repoOf("tiny-Q2_K.gguf", "tiny-Q8_0.gguf", "tiny-Q4_K_M.gguf", "mmproj-tiny-f16.gguf", "mmproj-tiny-q8_0.gguf"),
		"org/mtp":     repoOf("glm-Q4_K_M.gguf", "glm-Q8_0.gguf", "mtp-glm-Q8_0.gguf", "mtp-glm-Q4_K_M.gguf"),
		"org/mtpside": repoOf("mtp-glm-Q8_0.gguf", "mtp-glm-Q4_K_M.gguf"),
		"org/q8":      repoOf("tiny-Q2_K.gguf", "tiny-Q8_0.gguf"),
		"org/split":   repoOf("big-Q4_K_M-00001-of-00003.gguf", "big-Q4_K_M-00002-of-00003.gguf", "big-Q4_K_M-00003-of-00003.gguf", "big-Q8_0.gguf"),
		"org/broken":  repoOf("big-Q4_K_M-00001-of-00003.gguf", "big-Q4_K_M-00003-of-00003.gguf"),
		"org/gated":   gated,
		"org/dropped": repoOf("drop-Q4_K_M.gguf"),
		"org/stalled": repoOf("stall-Q4_K_M.gguf"),
		"org/corrupt": repoOf("bad-Q4_K_M.gguf"),
		"org/preset":  {Files: map[string][]byte{"preset.ini": []byte("[m]\nhf-repo = org/quants\n"), "x-Q4_K_M.gguf": blob("x", 10)}},
	})
}

func opts(h *hubtest.Hub, cache string) hub.Options {
	return hub.Options{Endpoint: h.URL, CacheDir: cache, RetryDelay: -1}
}

func codeOf(t *testing.T, err error) hub.Code {
	t.Helper()
	var e *hub.Error
	require.ErrorAs(t, err, &e)
	return e.Code
}

// checkLayout verifies the hub cache layout for a pulled file: a relative
// symlink in snapshots/<commit>/ to blobs/<sha256>, and refs/main.
func checkLayout(t *testing.T, cache, repo, commit, path string, want []byte) {
	t.Helper()
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	ref, err := os.ReadFile(filepath.Join(dir, "refs", "main"))
	require.NoError(t, err)
	assert.Equal(t, commit, string(ref))
	snap := filepath.Join(dir, "snapshots", commit, filepath.FromSlash(path))
	target, err := os.Readlink(snap)
	require.NoError(t, err, "the snapshot entry is a symlink")
	assert.False(t, filepath.IsAbs(target), "the link is relative")
	assert.Equal(t, filepath.Join(dir, "blobs", hubtest.SHA256(want)), filepath.Join(filepath.Dir(snap), target))
	got, err := os.ReadFile(snap)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "contents of %s", path)
}

func TestPull(t *testing.T) {
	h := newHub(t)
	for _, tc := range []struct {
		name   string
		ref    string
		o      func(*hub.Options)
		setup  func(t *testing.T)
		files  []string // repo paths expected in Result.Files
		mmproj string
		mtp    string
		code   hub.Code // expected error code, when not CodeUnknown
		status int
	}{
		{name: "default quant is Q4_K_M", ref: "org/quants", files: []string{"tiny-Q4_K_M.gguf"}},
		{name: "then Q8_0", ref: "org/q8", files: []string{"tiny-Q8_0.gguf"}},
		{name: "quant tag, any case", ref: "org/quants:q2_k", files: []string{"tiny-Q2_K.gguf"}},
		{name: "explicit file", ref: "org/quants:Q2_K", o: func(o *hub.Options) { o.File = "tiny-Q8_0.gguf" }, files: []string{"tiny-Q8_0.gguf"}},
		{name: "mmproj beside the model", ref: "org/quants", o: func(o *hub.Options) { o.MMProj = true }, files: []string{"tiny-Q4_K_M.gguf"}, mmproj: "mmproj-tiny-q8_0.gguf"},
		{name: "mtp head beside the model", ref: "org/mtp:Q8_0", o: func(o *hub.Options) { o.MTP = true }, files: []string{"glm-Q8_0.gguf"}, mtp: "mtp-glm-Q8_0.gguf"},
		{name: "mtp head not asked for", ref: "org/mtp", files: []string{"glm-Q4_K_M.gguf"}},
		{name: "mtp heads alone", ref: "org/mtpside", o: func(o *hub.Options) { o.MTP = true }, mtp: "mtp-glm-Q4_K_M.gguf"},
		{name: "mtp heads alone, not asked for", ref: "org/mtpside", code: hub.CodeNotFound},
		{name: "split model: every part", ref: "org/split",
			files: []string{"big-Q4_K_M-00001-of-00003.gguf", "big-Q4_K_M-00002-of-00003.gguf", "big-Q4_K_M-00003-of-00003.gguf"}},
		{name: "split model missing a part", ref: "org/broken", code: hub.CodeNotFound},
		{name: "unknown quant", ref: "org/quants:IQ1_S", code: hub.CodeNotFound},
		{name: "unknown file", ref: "org/quants", o: func(o *hub.Options) { o.File = "nope.gguf" }, code: hub.CodeNotFound},
		{name: "unknown repo", ref: "org/nope", code: hub.CodeAuth, status: 401}, // the hub hides unknown repos behind 401
		{name: "gated without token", ref: "org/gated", code: hub.CodeAuth, status: 401},
		{name: "gated with token", ref: "org/gated", o: func(o *hub.Options) { o.Token = hubtest.Token }, files: []string{"gated-Q4_K_M.gguf"}},
		{name: "gated with HF_TOKEN", ref: "org/gated", setup: func(t *testing.T) { t.Setenv(hub.EnvToken, hubtest.Token) }, files: []string{"gated-Q4_K_M.gguf"}},
		{name: "connection dropped mid-file, resumed", ref: "org/dropped", setup: func(t *testing.T) { h.DropAfter("drop-Q4_K_M.gguf", 100_000) }, files: []string{"drop-Q4_K_M.gguf"}},
		{name: "stalled connection, resumed", ref: "org/stalled", setup: func(t *testing.T) { h.StallAfter("stall-Q4_K_M.gguf", 100_000) },
			o: func(o *hub.Options) { o.StallTimeout = 200 * time.Millisecond }, files: []string{"stall-Q4_K_M.gguf"}},
		{name: "wrong checksum refused", ref: "org/corrupt", setup: func(t *testing.T) { h.Corrupt("bad-Q4_K_M.gguf") }, code: hub.CodeChecksum},
		{name: "bad reference", ref: "just-a-name", code: hub.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(hub.EnvToken, "")
			t.Setenv(hub.EnvOffline, "")
			if tc.setup != nil {
				tc.setup(t)
			}
			cache := t.TempDir()
			o := opts(h, cache)
			if tc.o != nil {
				tc.o(&o)
			}
			h.Reset()
			res, err := hub.Pull(context.Background(), tc.ref, o)
			if tc.code != hub.CodeUnknown {
				require.Error(t, err)
				var e *hub.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tc.code, e.Code, "%v", err)
				assert.ErrorIs(t, err, &hub.Error{Code: tc.code})
				if tc.status != 0 {
					assert.Equal(t, tc.status, e.Status)
				}
				// Nothing half-done is left as a finished file.
				filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
					assert.False(t, strings.Contains(p, "snapshots") && strings.HasSuffix(p, ".gguf"), "left %s", p)
					return nil
				})
				return
			}
			require.NoError(t, err)
			repo, _, _ := strings.Cut(tc.ref, ":")
			hr := h.Repos()[repo]
			assert.Equal(t, hr.Commit, res.Commit)
			require.Len(t, res.Files, len(tc.files))
			if len(tc.files) == 0 {
				assert.Empty(t, res.Model)
				assert.Equal(t, filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"), "snapshots", hr.Commit, tc.mtp), res.MTP)
				checkLayout(t, cache, repo, hr.Commit, tc.mtp, hr.Files[tc.mtp])
				return
			}
			assert.Equal(t, res.Files[0], res.Model, "the model is the first part")
			for i, f := range tc.files {
				assert.Equal(t, filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"), "snapshots", hr.Commit, f), res.Files[i])
				checkLayout(t, cache, repo, hr.Commit, f, hr.Files[f])
			}
			if tc.mmproj != "" {
				assert.Equal(t, filepath.Join(filepath.Dir(res.Model), tc.mmproj), res.MMProj)
				checkLayout(t, cache, repo, hr.Commit, tc.mmproj, hr.Files[tc.mmproj])
			} else {
				assert.Empty(t, res.MMProj)
			}
			if tc.mtp != "" {
				assert.Equal(t, filepath.Join(filepath.Dir(res.Model), tc.mtp), res.MTP)
				checkLayout(t, cache, repo, hr.Commit, tc.mtp, hr.Files[tc.mtp])
			} else {
				assert.Empty(t, res.MTP)
			}
			var resolves, redirects int
			for _, r := range h.Requests() {
				if strings.Contains(r.Path, "/resolve/") {
					resolves++
					assert.True(t, strings.Contains(r.Path, "/resolve/"+hr.Commit+"/"), "files are fetched at the listed commit: %s", r.Path)
				}
				if strings.HasPrefix(r.Path, "/storage/") {
					redirects++
				}
			}
			assert.Equal(t, resolves, redirects, "every GGUF followed its redirect")
			assert.GreaterOrEqual(t, resolves, len(tc.files))
		})
	}
}

// A dropped or stalled connection is resumed with a Range request from
// where it stopped, not restarted.
func TestPullResumesWithRange(t *testing.T) {
	h := newHub(t)
	for _, tc := range []struct {
		name, repo, file string
		fault            func()
	}{
		{"dropped", "org/dropped", "drop-Q4_K_M.gguf", func() { h.DropAfter("drop-Q4_K_M.gguf", 123_457) }},
		{"stalled", "org/stalled", "stall-Q4_K_M.gguf", func() { h.StallAfter("stall-Q4_K_M.gguf", 123_457) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault()
			h.Reset()
			o := opts(h, t.TempDir())
			o.StallTimeout = 200 * time.Millisecond
			res, err := hub.Pull(context.Background(), tc.repo, o)
			require.NoError(t, err)
			var ranges []string
			for _, r := range h.Requests() {
				if strings.HasPrefix(r.Path, "/storage/") {
					ranges = append(ranges, r.Range)
				}
			}
			assert.Equal(t, []string{"", "bytes=123457-"}, ranges)
			got, err := os.ReadFile(res.Model)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(h.Repos()[tc.repo].Files[tc.file], got))
		})
	}
}

// A partial file left by an interrupted process (blobs/<sha256>.incomplete)
// is resumed by the next pull.
func TestPullResumesAcrossRuns(t *testing.T) {
	h := newHub(t)
	cache := t.TempDir()
	want := h.Repos()["org/dropped"].Files["drop-Q4_K_M.gguf"]
	blobs := filepath.Join(cache, "models--org--dropped", "blobs")
	require.NoError(t, os.MkdirAll(blobs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(blobs, hubtest.SHA256(want)+".incomplete"), want[:50_000], 0o644))

	var got []hub.Progress
	o := opts(h, cache)
	o.Progress = func(p hub.Progress) { got = append(got, p) }
	res, err := hub.Pull(context.Background(), "org/dropped", o)
	require.NoError(t, err)
	b, err := os.ReadFile(res.Model)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, b))
	var ranges []string
	for _, r := range h.Requests() {
		if strings.HasPrefix(r.Path, "/storage/") {
			ranges = append(ranges, r.Range)
		}
	}
	assert.Equal(t, []string{"bytes=50000-"}, ranges)
	require.NotEmpty(t, got)
	assert.Equal(t, int64(50_000), got[0].Downloaded, "progress starts at the resumed offset")
	assert.NoFileExists(t, filepath.Join(blobs, hubtest.SHA256(want)+".incomplete"))
}

// Progress reports grow to the file's size and end with Done; a second pull
// reports the file as cached.
func TestPullProgress(t *testing.T) {
	h := newHub(t)
	cache := t.TempDir()
	var mu sync.Mutex
	var got []hub.Progress
	o := opts(h, cache)
	o.Progress = func(p hub.Progress) { mu.Lock(); got = append(got, p); mu.Unlock() }
	_, err := hub.Pull(context.Background(), "org/split", o)
	require.NoError(t, err)
	byFile := map[string][]hub.Progress{}
	for _, p := range got {
		byFile[p.File] = append(byFile[p.File], p)
	}
	require.Len(t, byFile, 3)
	for f, ps := range byFile {
		size := int64(len(h.Repos()["org/split"].Files[f]))
		for i := 1; i < len(ps); i++ {
			assert.GreaterOrEqual(t, ps[i].Downloaded, ps[i-1].Downloaded, f)
		}
		last := ps[len(ps)-1]
		assert.True(t, last.Done, f)
		assert.False(t, last.Cached, f)
		assert.Equal(t, size, last.Downloaded, f)
		assert.Equal(t, size, last.Total, f)
	}

	got = nil
	_, err = hub.Pull(context.Background(), "org/split", o)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for _, p := range got {
		assert.True(t, p.Cached && p.Done, "%+v", p)
	}
}

// After a pull, the cache answers: online without downloading again,
// offline without any request, and when the hub is gone.
func TestPullOfflineAndCache(t *testing.T) {
	h := newHub(t)
	cache := t.TempDir()
	first, err := hub.Pull(context.Background(), "org/quants", opts(h, cache))
	require.NoError(t, err)

	for _, tc := range []struct {
		name     string
		ref      string
		o        func(*hub.Options)
		env      string // HF_HUB_OFFLINE
		want     string // the model's repo path, or "" for an error
		code     hub.Code
		requests bool // the hub may be asked (API only)
	}{
		{name: "online: cached, no download", ref: "org/quants", want: "tiny-Q4_K_M.gguf", requests: true},
		{name: "offline option", ref: "org/quants", o: func(o *hub.Options) { o.Offline = true }, want: "tiny-Q4_K_M.gguf"},
		{name: "HF_HUB_OFFLINE", ref: "org/quants", env: "1", want: "tiny-Q4_K_M.gguf"},
		{name: "offline, quant not cached", ref: "org/quants:Q8_0", o: func(o *hub.Options) { o.Offline = true }, code: hub.CodeOffline},
		{name: "offline, repo not cached", ref: "org/q8", o: func(o *hub.Options) { o.Offline = true }, code: hub.CodeOffline},
		{name: "offline, another cache", ref: "org/quants", o: func(o *hub.Options) { o.Offline = true; o.CacheDir = t.TempDir() }, code: hub.CodeOffline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(hub.EnvOffline, tc.env)
			o := opts(h, cache)
			if tc.o != nil {
				tc.o(&o)
			}
			h.Reset()
			res, err := hub.Pull(context.Background(), tc.ref, o)
			if tc.want == "" {
				assert.Equal(t, tc.code, codeOf(t, err), "%v", err)
				assert.Contains(t, err.Error(), "offline")
			} else {
				require.NoError(t, err)
				assert.Equal(t, first.Model, res.Model)
			}
			for _, r := range h.Requests() {
				assert.True(t, tc.requests, "no request when offline: %+v", r)
				assert.True(t, strings.HasPrefix(r.Path, "/api/"), "no download: %+v", r)
			}
		})
	}

	// The hub goes away: the cached snapshot still answers, and what is not
	// cached fails with the network error.
	h.Close()
	res, err := hub.Pull(context.Background(), "org/quants", opts(h, cache))
	require.NoError(t, err)
	assert.Equal(t, first.Model, res.Model)
	_, err = hub.Pull(context.Background(), "org/q8", opts(h, cache))
	assert.Equal(t, hub.CodeNetwork, codeOf(t, err))
}

// A cache written by another tool in the standard layout (as
// huggingface_hub and llama.cpp write it) is used as is.
func TestPullSharedCache(t *testing.T) {
	cache := t.TempDir()
	commit := strings.Repeat("ab", 20)
	model := blob("shared", 1000)
	dir := filepath.Join(cache, "models--other--shared")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "refs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "blobs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blobs", hubtest.SHA256(model)), model, 0o644))
	snap := filepath.Join(dir, "snapshots", commit)
	require.NoError(t, os.MkdirAll(snap, 0o755))
	require.NoError(t, os.Symlink(filepath.Join("..", "..", "blobs", hubtest.SHA256(model)), filepath.Join(snap, "shared-Q8_0.gguf")))

	t.Setenv("LLAMA_CACHE", cache) // found through llama.cpp's variable
	res, err := hub.Pull(context.Background(), "other/shared", hub.Options{Offline: true})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(snap, "shared-Q8_0.gguf"), res.Model)
	assert.Equal(t, commit, res.Commit)
}

// A preset repo (preset.ini at its root) pulls only the preset.
func TestPullPresetRepo(t *testing.T) {
	h := newHub(t)
	res, err := hub.Pull(context.Background(), "org/preset", opts(h, t.TempDir()))
	require.NoError(t, err)
	assert.Empty(t, res.Model)
	b, err := os.ReadFile(res.Preset)
	require.NoError(t, err)
	assert.Contains(t, string(b), "hf-repo = org/quants")
}

// Canceling the context stops the pull with a canceled error that wraps
// the context's.
func TestPullCanceled(t *testing.T) {
	h := newHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	o := opts(h, t.TempDir())
	o.Progress = func(p hub.Progress) {
		if p.Downloaded > 0 {
			cancel()
		}
	}
	_, err := hub.Pull(ctx, "org/split", o)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Equal(t, hub.CodeCanceled, codeOf(t, err))
	assert.Equal(t, fmt.Sprint(err), err.Error())
}

// ListCached names each cached model as repo:TAG, once per quant, without
// projectors or later split parts.
func TestListCached(t *testing.T) {
	h := newHub(t)
	cache := t.TempDir()
	got, err := hub.ListCached(cache)
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, ref := range []string{"org/quants", "org/quants:Q8_0", "org/split", "org/q8:q2_k"} {
		o := opts(h, cache)
		o.MMProj = true
		_, err := hub.Pull(context.Background(), ref, o)
		require.NoError(t, err)
	}
	got, err = hub.ListCached(cache)
	require.NoError(t, err)
	var names []string
	for _, c := range got {
		names = append(names, c.String())
	}
	assert.Equal(t, []string{"org/q8:Q2_K", "org/quants:Q4_K_M", "org/quants:Q8_0", "org/split:Q4_K_M"}, names)

	t.Setenv("LLAMA_CACHE", cache)
	again, err := hub.ListCached("")
	require.NoError(t, err)
	assert.Equal(t, got, again)
	none, err := hub.ListCached(filepath.Join(cache, "missing"))
	require.NoError(t, err)
	assert.Empty(t, none)
}

// Concurrent pulls of one model into one cache download each file once.
func TestPullConcurrent(t *testing.T) {
	h := newHub(t)
	cache := t.TempDir()
	const n = 4
	paths := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res *hub.Result
			res, errs[i] = hub.Pull(context.Background(), "org/split", opts(h, cache))
			if res != nil {
				paths[i] = res.Model
			}
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, paths[0], paths[i])
	}
	got := map[string]int{}
	for _, r := range h.Requests() {
		if strings.HasPrefix(r.Path, "/storage/") {
			got[r.Path]++
		}
	}
	assert.Len(t, got, 3)
	for p, k := range got {
		assert.Equal(t, 1, k, p)
	}
}
