// Package mtmd adds images and audio to package llama, through libmtmd,
// llama.cpp's multimodal library (tools/mtmd of the pinned source).
//
// A multimodal model comes as two files: the text model, loaded with
// llama.LoadModel, and its projector (an "mmproj" GGUF), loaded with
// LoadProjector for that model. Media (images: PNG, JPEG, GIF, BMP; audio:
// WAV, MP3, FLAC) are decoded by Projector.NewMedia; a prompt marks where
// each goes with the projector's Marker; Tokenize splits it into chunks of
// text tokens and encoded media, Eval decodes them into a llama.Context,
// and Generate does both and continues with the Context's generation:
//
//	proj, err := mtmd.LoadProjector(ctx, model, "mmproj.gguf", mtmd.ProjectorOptions{})
//	if err != nil { return err }
//	defer proj.Close()
//	img, err := proj.NewMedia(pngBytes, mtmd.MediaOptions{})
//	if err != nil { return err }
//	defer img.Close()
//	prompt := "USER: " + proj.Marker() + "\nWhat is in the picture?\nASSISTANT:"
//	for piece, err := range mtmd.Generate(ctx, lctx, proj, prompt, []*mtmd.Media{img}, llama.GenerateOptions{MaxTokens: 64}) {
//		if err != nil { return err }
//		fmt.Print(piece.Text)
//	}
//
// libmtmd is not part of the prebuilt library packages: build it once with
// `go run github.com/x/llama/lib/cmd/llama-install -mtmd` (a C++ compiler
// and the pinned llama.cpp source in $LLAMA_CPP_SRC are needed), or let
// llama.Init(llama.LibraryOptions{MTMD: true}) build it. Package llama works
// without it; this package's calls return an error matching
// llama.ErrLibrary when it is missing (see Available).
//
// Errors are *llama.Error values with the codes of package llama
// (errors.Is(err, llama.ErrInvalid), llama.ErrUnsupported, ...).
package mtmd

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/x/llama"
	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/mtmdcapi"
	"github.com/x/llama/lib"
)

func errorf(code llama.ErrorCode, op, format string, args ...any) error {
	return &llama.Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)}
}

var logOnce sync.Once

// load opens libmtmd beside the loaded llama.cpp library.
func load(op string) error {
	dir, ok := llama.LibraryDir()
	if !ok {
		if err := llama.Init(llama.LibraryOptions{}); err != nil {
			return err
		}
		if dir, ok = llama.LibraryDir(); !ok {
			return errorf(llama.CodeLibrary, op, "the llama.cpp library is not loaded")
		}
	}
	path, err := lib.MTMDPath(dir)
	if err != nil {
		return &llama.Error{Code: llama.CodeLibrary, Op: op, Msg: "libmtmd is not installed beside the library in " + dir +
			": build it with `go run github.com/x/llama/lib/cmd/llama-install -mtmd` (needs a C++ compiler, " +
			"apt-get install g++, and the llama.cpp " + lib.Version + " source in $" + lib.EnvSource +
			"), or call llama.Init(llama.LibraryOptions{MTMD: true})"}
	}
	if err := mtmdcapi.Load(path); err != nil {
		return &llama.Error{Code: llama.CodeLibrary, Op: op, Err: err}
	}
	logOnce.Do(func() {
		set := func(cb uintptr) {
			mtmdcapi.LogSet(cb, 0)
			mtmdcapi.HelperLogSet(cb, 0)
		}
		bridge.SetLogHook(set)
	})
	return nil
}

// Available loads libmtmd if it is not loaded yet and reports why it
// cannot be used: nil when it can, an error matching llama.ErrLibrary that
// says how to install it when it is missing.
func Available() error { return load("mtmd") }

// DefaultMarker returns libmtmd's default media marker, the text that marks
// the place of a medium in a prompt ("<__media__>").
func DefaultMarker() (string, error) {
	if err := load("default marker"); err != nil {
		return "", err
	}
	return mtmdcapi.DefaultMarker(), nil
}

// ProjectorOptions configures LoadProjector. The zero value offloads the
// projector to a GPU when the library has one, encodes on up to four
// threads, runs a warm-up encode, uses the default marker and the image
// token limits of the file.
type ProjectorOptions struct {
	// CPUOnly keeps the projector on the CPU.
	CPUOnly bool
	// Threads is the number of threads encoding media; 0 means four, or the
	// number of CPUs when fewer.
	Threads int
	// NoWarmup skips the encode pass llama.cpp runs at load to size its
	// buffers.
	NoWarmup bool
	// Marker is the text marking media in prompts; empty means
	// DefaultMarker.
	Marker string
	// ImageMinTokens and ImageMaxTokens bound the tokens of one image for
	// projectors with dynamic resolution; 0 means the file's values.
	ImageMinTokens, ImageMaxTokens int
}

// Projector is a loaded multimodal projector (an mmproj GGUF) for one
// model: it encodes media into the model's embedding space.
//
// A Projector is safe for concurrent use; its calls that run libmtmd are
// serialized (libmtmd keeps per-projector encode state). Close frees it; it
// is idempotent, waits for a call in progress, and the model's Close closes
// the projector too. Calls after Close return an error matching
// llama.ErrClosed. Chunks and Media are independent of the Projector's
// lifetime but need an open one to be evaluated or made.
type Projector struct {
	mu     sync.Mutex
	ptr    mtmdcapi.Context
	model  *llama.Model
	path   string
	marker string
	vision bool
	audio  bool
	rate   int
	bpe    bool // the model's vocabulary is BPE: long runs are cut
	unlink func()
}

// LoadProjector loads the projector file at path for model (the text model
// it was made for: its embedding size must match). Cancelling ctx before
// the load starts returns an error; the load itself is not interruptible.
func LoadProjector(ctx context.Context, model *llama.Model, path string, opts ProjectorOptions) (*Projector, error) {
	const op = "load projector"
	if err := load(op); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errorf(llama.CodeInvalid, op, "empty projector path")
	}
	if strings.IndexByte(path, 0) >= 0 || strings.IndexByte(opts.Marker, 0) >= 0 {
		return nil, errorf(llama.CodeInvalid, op, "NUL byte in the path or marker")
	}
	if opts.Threads < 0 || opts.ImageMinTokens < 0 || opts.ImageMaxTokens < 0 {
		return nil, errorf(llama.CodeInvalid, op, "negative Threads or image token limits")
	}
	if opts.ImageMaxTokens > 0 && opts.ImageMinTokens > opts.ImageMaxTokens {
		return nil, errorf(llama.CodeInvalid, op, "ImageMinTokens %d > ImageMaxTokens %d", opts.ImageMinTokens, opts.ImageMaxTokens)
	}
	if err := checkFile(path); err != nil {
		return nil, &llama.Error{Code: llama.CodeLoad, Op: op, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &llama.Error{Code: llama.CodeCanceled, Op: op, Err: err}
	}
	var mops bridge.ModelOps
	if model != nil {
		mops = bridge.ModelOf(model)
	}
	if mops == nil {
		return nil, errorf(llama.CodeInvalid, op, "no model")
	}
	bpe := mops.BPE() // before Use: it may take the model's lock
	mptr, release, err := mops.Use(op)
	if err != nil {
		return nil, err
	}
	defer release()
	p := mtmdcapi.ContextParamsDefault()
	p.UseGPU = !opts.CPUOnly
	p.PrintTimings = false
	p.NThreads = int32(min(4, runtime.NumCPU()))
	if opts.Threads > 0 {
		p.NThreads = int32(opts.Threads)
	}
	p.Warmup = !opts.NoWarmup
	if opts.ImageMinTokens > 0 {
		p.ImageMinTokens = int32(opts.ImageMinTokens)
	}
	if opts.ImageMaxTokens > 0 {
		p.ImageMaxTokens = int32(opts.ImageMaxTokens)
	}
	var marker []byte
	if opts.Marker != "" {
		marker = append([]byte(opts.Marker), 0)
		p.MediaMarker = uintptr(unsafe.Pointer(&marker[0]))
	}
	var pin runtime.Pinner
	if marker != nil {
		pin.Pin(&marker[0])
	}
	c := mtmdcapi.InitFromFile(path, mptr, p)
	pin.Unpin()
	runtime.KeepAlive(marker)
	if c == 0 {
		return nil, errorf(llama.CodeLoad, op, "libmtmd could not load the projector %s for this model "+
			"(not an mmproj GGUF, an unknown projector type, or made for a model of another embedding size)", path)
	}
	pr := &Projector{ptr: c, model: model, path: path, marker: mtmdcapi.GetMarker(c),
		vision: mtmdcapi.SupportVision(c), audio: mtmdcapi.SupportAudio(c), rate: int(mtmdcapi.GetAudioSampleRate(c)), bpe: bpe}
	unlink, ok := mops.AddChild(pr.close)
	if !ok {
		mtmdcapi.Free(c)
		return nil, errorf(llama.CodeClosed, op, "model is closed")
	}
	pr.unlink = unlink
	return pr, nil
}

// Close frees the projector. It is idempotent.
func (p *Projector) Close() error {
	p.close()
	if p.unlink != nil {
		p.unlink()
	}
	return nil
}

func (p *Projector) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ptr != 0 {
		mtmdcapi.Free(p.ptr)
		p.ptr = 0
	}
}

// lock locks the projector for a call, reporting ErrClosed after Close.
func (p *Projector) lock(op string) error {
	if p == nil {
		return errorf(llama.CodeInvalid, op, "no projector")
	}
	p.mu.Lock()
	if p.ptr == 0 {
		p.mu.Unlock()
		return &llama.Error{Code: llama.CodeClosed, Op: op, Msg: "projector is closed"}
	}
	return nil
}

// Model returns the model the projector was loaded for.
func (p *Projector) Model() *llama.Model { return p.model }

// Path returns the file the projector was loaded from.
func (p *Projector) Path() string { return p.path }

// Marker returns the text that marks a medium's place in a prompt.
func (p *Projector) Marker() string { return p.marker }

// SupportsVision reports whether the projector encodes images.
func (p *Projector) SupportsVision() bool { return p.vision }

// SupportsAudio reports whether the projector encodes audio.
func (p *Projector) SupportsAudio() bool { return p.audio }

// AudioSampleRate returns the sample rate audio is resampled to, or -1
// when the projector has no audio encoder.
func (p *Projector) AudioSampleRate() int { return p.rate }
