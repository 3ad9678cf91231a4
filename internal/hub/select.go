package hub

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// file is one file of a repo snapshot.
type file struct {
	Path string // path in the repo, with forward slashes
	OID  string // sha256 of an LFS file, git blob sha1 otherwise; "" when unknown (cache listing)
	Size int64  // 0 when unknown
}

// SplitRef splits "org/repo[:quant]" into the repo and the quant (tag),
// which may be empty. As in llama.cpp, the tag is what follows the last
// colon, and the repo must be exactly two names joined by a slash.
func SplitRef(ref string) (repo, tag string, err error) {
	parts := strings.Split(ref, ":")
	repo = parts[0]
	if len(parts) > 1 {
		tag = parts[len(parts)-1]
	}
	if !validRepoID(repo) {
		return "", "", errf(CodeInvalid, "", "", "invalid Hugging Face repo %q, expected <user>/<model>[:quant]", ref)
	}
	return repo, tag, nil
}

// validRepoID accepts [A-Za-z0-9_] runs joined by single '/', '.' or '-',
// with exactly one '/', at most 256 bytes: what the hub's repo ids are.
func validRepoID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	slashes, special := 0, true
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
			special = false
		case c == '/' || c == '.' || c == '-':
			if special {
				return false
			}
			if c == '/' {
				slashes++
			}
			special = true
		default:
			return false
		}
	}
	return !special && slashes == 1
}

// splitInfo describes a GGUF file name: its prefix without ".gguf" and
// without a "-0000i-of-0000n" suffix, its quant tag (upper case, the last
// [-.]-separated word of the prefix), and its part index and count (1 and
// 1 for a file that is not split). ok is false for a non-GGUF name.
type splitInfo struct {
	Prefix       string
	Tag          string
	Index, Count int
	ok           bool
}

var (
	reSplit = regexp.MustCompile(`(?i)^(.+)-([0-9]{5})-of-([0-9]{5})$`)
	reTag   = regexp.MustCompile(`(?i)[-.]([A-Z0-9_]+)$`)
)

func ggufSplit(path string) splitInfo {
	prefix, ok := strings.CutSuffix(path, ".gguf")
	if !ok {
		return splitInfo{}
	}
	s := splitInfo{Index: 1, Count: 1, ok: true}
	if m := reSplit.FindStringSubmatch(prefix); m != nil {
		s.Index, _ = strconv.Atoi(m[2])
		s.Count, _ = strconv.Atoi(m[3])
		prefix = m[1]
	}
	s.Prefix = prefix
	if m := reTag.FindStringSubmatch(prefix); m != nil {
		s.Tag = strings.ToUpper(m[1])
	}
	return s
}

// leadingInt reads the number at the start of s, 0 when none.
func leadingInt(s string) int {
	n := 0
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9' && n < 1<<20; i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// tagBits is the bit width a quant tag names: Q4_K_M → 4, F16 → 16, 0 when
// the tag has no digit.
func tagBits(tag string) int {
	i := strings.IndexAny(tag, "0123456789")
	if i < 0 {
		return 0
	}
	return leadingInt(tag[i:])
}

// isModelFile reports whether path is a GGUF model, not a projector,
// imatrix or speculative-decoding sidecar.
func isModelFile(path string) bool {
	if !strings.HasSuffix(path, ".gguf") {
		return false
	}
	base := path[strings.LastIndexByte(path, '/')+1:]
	for _, s := range []string{"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"} {
		if strings.Contains(base, s) {
			return false
		}
	}
	return true
}

// DefaultQuants are the quants tried, in order, when the reference names
// none; then the first model file of the repo is taken.
var DefaultQuants = []string{"Q4_K_M", "Q8_0"}

// bestModel picks the model file for tag, as llama.cpp does: the first
// model file (in listing order) whose path holds the tag followed by '.'
// or '-', case-insensitively, skipping later parts of split models. With no
// tag, Q4_K_M, then Q8_0, then the first model file.
func bestModel(files []file, tag string) (file, bool) {
	tags := DefaultQuants
	if tag != "" {
		tags = []string{tag}
	}
	for _, t := range tags {
		re := regexp.MustCompile(`(?i)` + regexp.QuoteMeta(t) + `[.-]`)
		for _, f := range files {
			if isModelFile(f.Path) && re.MatchString(f.Path) && ggufSplit(f.Path).Index == 1 {
				return f, true
			}
		}
	}
	if tag == "" {
		for _, f := range files {
			if isModelFile(f.Path) && ggufSplit(f.Path).Index == 1 {
				return f, true
			}
		}
	}
	return file{}, false
}

// splitParts returns every part of the model primary belongs to, ordered
// by part index (just primary when it is not split).
func splitParts(files []file, primary file) []file {
	s := ggufSplit(primary.Path)
	if s.Count <= 1 {
		return []file{primary}
	}
	var parts []file
	for _, f := range files {
		if fs := ggufSplit(f.Path); fs.ok && fs.Count == s.Count && fs.Prefix == s.Prefix {
			parts = append(parts, f)
		}
	}
	sort.SliceStable(parts, func(i, j int) bool { return ggufSplit(parts[i].Path).Index < ggufSplit(parts[j].Path).Index })
	return parts
}

// bestSibling picks the GGUF whose path contains keyword ("mmproj",
// "mtp-") for the model at modelPath, as llama.cpp does: only files in the
// model's folder or one of its parent folders qualify; the deepest folder
// wins, then (with a tag, the reference's quant) a file named for the tag
// ("-Q4_K_M."), then the quant closest in bits to the tag's, or to the
// model's without one.
func bestSibling(files []file, modelPath, keyword, tag string) (file, bool) {
	modelDirs := strings.Split(modelPath, "/")
	modelDirs = modelDirs[:len(modelDirs)-1]
	modelBits := tagBits(ggufSplit(modelPath).Tag)
	if tag != "" {
		modelBits = tagBits(strings.ToUpper(tag))
	}
	var (
		best             file
		found, bestExact bool
		bestDepth        int
		bestDiff         int
	)
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".gguf") || !strings.Contains(f.Path, keyword) {
			continue
		}
		dirs := strings.Split(f.Path, "/")
		dirs = dirs[:len(dirs)-1]
		if len(dirs) > len(modelDirs) {
			continue
		}
		match := true
		for i := range dirs {
			if dirs[i] != modelDirs[i] {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		depth := len(dirs)
		diff := tagBits(ggufSplit(f.Path).Tag) - modelBits
		if diff < 0 {
			diff = -diff
		}
		exact := tag != "" && strings.Contains(strings.ToUpper(f.Path), "-"+strings.ToUpper(tag)+".")
		if !found || depth > bestDepth || depth == bestDepth && exact && !bestExact ||
			depth == bestDepth && exact == bestExact && diff < bestDiff {
			best, found, bestDepth, bestDiff, bestExact = f, true, depth, diff, exact
		}
	}
	return best, found
}

// ggufList names the GGUF files of a listing, for error messages.
func ggufList(files []file) string {
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f.Path, ".gguf") {
			names = append(names, f.Path)
		}
	}
	if len(names) == 0 {
		return "the repo has no GGUF file"
	}
	return "available GGUF files: " + strings.Join(names, ", ")
}
