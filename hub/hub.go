// Package hub pulls GGUF models from a Hugging Face hub as llama.cpp's -hf
// flag does, into the Hugging Face hub cache shared with llama.cpp and
// huggingface_hub, and lists the models of that cache.
//
// Pull returns the path to pass to llama.LoadModel; PullFiles every file
// of a pull (the parts of a split model, a multimodal projector, a preset).
// Errors are *llama.Error with Op "pull", wrapping an *Error whose Code
// says what failed.
package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/x/llama"
	ihub "github.com/x/llama/internal/hub"
)

// Options configure Pull and PullFiles. The zero value reads the
// environment as llama.cpp's -hf does and uses the defaults below.
type Options struct {
	// File names the file to pull from the repo (llama.cpp's -hff,
	// --hf-file); it overrides the quant of the reference.
	File string
	// Token is the Hugging Face access token sent as a bearer token, needed
	// for gated and private repos (llama.cpp's -hft); empty: $HF_TOKEN.
	Token string
	// Endpoint is the hub's base URL; empty: $MODEL_ENDPOINT, then
	// $HF_ENDPOINT (as llama.cpp reads them), then the public Hugging Face
	// hub.
	Endpoint string
	// Offline uses the cache only and never touches the network
	// (llama.cpp's --offline); $HF_HUB_OFFLINE=1 has the same effect. A
	// model that is not cached is then an error with code CodeOffline.
	Offline bool
	// CacheDir overrides the hub cache folder; empty: CacheDir().
	CacheDir string
	// MMProj also pulls the repo's multimodal projector (the mmproj GGUF
	// beside the model, chosen as llama.cpp chooses it) into Result.MMProj.
	// Pull ignores it.
	MMProj bool
	// MTP also pulls the model's multi-token-prediction head when the repo
	// ships it apart (an "mtp-" GGUF beside the model, the reference's
	// quant first, as llama.cpp chooses it) into Result.MTP, for
	// draft.MTPOptions.Model or engine's draft-mtp; a repo of heads alone
	// gives the head without a model. Pull ignores it.
	MTP bool
	// Progress, when not nil, is called as each file downloads (and once
	// for each file already cached). ProgressBar makes one that draws a
	// text progress bar.
	Progress func(Progress)
	// Client is the HTTP client to use; nil: a default client. It must
	// follow redirects (the hub redirects model files to its storage).
	Client *http.Client
}

// The types below are the puller's (package internal/hub), defined once
// there; each field's documentation is on the internal type and repeated
// in brief here.

// Progress reports the download of one file of a pull: File (its path in
// the repo), Downloaded (bytes on disk so far, above 0 at the start of a
// resumed download), Total (its size, 0 when unknown), Cached (it was in
// the cache: nothing was downloaded) and Done (the last report for it).
type Progress = ihub.Progress

// Result lists the files a pull put in (or found in) the cache; paths are
// inside the cache's snapshots folder. Repo is "org/repo", Tag the quant
// of the reference ("" when none), Commit the snapshot's commit. Model is
// the GGUF to load (the first part of a split model; empty for a preset
// repo or a repo of MTP heads alone), Files every part of the model in
// order, MMProj the multimodal projector (with Options.MMProj, when the
// repo has one), MTP the MTP head (with Options.MTP), and Preset the
// repo's preset.ini when it is a preset repo (models for llama-server's
// router mode): then nothing else is pulled, as with llama.cpp.
type Result = ihub.Result

// Code classifies an Error; its String names it.
type Code = ihub.Code

// Codes of an Error.
const (
	CodeUnknown  = ihub.CodeUnknown  // none of the below
	CodeInvalid  = ihub.CodeInvalid  // a malformed reference or endpoint
	CodeNotFound = ihub.CodeNotFound // no such file or quant in the repo
	CodeAuth     = ihub.CodeAuth     // 401/403: a gated or private repo (or an unknown one) without a valid token
	CodeOffline  = ihub.CodeOffline  // offline, and the cache does not hold the model
	CodeChecksum = ihub.CodeChecksum // the download does not match the sha256 the hub lists
	CodeNetwork  = ihub.CodeNetwork  // the hub is unreachable or answered an error
	CodeCanceled = ihub.CodeCanceled // the context ended the pull
	CodeIO       = ihub.CodeIO       // the cache could not be written
)

// Error is the detailed error of a pull, reachable with errors.As from the
// *llama.Error that Pull, PullFiles, CacheDir and CachedModels return. Its
// Code says what failed; Repo and File what it concerns, when known;
// Status is the hub's HTTP status when it answered one; Msg and Err say
// more. It formats as "org/repo: file: message" (the *llama.Error around
// it adds "llama: pull: "); errors.Is matches a bare &Error{Code: c} by
// code, and the context's error when the pull was canceled.
type Error = ihub.Error

// wrap makes the error of an operation: a *llama.Error of code around the
// puller's error (an *Error when the puller made it).
func wrap(code llama.ErrorCode, err error) *llama.Error {
	return &llama.Error{Code: code, Op: "pull", Err: err}
}

// Pull makes a model of a Hugging Face repo available locally, as
// llama.cpp's -hf flag does, and returns the path of the GGUF to pass to
// llama.LoadModel. ref is "org/repo" or "org/repo:quant":
//
//   - the quant (case-insensitive, e.g. Q4_K_M, q8_0, F16) picks the file
//     whose name holds it; without one, Q4_K_M, then Q8_0, then the repo's
//     first GGUF model; Options.File names a file outright;
//   - a split model (name-0000i-of-0000n.gguf) is pulled whole, and the
//     path of its first part returned;
//   - files go into the standard Hugging Face hub cache (see CacheDir):
//     models--org--repo/blobs/<sha256>, snapshots/<commit>/<file> linking
//     to them, refs/main; models downloaded by llama.cpp or
//     huggingface_hub are found there and not downloaded again;
//   - a download interrupted (a dropped connection, a killed process)
//     resumes with an HTTP Range request from the partial file
//     blobs/<sha256>.incomplete; every download is checked against the
//     sha256 the hub lists, and refused on a mismatch;
//   - when the hub cannot be reached, a cached snapshot of the repo is
//     used; with Options.Offline, only the cache is.
//
// Errors are *llama.Error with Op "pull" and code llama.CodeInvalid (bad
// reference), llama.CodeCanceled (ctx ended) or llama.CodeLoad (anything
// else), wrapping an *Error with the precise code; a preset repo is an
// error of code llama.CodeUnsupported. Pull is safe for concurrent use;
// concurrent pulls of one file in a process download it once.
func Pull(ctx context.Context, ref string, o Options) (string, error) {
	o.MMProj, o.MTP = false, false
	res, err := PullFiles(ctx, ref, o)
	if err != nil {
		return "", err
	}
	if res.Model == "" {
		return "", &llama.Error{Code: llama.CodeUnsupported, Op: "pull", Msg: ref + " is a preset repo (preset.ini), not a model: use PullFiles"}
	}
	return res.Model, nil
}

// PullFiles is Pull returning every file it pulled: the parts of a split
// model, the multimodal projector (with Options.MMProj), or the preset of
// a preset repo.
func PullFiles(ctx context.Context, ref string, o Options) (*Result, error) {
	ho := ihub.Options{File: o.File, Token: o.Token, Endpoint: o.Endpoint, Offline: o.Offline,
		CacheDir: o.CacheDir, MMProj: o.MMProj, MTP: o.MTP, Client: o.Client}
	if o.Progress != nil {
		ho.Progress = o.Progress
	}
	res, err := ihub.Pull(ctx, ref, ho)
	if err != nil {
		e := wrap(llama.CodeLoad, err)
		var he *Error
		if errors.As(e, &he) {
			switch he.Code {
			case CodeInvalid:
				e.Code = llama.CodeInvalid
			case CodeCanceled:
				e.Code = llama.CodeCanceled
			}
		}
		return nil, e
	}
	return res, nil
}

// CacheDir is the Hugging Face hub cache folder that pulls use, found as
// llama.cpp finds it: the first set of $LLAMA_CACHE, $HF_HUB_CACHE,
// $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
// then ~/.cache/huggingface/hub. (The llama.cpp library itself is cached
// elsewhere: see lib.CacheDir.)
func CacheDir() (string, error) {
	d, err := ihub.CacheDir()
	if err != nil {
		return "", wrap(llama.CodeLoad, err)
	}
	return d, nil
}

// ProgressBar returns an Options.Progress that draws one text progress bar
// per downloaded file on w (usually os.Stderr), redrawn in place with
// carriage returns and ended with a newline. Cached files draw nothing.
// The function is safe for concurrent use.
func ProgressBar(w io.Writer) func(Progress) {
	var (
		mu   sync.Mutex
		last = map[string]int{}
	)
	return func(p Progress) {
		if p.Cached {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		pct := -1
		if p.Total > 0 {
			pct = int(p.Downloaded * 100 / p.Total)
		}
		if prev, ok := last[p.File]; ok && prev == pct && !p.Done {
			return
		}
		last[p.File] = pct
		const width = 30
		bar := strings.Repeat(" ", width)
		if pct >= 0 {
			fill := min(pct*width/100, width)
			bar = strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
		}
		name := path.Base(p.File)
		if pct >= 0 {
			fmt.Fprintf(w, "\rDownloading %s [%s] %3d%% %s / %s", name, bar, pct, mib(p.Downloaded), mib(p.Total))
		} else {
			fmt.Fprintf(w, "\rDownloading %s %s", name, mib(p.Downloaded))
		}
		if p.Done {
			fmt.Fprintln(w)
			delete(last, p.File)
		}
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// CachedModel is a model of the hub cache: Repo ("org/repo") and Tag (the
// quant, upper case, e.g. "Q4_K_M"). Its String, "org/repo:TAG", pulls it
// again (offline) with Pull(ctx, m.String(), Options{Offline: true}).
type CachedModel = ihub.Cached

// CachedModels lists the models of the hub cache at dir (empty:
// CacheDir()) as llama.cpp lists them (llama-server's router offers them):
// one entry per repo and quant tag of its current snapshot, first parts of
// split models only, projectors left out, sorted.
func CachedModels(dir string) ([]CachedModel, error) {
	list, err := ihub.ListCached(dir)
	if err != nil {
		return nil, wrap(llama.CodeLoad, err)
	}
	return list, nil
}
