// Package hub pulls GGUF models from a Hugging Face compatible hub into the
// standard hub cache, the way llama.cpp's -hf flag does, so that files
// downloaded by llama.cpp, huggingface_hub or this package are shared.
//
// The cache layout (under CacheDir):
//
//	models--org--repo/refs/main                  the commit main points at
//	models--org--repo/blobs/<sha256 or git oid>  the file contents
//	models--org--repo/blobs/<oid>.incomplete     a download in progress (resumed with Range)
//	models--org--repo/snapshots/<commit>/<path>  relative symlinks to the blobs
//
// Files are listed with the hub API (GET {endpoint}api/models/{repo}/refs,
// then .../tree/{commit}?recursive=true) and downloaded from
// {endpoint}{repo}/resolve/{commit}/{path}.
package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// Environment variables read by this package.
const (
	EnvModelEndpoint = "MODEL_ENDPOINT" // the hub's base URL (llama.cpp's name)
	EnvHFEndpoint    = "HF_ENDPOINT"    // the hub's base URL, read when MODEL_ENDPOINT is unset
	EnvToken         = "HF_TOKEN"       // the access token for gated and private repos
	EnvOffline       = "HF_HUB_OFFLINE" // "1", "true", "yes" or "on": use the cache only
)

// DefaultEndpoint is the hub used when neither MODEL_ENDPOINT nor
// HF_ENDPOINT is set.
const DefaultEndpoint = "https://huggingface.co/"

// Options configure a Pull. The zero value reads the environment and uses
// the defaults described on each field.
type Options struct {
	// File names the file in the repo to pull (llama.cpp's --hf-file); it
	// overrides the quant given in the reference.
	File string
	// Token is the bearer token sent to the hub; empty: $HF_TOKEN.
	Token string
	// Endpoint is the hub's base URL; empty: $MODEL_ENDPOINT, then
	// $HF_ENDPOINT, then DefaultEndpoint.
	Endpoint string
	// Offline uses the cache only, never the network. $HF_HUB_OFFLINE set
	// to a true value has the same effect.
	Offline bool
	// CacheDir overrides the hub cache folder (default: see CacheDir).
	CacheDir string
	// MMProj also pulls the multimodal projector beside the model, when the
	// repo has one.
	MMProj bool
	// MTP also pulls the model's multi-token-prediction head shipped
	// beside it (an "mtp-" GGUF, chosen as llama.cpp chooses it: the
	// quant of the reference first), when the repo has one. A repo with
	// heads and no model gives the head alone (Result.Model empty).
	MTP bool
	// Progress, when not nil, is called as files are downloaded or found in
	// the cache. Calls come from the pulling goroutine, one file at a time.
	Progress func(Progress)
	// Client is the HTTP client; nil: a client without timeouts that
	// follows redirects (it must follow redirects: the hub redirects large
	// files to its storage).
	Client *http.Client
	// Attempts is how many times a download is tried before giving up
	// (dropped connections resume where they stopped); 0: 3.
	Attempts int
	// RetryDelay is the wait before the second attempt, doubled for each
	// later one; 0: 1 second; negative: no wait.
	RetryDelay time.Duration
	// StallTimeout ends an attempt that receives nothing for that long (the
	// next attempt resumes it); 0: 60 seconds.
	StallTimeout time.Duration
}

// Progress reports the download of one file.
type Progress struct {
	File       string // the path of the file in the repo
	Downloaded int64  // bytes on disk so far (a resumed download starts above 0)
	Total      int64  // the file's size, 0 when unknown
	Cached     bool   // the file was already in the cache: nothing is downloaded
	Done       bool   // the last report for this file
}

// Result lists what a Pull put in (or found in) the cache.
type Result struct {
	Repo   string // "org/repo"
	Tag    string // the quant asked for, "" when none
	Commit string // the snapshot's commit, "" when unknown
	// Model is the path of the model file to load: the first part of a
	// split model. Empty when the repo is a preset repo (see Preset).
	Model string
	// Files are the paths of every part of the model, in order (one entry
	// for a model that is not split).
	Files []string
	// MMProj is the path of the multimodal projector, when Options.MMProj
	// was set and the repo has one.
	MMProj string
	// MTP is the path of the MTP head, when Options.MTP was set and the
	// repo has one.
	MTP string
	// Preset is the path of the repo's preset.ini, when the repo is a
	// preset repo for llama-server's router mode: then only that file is
	// pulled, as llama.cpp does.
	Preset string
}

// Code classifies an Error.
type Code int

// Error codes.
const (
	CodeUnknown  Code = iota
	CodeInvalid       // the reference or an option is malformed
	CodeNotFound      // no such repo, file or quant
	CodeAuth          // the hub refused the token (or its absence): gated or private repo
	CodeOffline       // offline, and the cache does not hold what is needed
	CodeChecksum      // a downloaded file does not match its checksum
	CodeNetwork       // the hub could not be reached or answered an error
	CodeCanceled      // the context ended the pull
	CodeIO            // the cache could not be written
)

var codeNames = [...]string{"unknown", "invalid reference", "not found", "unauthorized",
	"not in cache (offline)", "checksum mismatch", "network", "canceled", "cache I/O"}

// String names the code.
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Error is the error of a Pull. Reach it with errors.As; errors.Is matches
// a bare &Error{Code: c} by code, and the context's error when the pull
// was canceled.
type Error struct {
	Code   Code
	Repo   string // the repo, when known
	File   string // the file in the repo, when the error concerns one
	Status int    // the HTTP status, when the hub answered one
	Msg    string
	Err    error // the underlying error, if any
}

// Error formats the error as "org/repo: file: message" (the llama package
// wraps it in its own prefix).
func (e *Error) Error() string {
	var b strings.Builder
	if e.Repo != "" {
		b.WriteString(e.Repo + ": ")
	}
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	switch {
	case e.Msg != "" && e.Err != nil:
		b.WriteString(e.Msg + ": " + e.Err.Error())
	case e.Msg != "":
		b.WriteString(e.Msg)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		b.WriteString(e.Code.String())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches a bare Error of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Repo == "" && t.File == "" && t.Msg == "" && t.Err == nil && t.Status == 0 && t.Code == e.Code
}

func errf(code Code, repo, file, format string, args ...any) *Error {
	return &Error{Code: code, Repo: repo, File: file, Msg: fmt.Sprintf(format, args...)}
}

// Endpoint is the hub's base URL with a trailing slash: o.Endpoint, or
// $MODEL_ENDPOINT, or $HF_ENDPOINT, or DefaultEndpoint.
func Endpoint(o string) string {
	e := o
	if e == "" {
		e = os.Getenv(EnvModelEndpoint)
	}
	if e == "" {
		e = os.Getenv(EnvHFEndpoint)
	}
	if e == "" {
		e = DefaultEndpoint
	}
	if !strings.HasSuffix(e, "/") {
		e += "/"
	}
	return e
}

// OfflineFromEnv reports whether $HF_HUB_OFFLINE asks for offline mode.
func OfflineFromEnv() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(EnvOffline))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// Pull resolves ref ("org/repo" or "org/repo:quant") to files, downloads
// those the cache lacks, and returns their paths. See Options for the
// choices; the quant and file selection follow llama.cpp's -hf.
func Pull(ctx context.Context, ref string, o Options) (*Result, error) {
	repo, tag, err := SplitRef(ref)
	if err != nil {
		return nil, err
	}
	p, err := newPuller(repo, o)
	if err != nil {
		return nil, err
	}
	return p.pull(ctx, tag)
}

// ctxErr wraps a context's error.
func ctxErr(repo, file string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: CodeCanceled, Repo: repo, File: file, Err: err}
	}
	return nil
}
