package hub

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// CacheDir is the hub cache folder, found as llama.cpp finds it: the first
// set of $LLAMA_CACHE, $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub,
// $XDG_CACHE_HOME/huggingface/hub, then ~/.cache/huggingface/hub (on every
// platform, as huggingface_hub does).
func CacheDir() (string, error) {
	for _, e := range []struct{ env, sub string }{
		{"LLAMA_CACHE", ""},
		{"HF_HUB_CACHE", ""},
		{"HUGGINGFACE_HUB_CACHE", ""},
		{"HF_HOME", "hub"},
		{"XDG_CACHE_HOME", filepath.Join("huggingface", "hub")},
		{homeEnv(), filepath.Join(".cache", "huggingface", "hub")},
	} {
		if v := os.Getenv(e.env); v != "" {
			return filepath.Join(v, e.sub), nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", &Error{Code: CodeIO, Msg: "no hub cache folder (set LLAMA_CACHE or HF_HUB_CACHE)", Err: err}
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}

func homeEnv() string {
	if runtime.GOOS == "windows" {
		return "USERPROFILE"
	}
	return "HOME"
}

// RepoFolder is the cache folder name of a repo: "models--org--name".
func RepoFolder(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// validCommit reports whether s is a 40-digit hex commit.
func validCommit(s string) bool { return isHex(s, 40) }

// validOID reports whether s is a git (40) or sha256 (64) hex digest.
func validOID(s string) bool { return isHex(s, 40) || isHex(s, 64) }

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// safeRel reports whether the slash-separated path p stays inside its base
// folder once joined to it: relative, and no ".." climbing out.
func safeRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.Contains(p, "\x00") {
		return false
	}
	return filepath.IsLocal(filepath.FromSlash(p))
}

// cachedRef is the commit the repo's refs point at: refs/main, else the
// first valid ref file.
func cachedRef(repoDir string) string {
	entries, err := os.ReadDir(filepath.Join(repoDir, "refs"))
	if err != nil {
		return ""
	}
	fallback := ""
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoDir, "refs", e.Name()))
		if err != nil {
			continue
		}
		c, _, _ := strings.Cut(string(b), "\n")
		c = strings.TrimSpace(c)
		if !validCommit(c) {
			continue
		}
		if e.Name() == "main" {
			return c
		}
		if fallback == "" {
			fallback = c
		}
	}
	return fallback
}

// cachedFiles lists the files of the repo's cached snapshot (the one its
// refs point at), sorted by path, with the commit.
func cachedFiles(repoDir string) (files []file, commit string) {
	commit = cachedRef(repoDir)
	if commit == "" {
		return nil, ""
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	_ = filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() || (!d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0) {
			return nil
		}
		if _, err := os.Stat(p); err != nil { // a dangling link
			return nil
		}
		rel, err := filepath.Rel(snap, p)
		if err == nil {
			files = append(files, file{Path: filepath.ToSlash(rel)})
		}
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, commit
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, creating the folder.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// A temporary file of its own, so that concurrent writers of one path
	// (two pulls of one repo) never rename each other's file away.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// link makes final (a snapshot entry) point at blob with a relative
// symlink, as huggingface_hub and llama.cpp do; where symlinks fail, the
// blob is moved there (then copied, if moving fails).
func link(blob, final string) error {
	if _, err := os.Lstat(final); err == nil {
		if _, err := os.Stat(final); err == nil {
			return nil
		}
		os.Remove(final) // dangling
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(final), blob)
	if err == nil {
		if err = os.Symlink(rel, final); err == nil {
			return nil
		}
		if _, serr := os.Stat(final); serr == nil {
			return nil // another pull linked it meanwhile
		}
	}
	if err := os.Rename(blob, final); err == nil {
		return nil
	}
	return copyFile(blob, final)
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := out.Name()
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// exists reports whether path names an existing file (following links).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Cached is one model of the cache: a repo and a quant tag, which
// "repo:tag" pulls (offline) again.
type Cached struct {
	Repo, Tag string
}

// String is "repo:tag".
func (c Cached) String() string { return c.Repo + ":" + c.Tag }

// ListCached lists the models of the hub cache at dir (empty: CacheDir()),
// as llama.cpp lists them for llama-server's router: for every repo's
// current snapshot, each GGUF model with a quant tag in its name (first
// parts of split models only; projectors and sidecars left out), sorted.
func ListCached(dir string) ([]Cached, error) {
	if dir == "" {
		var err error
		if dir, err = CacheDir(); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, &Error{Code: CodeIO, Msg: "reading the hub cache", Err: err}
	}
	var out []Cached
	seen := map[Cached]bool{}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), "models--")
		if !ok || !e.IsDir() {
			continue
		}
		repo := strings.ReplaceAll(name, "--", "/")
		if !validRepoID(repo) {
			continue
		}
		files, _ := cachedFiles(filepath.Join(dir, e.Name()))
		for _, f := range files {
			s := ggufSplit(f.Path)
			if !s.ok || s.Index != 1 || s.Tag == "" || !isModelFile(f.Path) {
				continue
			}
			c := Cached{Repo: repo, Tag: s.Tag}
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
