package llama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/x/llama/internal/hub"
)

// PullOptions configure Pull and PullFiles. The zero value reads the
// environment as llama.cpp's -hf does and uses the defaults below.
type PullOptions struct {
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
	// model that is not cached is then an error with code PullOffline.
	Offline bool
	// CacheDir overrides the hub cache folder; empty: HubCacheDir().
	CacheDir string
	// MMProj also pulls the repo's multimodal projector (the mmproj GGUF
	// beside the model, chosen as llama.cpp chooses it) into
	// PullResult.MMProj. Pull ignores it.
	MMProj bool
	// Progress, when not nil, is called as each file downloads (and once
	// for each file already cached). PullProgressBar makes one that draws a
	// text progress bar.
	Progress func(PullProgress)
	// Client is the HTTP client to use; nil: a default client. It must
	// follow redirects (the hub redirects model files to its storage).
	Client *http.Client
}

// PullProgress reports the download of one file of a pull.
type PullProgress struct {
	File       string // the file's path in the repo
	Downloaded int64  // bytes on disk so far (above 0 at the start of a resumed download)
	Total      int64  // the file's size, 0 when unknown
	Cached     bool   // the file was in the cache: nothing was downloaded
	Done       bool   // the last report for this file
}

// PullResult lists the files a pull put in (or found in) the cache. Paths
// are inside the cache's snapshots folder.
type PullResult struct {
	Repo   string // "org/repo"
	Tag    string // the quant of the reference, "" when none
	Commit string // the commit of the snapshot the files come from
	// Model is the GGUF to load: the first part of a split model. Empty for
	// a preset repo.
	Model string
	// Files are every part of the model in order (just Model when the
	// model is not split); llama.cpp loads the other parts from the first.
	Files []string
	// MMProj is the multimodal projector, when PullOptions.MMProj was set
	// and the repo has one.
	MMProj string
	// Preset is the repo's preset.ini (models for llama-server's router
	// mode, --models-preset) when the repo is a preset repo; then nothing
	// else is pulled, as with llama.cpp.
	Preset string
}

// PullError is the detailed error of a pull, reachable with errors.As
// from the *Error that Pull and PullFiles return. Its Code says what
// failed; Status is the hub's HTTP status when it answered one.
type PullError = hub.Error

// PullErrorCode classifies a PullError.
type PullErrorCode = hub.Code

// Codes of a PullError.
const (
	PullInvalid  PullErrorCode = hub.CodeInvalid  // a malformed reference or endpoint
	PullNotFound PullErrorCode = hub.CodeNotFound // no such file or quant in the repo
	PullAuth     PullErrorCode = hub.CodeAuth     // 401/403: a gated or private repo (or an unknown one) without a valid token
	PullOffline  PullErrorCode = hub.CodeOffline  // offline, and the cache does not hold the model
	PullChecksum PullErrorCode = hub.CodeChecksum // the download does not match the sha256 the hub lists
	PullNetwork  PullErrorCode = hub.CodeNetwork  // the hub is unreachable or answered an error
	PullCanceled PullErrorCode = hub.CodeCanceled // the context ended the pull
	PullIO       PullErrorCode = hub.CodeIO       // the cache could not be written
)

// Pull makes a model of a Hugging Face repo available locally, as
// llama.cpp's -hf flag does, and returns the path of the GGUF to pass to
// LoadModel. ref is "org/repo" or "org/repo:quant":
//
//   - the quant (case-insensitive, e.g. Q4_K_M, q8_0, F16) picks the file
//     whose name holds it; without one, Q4_K_M, then Q8_0, then the repo's
//     first GGUF model; PullOptions.File names a file outright;
//   - a split model (name-0000i-of-0000n.gguf) is pulled whole, and the
//     path of its first part returned;
//   - files go into the standard Hugging Face hub cache (see HubCacheDir):
//     models--org--repo/blobs/<sha256>, snapshots/<commit>/<file> linking
//     to them, refs/main; models downloaded by llama.cpp or
//     huggingface_hub are found there and not downloaded again;
//   - a download interrupted (a dropped connection, a killed process)
//     resumes with an HTTP Range request from the partial file
//     blobs/<sha256>.incomplete; every download is checked against the
//     sha256 the hub lists, and refused on a mismatch;
//   - when the hub cannot be reached, a cached snapshot of the repo is
//     used; with PullOptions.Offline, only the cache is.
//
// Errors are *Error with Op "pull" and code CodeInvalid (bad reference),
// CodeCanceled (ctx ended) or CodeLoad (anything else), wrapping a
// *PullError with the precise code. Pull is safe for concurrent use;
// concurrent pulls of one file in a process download it once.
func Pull(ctx context.Context, ref string, o PullOptions) (string, error) {
	o.MMProj = false
	res, err := PullFiles(ctx, ref, o)
	if err != nil {
		return "", err
	}
	if res.Model == "" {
		return "", &Error{Code: CodeUnsupported, Op: "pull", Msg: ref + " is a preset repo (preset.ini), not a model: use PullFiles"}
	}
	return res.Model, nil
}

// PullFiles is Pull returning every file it pulled: the parts of a split
// model, the multimodal projector (with PullOptions.MMProj), or the
// preset of a preset repo.
func PullFiles(ctx context.Context, ref string, o PullOptions) (*PullResult, error) {
	ho := hub.Options{File: o.File, Token: o.Token, Endpoint: o.Endpoint, Offline: o.Offline,
		CacheDir: o.CacheDir, MMProj: o.MMProj, Client: o.Client}
	if o.Progress != nil {
		ho.Progress = func(p hub.Progress) { o.Progress(PullProgress(p)) }
	}
	res, err := hub.Pull(ctx, ref, ho)
	if err != nil {
		code := CodeLoad
		var pe *PullError
		if errors.As(err, &pe) {
			switch pe.Code {
			case hub.CodeInvalid:
				code = CodeInvalid
			case hub.CodeCanceled:
				code = CodeCanceled
			}
		}
		return nil, &Error{Code: code, Op: "pull", Err: err}
	}
	r := PullResult(*res)
	return &r, nil
}

// HubCacheDir is the Hugging Face hub cache folder that pulls use, found
// as llama.cpp finds it: the first set of $LLAMA_CACHE, $HF_HUB_CACHE,
// $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
// then ~/.cache/huggingface/hub. (The llama.cpp library itself is cached
// elsewhere: see lib.CacheDir.)
func HubCacheDir() (string, error) {
	d, err := hub.CacheDir()
	if err != nil {
		return "", &Error{Code: CodeLoad, Op: "pull", Err: err}
	}
	return d, nil
}

// PullProgressBar returns a PullOptions.Progress that draws one text
// progress bar per downloaded file on w (usually os.Stderr), redrawn in
// place with carriage returns and ended with a newline. Cached files draw
// nothing. The function is safe for concurrent use.
func PullProgressBar(w io.Writer) func(PullProgress) {
	var (
		mu   sync.Mutex
		last = map[string]int{}
	)
	return func(p PullProgress) {
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

// CachedModel is a model of the hub cache, pulled again (offline) with
// Pull(ctx, m.String(), PullOptions{Offline: true}).
type CachedModel struct {
	Repo string // "org/repo"
	Tag  string // the quant, upper case, e.g. "Q4_K_M"
}

// String is "org/repo:TAG".
func (m CachedModel) String() string { return m.Repo + ":" + m.Tag }

// CachedModels lists the models of the hub cache at dir (empty:
// HubCacheDir()) as llama.cpp lists them (llama-server's router offers
// them): one entry per repo and quant tag of its current snapshot, first
// parts of split models only, projectors left out, sorted.
func CachedModels(dir string) ([]CachedModel, error) {
	list, err := hub.ListCached(dir)
	if err != nil {
		return nil, &Error{Code: CodeLoad, Op: "pull", Err: err}
	}
	out := make([]CachedModel, len(list))
	for i, c := range list {
		out[i] = CachedModel{Repo: c.Repo, Tag: c.Tag}
	}
	return out, nil
}
