package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// userAgent identifies this package to the hub.
const userAgent = "go-llama/1 (llama.cpp v0.4.0)"

type puller struct {
	repo     string
	o        Options
	endpoint string
	token    string
	offline  bool
	dir      string // the repo's cache folder
	client   *http.Client
	// fileURL, when set, is where a file is downloaded from instead of
	// the hub's resolve URL (OCI registry blobs).
	fileURL func(path string) string
}

func newPuller(repo string, o Options) (*puller, error) {
	p := &puller{repo: repo, o: o, endpoint: Endpoint(o.Endpoint), token: o.Token, offline: o.Offline || OfflineFromEnv()}
	if p.token == "" {
		p.token = os.Getenv(EnvToken)
	}
	if u, err := url.Parse(p.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errf(CodeInvalid, repo, "", "invalid hub endpoint %q", p.endpoint)
	}
	cache := o.CacheDir
	if cache == "" {
		var err error
		if cache, err = CacheDir(); err != nil {
			return nil, err
		}
	}
	p.dir = filepath.Join(cache, RepoFolder(repo))
	p.client = o.Client
	if p.client == nil {
		p.client = &http.Client{}
	}
	if p.o.Attempts <= 0 {
		p.o.Attempts = 3
	}
	if p.o.RetryDelay == 0 {
		p.o.RetryDelay = time.Second
	}
	if p.o.StallTimeout <= 0 {
		p.o.StallTimeout = time.Minute
	}
	return p, nil
}

func (p *puller) progress(pr Progress) {
	if p.o.Progress != nil {
		p.o.Progress(pr)
	}
}

func (p *puller) pull(ctx context.Context, tag string) (*Result, error) {
	var (
		files   []file
		commit  string
		listErr error
	)
	if !p.offline {
		files, commit, listErr = p.list(ctx)
		if err := ctxErr(p.repo, "", ctx.Err()); err != nil {
			return nil, err
		}
	}
	online := !p.offline && listErr == nil
	// missing turns "not found" into the reason the cache was used.
	missing := func(e *Error) error {
		switch {
		case online:
			return e
		case listErr != nil:
			return listErr
		}
		e.Code = CodeOffline
		e.Msg = "offline, and the cache holds no such file: " + e.Msg
		return e
	}
	if !online {
		files, commit = cachedFiles(p.dir)
		if len(files) == 0 {
			if listErr != nil {
				return nil, listErr
			}
			return nil, errf(CodeOffline, p.repo, "", "offline, and the repo is not in the cache (%s)", p.dir)
		}
	}
	res := &Result{Repo: p.repo, Tag: tag, Commit: commit}

	for _, f := range files {
		if f.Path == "preset.ini" {
			path, err := p.fetch(ctx, commit, f, online)
			if err != nil {
				return nil, err
			}
			res.Preset = path
			return res, nil
		}
	}

	var primary file
	if p.o.File != "" {
		found := false
		for _, f := range files {
			if f.Path == p.o.File {
				primary, found = f, true
				break
			}
		}
		if !found {
			return nil, missing(errf(CodeNotFound, p.repo, p.o.File, "no such file in the repo; %s", ggufList(files)))
		}
	} else {
		var ok bool
		if primary, ok = bestModel(files, tag); !ok && p.o.MTP {
			// A repo of MTP heads alone (a draft repo): the head resolves
			// on its own, as in llama.cpp.
			if f, ok := bestSibling(files, "", "mtp-", tag); ok {
				path, err := p.fetch(ctx, commit, f, online)
				if err != nil {
					return nil, err
				}
				res.MTP = path
				return res, nil
			}
		}
		if !ok {
			what := "no GGUF model file"
			if tag != "" {
				what = "no GGUF model file for quant " + tag
			}
			return nil, missing(errf(CodeNotFound, p.repo, "", "%s; %s", what, ggufList(files)))
		}
	}
	parts := splitParts(files, primary)
	if s := ggufSplit(primary.Path); s.Count > 1 && len(parts) != s.Count {
		return nil, missing(errf(CodeNotFound, p.repo, primary.Path, "%d of the %d parts of the split model are listed", len(parts), s.Count))
	}
	for _, f := range parts {
		path, err := p.fetch(ctx, commit, f, online)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, path)
	}
	res.Model = res.Files[0]
	// The projector and the MTP head beside the model; the head of the
	// quant asked for first, as llama.cpp.
	for _, side := range []struct {
		want         bool
		keyword, tag string
		dst          *string
	}{{p.o.MMProj, "mmproj", "", &res.MMProj}, {p.o.MTP, "mtp-", tag, &res.MTP}} {
		if !side.want {
			continue
		}
		if f, ok := bestSibling(files, primary.Path, side.keyword, side.tag); ok {
			path, err := p.fetch(ctx, commit, f, online)
			if err != nil {
				return nil, err
			}
			*side.dst = path
		}
	}
	return res, nil
}

// apiGet fetches a hub API URL and decodes its JSON into v. It returns the
// Link header's next page, if any.
func (p *puller) apiGet(ctx context.Context, u string, v any) (next string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", &Error{Code: CodeInvalid, Repo: p.repo, Msg: "bad API URL", Err: err}
	}
	p.headers(req)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		if e := ctxErr(p.repo, "", ctx.Err()); e != nil {
			return "", e
		}
		return "", &Error{Code: CodeNetwork, Repo: p.repo, Msg: "the hub is unreachable", Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		if e := ctxErr(p.repo, "", ctx.Err()); e != nil {
			return "", e
		}
		return "", &Error{Code: CodeNetwork, Repo: p.repo, Msg: "reading the file list", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return "", p.statusErr(resp, body, "")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return "", &Error{Code: CodeNetwork, Repo: p.repo, Msg: "the hub answered malformed JSON", Err: err}
	}
	return nextLink(resp.Header.Get("Link"), u), nil
}

// statusErr turns a hub error answer into an Error, with the hub's own
// message ({"error": "..."}) when it gives one.
func (p *puller) statusErr(resp *http.Response, body []byte, name string) error {
	msg := strings.TrimSpace(string(body))
	var je struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &je) == nil && je.Error != "" {
		msg = je.Error
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	code := CodeNetwork
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = CodeAuth
		if p.token == "" {
			msg += " (gated or private repo: set HF_TOKEN or pass a token)"
		}
	case http.StatusNotFound:
		code = CodeNotFound
	}
	e := &Error{Code: code, Repo: p.repo, File: name, Status: resp.StatusCode, Msg: fmt.Sprintf("HTTP %d", resp.StatusCode)}
	if msg != "" {
		e.Msg += ": " + msg
	}
	return e
}

// nextLink reads rel="next" from a Link header, resolved against base.
func nextLink(h, base string) string {
	for _, part := range strings.Split(h, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		target = strings.Trim(strings.TrimSpace(target), "<>")
		b, err1 := url.Parse(base)
		t, err2 := url.Parse(target)
		if err1 != nil || err2 != nil {
			return ""
		}
		r := b.ResolveReference(t)
		if r.Host != b.Host { // follow pages on the same hub only
			return ""
		}
		return r.String()
	}
	return ""
}

func (p *puller) headers(req *http.Request) {
	req.Header.Set("User-Agent", userAgent)
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
}

// list asks the hub for the commit main points at (recording it in
// refs/main) and the files of that commit.
func (p *puller) list(ctx context.Context) ([]file, string, error) {
	var refs struct {
		Branches []struct {
			Name         string `json:"name"`
			TargetCommit string `json:"targetCommit"`
		} `json:"branches"`
	}
	base := p.endpoint + "api/models/" + p.repo
	if _, err := p.apiGet(ctx, base+"/refs", &refs); err != nil {
		return nil, "", err
	}
	name, commit := "", ""
	for _, b := range refs.Branches {
		if !safeRel(b.Name) || !validCommit(b.TargetCommit) {
			continue
		}
		if b.Name == "main" {
			name, commit = b.Name, b.TargetCommit
			break
		}
		if name == "" {
			name, commit = b.Name, b.TargetCommit
		}
	}
	if commit == "" {
		return nil, "", errf(CodeNotFound, p.repo, "", "the repo has no branch")
	}
	if err := writeFileAtomic(filepath.Join(p.dir, "refs", filepath.FromSlash(name)), []byte(commit)); err != nil {
		return nil, "", &Error{Code: CodeIO, Repo: p.repo, Msg: "writing the ref", Err: err}
	}

	var files []file
	u := base + "/tree/" + commit + "?recursive=true"
	for page := 0; u != "" && page < 1000; page++ {
		var items []struct {
			Type string `json:"type"`
			Path string `json:"path"`
			OID  string `json:"oid"`
			Size int64  `json:"size"`
			LFS  *struct {
				OID  string `json:"oid"`
				Size int64  `json:"size"`
			} `json:"lfs"`
		}
		next, err := p.apiGet(ctx, u, &items)
		if err != nil {
			return nil, "", err
		}
		for _, it := range items {
			if it.Type != "file" || !safeRel(it.Path) {
				continue
			}
			f := file{Path: it.Path, OID: it.OID, Size: it.Size}
			if it.LFS != nil {
				f.OID, f.Size = it.LFS.OID, it.LFS.Size
			}
			if f.OID != "" && !validOID(f.OID) {
				continue
			}
			f.OID = strings.ToLower(f.OID)
			files = append(files, f)
		}
		u = next
	}
	return files, commit, nil
}

// locks serializes the downloads of one file within the process.
var locks sync.Map // path → *sync.Mutex

// fetch returns the snapshot path of f, downloading its blob first when
// the cache lacks it.
func (p *puller) fetch(ctx context.Context, commit string, f file, online bool) (string, error) {
	final := filepath.Join(p.dir, "snapshots", commit, filepath.FromSlash(f.Path))
	if exists(final) {
		p.progress(Progress{File: f.Path, Downloaded: f.Size, Total: f.Size, Cached: true, Done: true})
		return final, nil
	}
	if !online {
		return "", errf(CodeOffline, p.repo, f.Path, "offline, and the file is not in the cache")
	}
	dst := final
	if f.OID != "" {
		dst = filepath.Join(p.dir, "blobs", f.OID)
	}
	mu, _ := locks.LoadOrStore(dst, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if f.OID != "" {
		lockPath := filepath.Join(filepath.Dir(p.dir), ".locks", filepath.Base(p.dir), f.OID+".lock")
		unlock, err := lockBlob(ctx, lockPath)
		if err != nil {
			if e := ctxErr(p.repo, f.Path, err); e != nil {
				return "", e
			}
			return "", &Error{Code: CodeIO, Repo: p.repo, File: f.Path, Msg: "locking the download", Err: err}
		}
		defer unlock()
	}
	if exists(dst) {
		p.progress(Progress{File: f.Path, Downloaded: f.Size, Total: f.Size, Cached: true, Done: true})
	} else if err := p.download(ctx, commit, f, dst); err != nil {
		return "", err
	}
	if dst != final {
		if err := link(dst, final); err != nil {
			return "", &Error{Code: CodeIO, Repo: p.repo, File: f.Path, Msg: "linking the snapshot", Err: err}
		}
	}
	return final, nil
}

// resolveURL is where the hub serves a file of a commit.
func (p *puller) resolveURL(commit, path string) string {
	if p.fileURL != nil {
		return p.fileURL(path)
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return p.endpoint + p.repo + "/resolve/" + commit + "/" + strings.Join(segs, "/")
}

// permanent reports whether retrying cannot help.
func permanent(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeNetwork:
		return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
	}
	return true
}

// download fetches f into dst through dst+".incomplete", resuming what an
// earlier attempt (or an earlier process) left there, and checks it.
func (p *puller) download(ctx context.Context, commit string, f file, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return &Error{Code: CodeIO, Repo: p.repo, File: f.Path, Msg: "creating the cache folder", Err: err}
	}
	tmp := dst + ".incomplete"
	delay := p.o.RetryDelay
	var err error
	for attempt := 0; attempt < p.o.Attempts; attempt++ {
		if attempt > 0 && delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctxErr(p.repo, f.Path, ctx.Err())
			case <-t.C:
			}
			delay *= 2
		}
		if err = p.attempt(ctx, commit, f, tmp); err == nil {
			break
		}
		if permanent(err) {
			return err
		}
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return &Error{Code: CodeIO, Repo: p.repo, File: f.Path, Msg: "moving the download in place", Err: err}
	}
	return nil
}

// attempt makes one request for the rest of f and appends it to tmp; when
// the file is complete it checks its digest (removing tmp on a mismatch).
func (p *puller) attempt(ctx context.Context, commit string, f file, tmp string) error {
	ioErr := func(msg string, err error) error {
		return &Error{Code: CodeIO, Repo: p.repo, File: f.Path, Msg: msg, Err: err}
	}
	var off int64
	if st, err := os.Stat(tmp); err == nil {
		off = st.Size()
	}
	if f.Size > 0 && off > f.Size {
		off = 0
	}
	// A watchdog ends the request when nothing arrives for StallTimeout.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	watchdog := time.AfterFunc(p.o.StallTimeout, func() { stalled.Store(true); cancel() })
	defer watchdog.Stop()
	stallErr := func(err error) error {
		if e := ctxErr(p.repo, f.Path, ctx.Err()); e != nil {
			return e
		}
		if stalled.Load() {
			return &Error{Code: CodeNetwork, Repo: p.repo, File: f.Path, Msg: fmt.Sprintf("nothing received for %v", p.o.StallTimeout), Err: err}
		}
		return nil
	}
	req, err := http.NewRequestWithContext(actx, http.MethodGet, p.resolveURL(commit, f.Path), nil)
	if err != nil {
		return &Error{Code: CodeInvalid, Repo: p.repo, File: f.Path, Err: err}
	}
	p.headers(req)
	if off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
	}
	// The hub answers a large file with a redirect to its storage, and puts
	// the file's sha256 in the redirect's X-Linked-Etag.
	var linked string
	c := *p.client
	orig := c.CheckRedirect
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if r.Response != nil {
			if v := r.Response.Header.Get("X-Linked-Etag"); v != "" {
				linked = v
			}
		}
		if orig != nil {
			return orig(r, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		if e := stallErr(err); e != nil {
			return e
		}
		return &Error{Code: CodeNetwork, Repo: p.repo, File: f.Path, Msg: "download failed", Err: err}
	}
	defer resp.Body.Close()

	truncate := false
	switch resp.StatusCode {
	case http.StatusOK:
		truncate = off > 0 // the server sent the whole file
		off = 0
	case http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != off {
			os.Remove(tmp)
			return &Error{Code: CodeNetwork, Repo: p.repo, File: f.Path, Msg: "the server resumed at the wrong offset"}
		}
	case http.StatusRequestedRangeNotSatisfiable:
		if f.Size <= 0 || off != f.Size {
			os.Remove(tmp)
			return &Error{Code: CodeNetwork, Repo: p.repo, File: f.Path, Msg: "the partial download does not fit the file; starting over"}
		}
		resp.Body = http.NoBody // already complete
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return p.statusErr(resp, body, f.Path)
	}
	etag := linked
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	total := f.Size
	if total <= 0 && resp.ContentLength >= 0 && resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		total = off + resp.ContentLength
	}

	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if truncate || off == 0 {
		flags |= os.O_TRUNC
	}
	out, err := os.OpenFile(tmp, flags, 0o644)
	if err != nil {
		return ioErr("opening the partial file", err)
	}
	defer out.Close()
	sum := sha256.New()
	if off > 0 { // the digest covers what earlier attempts wrote
		if err := hashFile(sum, tmp, off); err != nil {
			return ioErr("reading the partial file", err)
		}
	}

	n := off
	p.progress(Progress{File: f.Path, Downloaded: n, Total: total})
	step := max(total/200, 256<<10)
	last := n
	buf := make([]byte, 256<<10)
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			watchdog.Reset(p.o.StallTimeout)
			if _, err := out.Write(buf[:k]); err != nil {
				return ioErr("writing the partial file", err)
			}
			sum.Write(buf[:k])
			n += int64(k)
			if n-last >= step {
				last = n
				p.progress(Progress{File: f.Path, Downloaded: n, Total: total})
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if e := stallErr(rerr); e != nil {
				return e
			}
			return &Error{Code: CodeNetwork, Repo: p.repo, File: f.Path, Msg: fmt.Sprintf("connection lost after %d bytes", n), Err: rerr}
		}
	}
	if err := out.Close(); err != nil {
		return ioErr("writing the partial file", err)
	}
	if total > 0 && n != total {
		return &Error{Code: CodeNetwork, Repo: p.repo, File: f.Path, Msg: fmt.Sprintf("got %d of %d bytes", n, total)}
	}

	want := f.OID
	if want == "" {
		want = strings.ToLower(strings.Trim(strings.TrimPrefix(etag, "W/"), `"`))
	}
	var got string
	switch {
	case isHex(want, 64):
		got = hex.EncodeToString(sum.Sum(nil))
	case isHex(want, 40): // a git blob id: sha1 of "blob <size>\0" and the contents
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", n)
		if err := hashFile(h, tmp, n); err != nil {
			return ioErr("reading the download", err)
		}
		got = hex.EncodeToString(h.Sum(nil))
	default:
		want = "" // nothing to check against
	}
	if want != "" && got != want {
		os.Remove(tmp)
		return &Error{Code: CodeChecksum, Repo: p.repo, File: f.Path,
			Msg: fmt.Sprintf("checksum mismatch: the hub lists %s, the download is %s", want, got)}
	}
	p.progress(Progress{File: f.Path, Downloaded: n, Total: max(total, n), Done: true})
	return nil
}

// hashFile feeds the first n bytes of path to h.
func hashFile(h hash.Hash, path string, n int64) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = io.CopyN(h, in, n)
	return err
}

// rangeStart reads the first byte position of "bytes start-end/total".
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return v, err == nil
}
