// Package hubtest is a fake Hugging Face hub for tests: an httptest server
// on 127.0.0.1 that answers the API calls a pull makes (refs and the
// recursive tree of a commit) and serves files at
// /{repo}/resolve/{rev}/{path}, redirecting GGUF (LFS) files to a storage
// path with X-Linked-Etag, honouring Range, refusing gated repos without
// the token, and injecting faults (a dropped connection, a corrupt body).
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Token is the access token the fake hub accepts for gated repos.
const Token = "hf_fakeHubTokenForTestsOnly0123456789abcd"

// Repo is one repository of the fake hub.
type Repo struct {
	// Files maps a path in the repo to its contents. Paths ending in
	// ".gguf" are served as LFS files (sha256 oid, redirect to storage).
	Files map[string][]byte
	// Gated repos answer 401 unless the request carries Token.
	Gated bool
	// Commit is the commit main points at (default: derived from the
	// repo's name).
	Commit string
}

// Request is one request the hub received.
type Request struct {
	Method, Path, Range string
	Auth                bool // it carried the right token
}

// Hub is a running fake hub. Its methods are safe for concurrent use.
type Hub struct {
	*httptest.Server

	mu    sync.Mutex
	repos map[string]*Repo
	blobs map[string][]byte // sha256 → contents
	drop  map[string]int64  // path in a repo → bytes to send before dropping the connection (once)
	stall map[string]int64  // path in a repo → bytes to send before going silent (once)
	bad   map[string]bool   // path in a repo → serve corrupt contents
	log   []Request
}

// New starts a fake hub with the given repos ("org/name" → repo) and
// closes it when the test ends.
func New(t interface{ Cleanup(func()) }, repos map[string]*Repo) *Hub {
	h := &Hub{repos: map[string]*Repo{}, blobs: map[string][]byte{}, drop: map[string]int64{}, stall: map[string]int64{}, bad: map[string]bool{}}
	for name, r := range repos {
		h.Add(name, r)
	}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Server.Close)
	return h
}

// Add adds or replaces a repo.
func (h *Hub) Add(name string, r *Repo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Commit == "" {
		s := sha1.Sum([]byte("commit of " + name))
		r.Commit = hex.EncodeToString(s[:])
	}
	for _, b := range r.Files {
		s := sha256.Sum256(b)
		h.blobs[hex.EncodeToString(s[:])] = b
	}
	h.repos[name] = r
}

// DropAfter makes the next download of path (in any repo) stop after n
// bytes by dropping the connection.
func (h *Hub) DropAfter(path string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop[path] = n
}

// StallAfter makes the next download of path (in any repo) send n bytes
// and then nothing, holding the connection open until the client leaves.
func (h *Hub) StallAfter(path string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stall[path] = n
}

// Corrupt makes downloads of path serve contents that do not match the
// checksum the hub lists.
func (h *Hub) Corrupt(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bad[path] = true
}

// Requests returns the requests received so far.
func (h *Hub) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.log...)
}

// Reset forgets the requests received so far.
func (h *Hub) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = nil
}

// SHA256 is the hex sha256 of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// GitOID is the git blob id of b.
func GitOID(b []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(b))
	s.Write(b)
	return hex.EncodeToString(s.Sum(nil))
}

func isLFS(path string) bool { return strings.HasSuffix(path, ".gguf") }

func jsonError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// repoOf splits "org/name/rest..." into a known repo and the rest.
func (h *Hub) repoOf(p string) (string, *Repo, string) {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 2 {
		return "", nil, ""
	}
	name := parts[0] + "/" + parts[1]
	rest := ""
	if len(parts) == 3 {
		rest = parts[2]
	}
	return name, h.repos[name], rest
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization") == "Bearer "+Token
	h.mu.Lock()
	h.log = append(h.log, Request{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), Auth: auth})
	h.mu.Unlock()

	path := strings.TrimPrefix(r.URL.Path, "/")
	switch {
	case strings.HasPrefix(path, "api/models/"):
		h.serveAPI(w, strings.TrimPrefix(path, "api/models/"), auth)
	case strings.HasPrefix(path, "storage/"):
		h.serveBlob(w, r, strings.TrimPrefix(path, "storage/"))
	default:
		h.serveResolve(w, r, path, auth)
	}
}

func (h *Hub) serveAPI(w http.ResponseWriter, p string, auth bool) {
	h.mu.Lock()
	name, repo, rest := h.repoOf(p)
	h.mu.Unlock()
	if repo == nil {
		jsonError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return
	}
	if repo.Gated && !auth {
		jsonError(w, http.StatusUnauthorized, "GatedRepo", "Access to model "+name+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case rest == "refs":
		json.NewEncoder(w).Encode(map[string]any{
			"branches": []map[string]string{{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.Commit}},
			"converts": []any{}, "tags": []any{},
		})
	case rest == "tree/"+repo.Commit || rest == "tree/main":
		var paths []string
		for p := range repo.Files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		var items []map[string]any
		for _, p := range paths {
			b := repo.Files[p]
			it := map[string]any{"type": "file", "path": p, "oid": GitOID(b), "size": len(b)}
			if isLFS(p) {
				it["size"] = 134 // the pointer file's size, as the hub reports it
				it["oid"] = GitOID([]byte("pointer " + p))
				it["lfs"] = map[string]any{"oid": SHA256(b), "size": len(b), "pointerSize": 134}
			}
			items = append(items, it)
		}
		json.NewEncoder(w).Encode(items)
	default:
		jsonError(w, http.StatusNotFound, "", "Invalid rev id")
	}
}

func (h *Hub) serveResolve(w http.ResponseWriter, r *http.Request, p string, auth bool) {
	h.mu.Lock()
	name, repo, rest := h.repoOf(p)
	h.mu.Unlock()
	if repo == nil {
		jsonError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return
	}
	if repo.Gated && !auth {
		jsonError(w, http.StatusUnauthorized, "GatedRepo", "Access to model "+name+" is restricted.")
		return
	}
	rev, file, ok := strings.Cut(strings.TrimPrefix(rest, "resolve/"), "/")
	if !strings.HasPrefix(rest, "resolve/") || !ok || (rev != repo.Commit && rev != "main") {
		jsonError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	b, ok := repo.Files[file]
	if !ok {
		jsonError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if isLFS(file) {
		sum := SHA256(b)
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		w.Header().Set("ETag", `"`+GitOID([]byte("pointer "+file))+`"`)
		w.Header().Set("Location", "/storage/"+sum+"?file="+url.QueryEscape(file))
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+GitOID(b)+`"`)
	h.send(w, r, file, b)
}

func (h *Hub) serveBlob(w http.ResponseWriter, r *http.Request, sum string) {
	h.mu.Lock()
	b, ok := h.blobs[sum]
	h.mu.Unlock()
	if !ok {
		http.Error(w, "no such blob", http.StatusNotFound)
		return
	}
	w.Header().Set("ETag", `"`+sum+`"`)
	h.send(w, r, r.URL.Query().Get("file"), b)
}

// send writes b (or the asked range of it), applying the faults set for
// file.
func (h *Hub) send(w http.ResponseWriter, r *http.Request, file string, b []byte) {
	h.mu.Lock()
	drop, dropping := h.drop[file]
	delete(h.drop, file)
	stall, stalling := h.stall[file]
	delete(h.stall, file)
	if h.bad[file] {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 0xff
	}
	h.mu.Unlock()

	w.Header().Set("Accept-Ranges", "bytes")
	start := int64(0)
	if rg := r.Header.Get("Range"); rg != "" {
		s, ok := strings.CutPrefix(rg, "bytes=")
		s, _, _ = strings.Cut(s, "-")
		v, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || v < 0 || v >= int64(len(b)) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(b)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = v
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(b)-1, len(b)))
	}
	body := b[start:]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	if r.Method == http.MethodHead {
		return
	}
	if dropping && drop < int64(len(body)) {
		w.Write(body[:drop])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // drops the connection mid-body
	}
	if stalling && stall < int64(len(body)) {
		w.Write(body[:stall])
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // silent until the client gives up
		return
	}
	w.Write(body)
}

// Repos returns the hub's repos (do not modify them).
func (h *Hub) Repos() map[string]*Repo {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]*Repo, len(h.repos))
	for k, v := range h.repos {
		m[k] = v
	}
	return m
}
