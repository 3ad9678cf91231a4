package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// toolsRoot is the folder the built-in tools' file operations are
// confined to (ToolsOptions.Root). Every path goes through an os.Root, so
// that ".." and symbolic links cannot leave it, and only regular files are
// read or written: a device (/dev/zero), a FIFO or a socket is refused
// before it is opened, and again after, for one swapped in between.
type toolsRoot struct {
	root *os.Root
	dir  string // absolute and clean: what absolute paths are relative to
	real string // dir with its symbolic links resolved (absolute paths may name either)
}

// openToolsRoot opens dir ("" for the working directory).
func openToolsRoot(dir string) (*toolsRoot, error) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		real = abs
	}
	return &toolsRoot{root: r, dir: abs, real: real}, nil
}

func (r *toolsRoot) close() { _ = r.root.Close() }

// errOutsideRoot is a path that names something outside the root.
type errOutsideRoot struct{ dir, path string }

func (e *errOutsideRoot) Error() string {
	return fmt.Sprintf("path is outside the tools root (%s): %s", e.dir, e.path)
}

// errNotRegular is a path that is not a regular file.
var errNotRegular = errors.New("not a regular file")

// rel translates p, relative to cwd (itself relative to the root) or
// absolute, to a path relative to the root. A leading "~" is the home
// folder. ".." that climbs out of the root and absolute paths elsewhere
// are refused here; symbolic links that lead out are refused by os.Root
// when the path is used.
func (r *toolsRoot) rel(cwd, p string) (string, error) {
	full := p
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			full = home + p[1:]
		}
	}
	if filepath.IsAbs(full) {
		full = filepath.Clean(full)
		for _, base := range []string{r.dir, r.real} {
			if rel, err := filepath.Rel(base, full); err == nil && filepath.IsLocal(rel) {
				return rel, nil
			}
		}
		return "", &errOutsideRoot{r.dir, p}
	}
	rel := filepath.Join(cwd, full)
	if !filepath.IsLocal(rel) {
		return "", &errOutsideRoot{r.dir, p}
	}
	return rel, nil
}

// abs is the absolute path of rel, as the tools show it.
func (r *toolsRoot) abs(rel string) string {
	return filepath.ToSlash(filepath.Join(r.dir, rel))
}

// stat follows symbolic links inside the root.
func (r *toolsRoot) stat(rel string) (fs.FileInfo, error) { return r.root.Stat(rel) }

// openRegular opens rel, which must be a regular file, without blocking
// on a FIFO (openNonblock) and checking the type again on the open file.
func (r *toolsRoot) openRegular(rel string, flag int) (*os.File, fs.FileInfo, error) {
	if st, err := r.root.Stat(rel); err == nil && !st.Mode().IsRegular() {
		return nil, nil, errNotRegular
	} else if err != nil && (flag&os.O_CREATE == 0 || !errors.Is(err, fs.ErrNotExist)) {
		return nil, nil, err
	}
	f, err := r.root.OpenFile(rel, flag|openNonblock, 0o644)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, errNotRegular
	}
	return f, st, nil
}

// readFile reads at most limit bytes of the regular file rel; truncated
// reports that the file holds more.
func (r *toolsRoot) readFile(rel string, limit int) (data []byte, truncated bool, err error) {
	f, _, err := r.openRegular(rel, os.O_RDONLY)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}

// errGitDir is a write into a .git folder, refused: git runs what its
// config and hooks name, so a write there is a command run later.
var errGitDir = errors.New("refused: the path is inside a .git folder (git would run what it names)")

// inGitDir reports whether rel, with the symbolic links inside the root
// resolved, has a ".git" component (in any case: some file systems
// ignore it). Links that lead out of the root, or absolute ones, are left
// for os.Root to refuse when the path is used; a chain of more than 40
// links counts as inside.
func (r *toolsRoot) inGitDir(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	var done []string
	for hops := 0; len(parts) > 0; {
		p := parts[0]
		parts = parts[1:]
		switch {
		case strings.EqualFold(p, ".git"):
			return true
		case p == "" || p == ".":
			continue
		case p == "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := filepath.Join(append(done, p)...)
		st, err := r.root.Lstat(cur)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			done = append(done, p)
			continue
		}
		if hops++; hops > 40 {
			return true
		}
		target, err := r.root.Readlink(cur)
		if err != nil || filepath.IsAbs(target) {
			done = append(done, p)
			continue
		}
		parts = append(strings.Split(filepath.ToSlash(target), "/"), parts...)
	}
	return false
}

// writeFile replaces the content of rel, a regular file or a new one,
// creating its parent folders. It refuses paths inside a .git folder.
func (r *toolsRoot) writeFile(rel string, content []byte) error {
	if r.inGitDir(rel) {
		return errGitDir
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, _, err := r.openRegular(rel, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readDir lists the folder rel.
func (r *toolsRoot) readDir(rel string) ([]fs.DirEntry, error) {
	f, err := r.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
