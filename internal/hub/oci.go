package hub

// Pulling a GGUF from an OCI registry, as llama.cpp's -dr/--docker-repo:
// the reference "[<namespace>/]<model>[:tag]" names a repository of the
// default registry (namespace "ai" when none is given, tag "latest"); its
// manifest (GET /v2/<repo>/manifests/<tag>) lists layers, and the first
// whose media type names GGUF is downloaded from /v2/<repo>/blobs/<digest>
// and checked against that sha256 digest. A registry that wants a token
// says so with a 401 and a WWW-Authenticate Bearer challenge, whose realm
// hands out an anonymous pull token.
//
// Beyond llama.cpp, a reference may start with a registry host, as in
// docker's references ("host[:port]/namespace/model:tag": a first name
// with a dot or a colon, or "localhost"); loopback hosts are spoken to in
// plain HTTP, others in HTTPS.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultOCIRegistry is the registry of references without a host:
// llama.cpp's, Docker Hub.
const DefaultOCIRegistry = "https://registry-1.docker.io"

// OCIGGUFMediaType is the media type of a GGUF layer in a model image;
// llama.cpp also takes any media type containing "gguf".
const OCIGGUFMediaType = "application/vnd.docker.ai.gguf.v3"

// ociManifestAccept are the manifest types asked for.
const ociManifestAccept = "application/vnd.docker.distribution.manifest.v2+json,application/vnd.oci.image.manifest.v1+json"

// maxManifest bounds a manifest or token answer.
const maxManifest = 4 << 20

// OCIOptions configure PullOCI. The zero value pulls from the default
// registry into Dir with the defaults of Options.
type OCIOptions struct {
	// Dir is the folder the model goes into (llama.cpp's cache folder),
	// named <namespace>_<model>_<tag>.gguf as llama.cpp names it (prefixed
	// with the registry host when the reference names one). Required.
	Dir string
	// Offline uses a file already in Dir only.
	Offline bool
	// Progress, Client, Attempts, RetryDelay and StallTimeout are those of
	// Options.
	Progress     func(Progress)
	Client       *http.Client
	Attempts     int
	RetryDelay   time.Duration
	StallTimeout time.Duration
}

// OCIRef is a parsed model reference of an OCI registry.
type OCIRef struct {
	Registry string // base URL, e.g. DefaultOCIRegistry
	Host     string // the host the reference named, "" for the default registry
	Repo     string // "namespace/model"
	Tag      string
}

// ParseOCIRef reads "[host[:port]/][<namespace>/]<model>[:tag]".
func ParseOCIRef(ref string) (OCIRef, error) {
	r := OCIRef{Registry: DefaultOCIRegistry}
	bad := func(why string) (OCIRef, error) {
		return OCIRef{}, errf(CodeInvalid, ref, "", "invalid OCI reference: %s", why)
	}
	if ref == "" || len(ref) > 512 || strings.ContainsAny(ref, " \t\n\\?#@") {
		return bad("want [<namespace>/]<model>[:tag]")
	}
	rest := ref
	if first, after, ok := strings.Cut(ref, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		host, _, err := net.SplitHostPort(first)
		if err != nil {
			host = first
		}
		scheme := "https"
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			scheme = "http"
		}
		r.Registry, r.Host, rest = scheme+"://"+first, first, after
	}
	r.Repo, r.Tag = rest, "latest"
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		r.Repo, r.Tag = rest[:i], rest[i+1:]
	}
	if !strings.Contains(r.Repo, "/") {
		r.Repo = "ai/" + r.Repo
	}
	if !ociRepo.MatchString(r.Repo) {
		return bad("repository " + r.Repo)
	}
	if !ociTag.MatchString(r.Tag) {
		return bad("tag " + r.Tag)
	}
	return r, nil
}

var (
	ociRepo   = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+$`)
	ociTag    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	ociDigest = regexp.MustCompile(`^sha256:[a-fA-F0-9]{64}$`)
	// ociChallengeParam is one key="value" of a WWW-Authenticate challenge.
	ociChallengeParam = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// FileName is the file the model is kept in.
func (r OCIRef) FileName() string {
	name := strings.ReplaceAll(r.Repo, "/", "_") + "_" + r.Tag + ".gguf"
	if r.Host != "" {
		name = strings.NewReplacer(":", "_", ".", "_").Replace(r.Host) + "_" + name
	}
	return name
}

// PullOCI makes the GGUF of an OCI model image local and returns its path
// (see the package's OCI notes). A file already in Dir is used as is.
// Errors are *Error: CodeInvalid (reference, manifest), CodeNotFound (no
// such repository or tag, no GGUF layer), CodeAuth, CodeChecksum (the blob
// does not match its digest), CodeNetwork, CodeOffline, CodeCanceled,
// CodeIO. Downloads resume an interrupted <file>.incomplete.
func PullOCI(ctx context.Context, ref string, o OCIOptions) (string, error) {
	r, err := ParseOCIRef(ref)
	if err != nil {
		return "", err
	}
	if o.Dir == "" {
		return "", errf(CodeInvalid, ref, "", "no folder to pull into")
	}
	p := &puller{repo: r.Repo + ":" + r.Tag, dir: o.Dir, client: o.Client, offline: o.Offline,
		o: Options{Progress: o.Progress, Attempts: o.Attempts, RetryDelay: o.RetryDelay, StallTimeout: o.StallTimeout}}
	if p.client == nil {
		p.client = &http.Client{}
	}
	p.o.Attempts = max(p.o.Attempts, 0)
	if p.o.Attempts == 0 {
		p.o.Attempts = 3
	}
	if p.o.RetryDelay == 0 {
		p.o.RetryDelay = time.Second
	}
	if p.o.StallTimeout <= 0 {
		p.o.StallTimeout = time.Minute
	}
	name := r.FileName()
	dst := filepath.Join(o.Dir, name)
	if exists(dst) {
		p.progress(Progress{File: name, Cached: true, Done: true})
		return dst, nil
	}
	if p.offline {
		return "", errf(CodeOffline, p.repo, name, "offline, and %s is not downloaded", dst)
	}
	layer, err := p.ociManifest(ctx, r)
	if err != nil {
		return "", err
	}
	digest := strings.ToLower(layer.Digest)
	p.fileURL = func(string) string { return r.Registry + "/v2/" + r.Repo + "/blobs/" + digest }
	mu, _ := ociLocks.LoadOrStore(dst, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	unlock, err := lockBlob(ctx, filepath.Join(o.Dir, ".locks", name+".lock"))
	if err != nil {
		if e := ctxErr(p.repo, name, err); e != nil {
			return "", e
		}
		return "", &Error{Code: CodeIO, Repo: p.repo, File: name, Msg: "locking the download", Err: err}
	}
	defer unlock()
	if exists(dst) {
		p.progress(Progress{File: name, Downloaded: layer.Size, Total: layer.Size, Cached: true, Done: true})
		return dst, nil
	}
	f := file{Path: name, OID: strings.TrimPrefix(digest, "sha256:"), Size: max(layer.Size, 0)}
	if err := p.download(ctx, "", f, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// ociLocks serializes the pulls of one file within the process.
var ociLocks sync.Map

type ociLayer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// ociManifest reads the manifest of r, getting a token first when the
// registry asks for one, and returns its GGUF layer.
func (p *puller) ociManifest(ctx context.Context, r OCIRef) (ociLayer, error) {
	u := r.Registry + "/v2/" + r.Repo + "/manifests/" + r.Tag
	body, err := p.ociGet(ctx, u, ociManifestAccept, true)
	if err != nil {
		return ociLayer{}, err
	}
	var m struct {
		Layers []ociLayer `json:"layers"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return ociLayer{}, &Error{Code: CodeInvalid, Repo: p.repo, Msg: "the registry answered a malformed manifest", Err: err}
	}
	for _, l := range m.Layers {
		if l.MediaType == OCIGGUFMediaType || strings.Contains(l.MediaType, "gguf") {
			if !ociDigest.MatchString(l.Digest) {
				return ociLayer{}, errf(CodeInvalid, p.repo, "", "invalid OCI digest in the manifest: %q", l.Digest)
			}
			return l, nil
		}
	}
	return ociLayer{}, errf(CodeNotFound, p.repo, "", "no GGUF layer in the manifest")
}

// ociGet GETs u with the pull token, fetching the token when the registry
// answers 401 with a Bearer challenge (once).
func (p *puller) ociGet(ctx context.Context, u, accept string, retryAuth bool) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &Error{Code: CodeInvalid, Repo: p.repo, Err: err}
	}
	p.headers(req)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if e := ctxErr(p.repo, "", ctx.Err()); e != nil {
			return nil, e
		}
		return nil, &Error{Code: CodeNetwork, Repo: p.repo, Msg: "the registry could not be reached", Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	if err != nil {
		return nil, &Error{Code: CodeNetwork, Repo: p.repo, Msg: "reading the registry's answer", Err: err}
	}
	if len(body) > maxManifest {
		return nil, errf(CodeInvalid, p.repo, "", "the registry's answer is over %d bytes", maxManifest)
	}
	if resp.StatusCode == http.StatusUnauthorized && retryAuth && p.token == "" {
		if ch := resp.Header.Get("WWW-Authenticate"); ch != "" {
			if err := p.ociToken(ctx, ch); err != nil {
				return nil, err
			}
			return p.ociGet(ctx, u, accept, false)
		}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, p.ociStatusErr(resp, body)
	}
	return body, nil
}

// ociStatusErr is the error of a registry answer, with the first message of
// its {"errors": [{"code", "message"}]}.
func (p *puller) ociStatusErr(resp *http.Response, body []byte) error {
	var je struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if json.Unmarshal(body, &je) == nil && len(je.Errors) > 0 {
		detail := strings.TrimSpace(je.Errors[0].Code + " " + je.Errors[0].Message)
		if len(detail) > 300 {
			detail = detail[:300] + "..."
		}
		msg += ": " + detail
	}
	code := CodeNetwork
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = CodeAuth
	case http.StatusNotFound:
		code = CodeNotFound
	}
	return &Error{Code: code, Repo: p.repo, Status: resp.StatusCode, Msg: msg}
}

// ociToken gets a pull token from the realm of a Bearer challenge:
// Bearer realm="...",service="...",scope="...".
func (p *puller) ociToken(ctx context.Context, challenge string) error {
	scheme, params, _ := strings.Cut(challenge, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return errf(CodeAuth, p.repo, "", "the registry asks for %s authentication", scheme)
	}
	kv := map[string]string{}
	for _, m := range ociChallengeParam.FindAllStringSubmatch(params, -1) {
		kv[strings.ToLower(m[1])] = m[2]
	}
	realm, err := url.Parse(kv["realm"])
	if err != nil || (realm.Scheme != "https" && realm.Scheme != "http") || realm.Host == "" {
		return errf(CodeAuth, p.repo, "", "the registry's token realm %q is not a URL", kv["realm"])
	}
	q := realm.Query()
	for _, k := range []string{"service", "scope"} {
		if v := kv[k]; v != "" {
			q.Set(k, v)
		}
	}
	realm.RawQuery = q.Encode()
	body, err := p.ociGet(ctx, realm.String(), "", false)
	if err != nil {
		return err
	}
	var tok struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || (tok.Token == "" && tok.AccessToken == "") {
		return errf(CodeAuth, p.repo, "", "the registry's token answer has no token")
	}
	p.token = tok.Token
	if p.token == "" {
		p.token = tok.AccessToken
	}
	return nil
}
