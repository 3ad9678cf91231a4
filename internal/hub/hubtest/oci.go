package hubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Image is one model image of the fake OCI registry.
type Image struct {
	GGUF []byte // the GGUF layer's contents
	// MediaType of the GGUF layer (default application/vnd.docker.ai.gguf.v3).
	MediaType string
	// Digest overrides the GGUF layer's digest in the manifest (a digest
	// the blob does not match, or a malformed one); the blob is still
	// served under it.
	Digest string
	// DropAfter, when > 0, ends the first download of the blob after that
	// many bytes (a dropped connection).
	DropAfter int
}

// Registry is a fake OCI registry on 127.0.0.1, speaking the distribution
// API a model pull uses: a 401 with a Bearer challenge without a token,
// the token at /token, manifests by tag, blobs by digest (with Range).
type Registry struct {
	URL  string // http://127.0.0.1:port
	Host string // 127.0.0.1:port

	mu       sync.Mutex
	images   map[string]*Image // "namespace/model:tag"
	dropped  map[string]bool
	requests []Request
}

// RegistryToken is the pull token the fake registry hands out.
const RegistryToken = "fake-registry-pull-token"

// NewRegistry starts a registry serving images ("namespace/model:tag" to
// image) until the test ends.
func NewRegistry(t testing.TB, images map[string]*Image) *Registry {
	r := &Registry{images: images, dropped: map[string]bool{}}
	ts := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(ts.Close)
	r.URL = ts.URL
	r.Host = strings.TrimPrefix(ts.URL, "http://")
	return r
}

// Requests returns the requests received so far.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Digest is the sha256 digest of b, as OCI writes it.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (img *Image) digest() string {
	if img.Digest != "" {
		return img.Digest
	}
	return Digest(img.GGUF)
}

func registryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, Request{Method: req.Method, Path: req.URL.Path, Range: req.Header.Get("Range")})
	r.mu.Unlock()
	if req.URL.Path == "/token" {
		scope := req.URL.Query().Get("scope")
		if req.URL.Query().Get("service") != "fake-registry" || !strings.HasPrefix(scope, "repository:") || !strings.HasSuffix(scope, ":pull") {
			http.Error(w, "bad token request", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"token": RegistryToken})
		return
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/v2/")
	if !ok {
		http.NotFound(w, req)
		return
	}
	var repo, kind, ref string
	for _, k := range []string{"/manifests/", "/blobs/"} {
		if i := strings.LastIndex(rest, k); i > 0 {
			repo, kind, ref = rest[:i], strings.Trim(k, "/"), rest[i+len(k):]
		}
	}
	if repo == "" {
		http.NotFound(w, req)
		return
	}
	if req.Header.Get("Authorization") != "Bearer "+RegistryToken {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+r.URL+`/token",service="fake-registry",scope="repository:`+repo+`:pull"`)
		registryError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return
	}
	switch kind {
	case "manifests":
		img := r.images[repo+":"+ref]
		if img == nil {
			registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown")
			return
		}
		if !strings.Contains(req.Header.Get("Accept"), "application/vnd.oci.image.manifest.v1+json") {
			registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "no manifest of an accepted type")
			return
		}
		mt := img.MediaType
		if mt == "" {
			mt = "application/vnd.docker.ai.gguf.v3"
		}
		license := []byte("license text")
		config := []byte(`{"config":{"format":"gguf"}}`)
		m := map[string]any{
			"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
			"config": map[string]any{"mediaType": "application/vnd.docker.ai.model.config.v0.1+json", "digest": Digest(config), "size": len(config)},
			"layers": []map[string]any{
				{"mediaType": "application/vnd.docker.ai.license", "digest": Digest(license), "size": len(license)},
				{"mediaType": mt, "digest": img.digest(), "size": len(img.GGUF)},
			},
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		_ = json.NewEncoder(w).Encode(m)
	case "blobs":
		var img *Image
		for name, im := range r.images {
			if strings.HasPrefix(name, repo+":") && strings.EqualFold(im.digest(), ref) {
				img = im
			}
		}
		if img == nil {
			registryError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
			return
		}
		r.mu.Lock()
		drop := img.DropAfter > 0 && !r.dropped[repo+"@"+ref]
		r.dropped[repo+"@"+ref] = true
		r.mu.Unlock()
		if drop && req.Header.Get("Range") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(len(img.GGUF)))
			_, _ = w.Write(img.GGUF[:img.DropAfter])
			return // the server closes the connection: the body is short
		}
		w.Header().Set("Docker-Content-Digest", img.digest())
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(img.GGUF))
	}
}
