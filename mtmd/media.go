package mtmd

import (
	"bytes"
	"encoding/binary"
	"image"
	_ "image/gif"  // GIF headers for the size check
	_ "image/jpeg" // JPEG headers for the size check
	_ "image/png"  // PNG headers for the size check
	"os"
	"runtime"
	"sync"

	"github.com/x/llama"
	"github.com/x/llama/internal/mtmdcapi"
)

// Kind says what a medium is.
type Kind int

// Kinds of media.
const (
	KindImage Kind = iota + 1
	KindAudio
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindImage:
		return "image"
	case KindAudio:
		return "audio"
	}
	return "unknown"
}

// Default limits of MediaOptions.
const (
	DefaultMaxBytes  = 64 << 20
	DefaultMaxPixels = 8192 * 8192
)

// MediaOptions bounds what NewMedia accepts. The zero value takes the
// defaults noted on each field.
type MediaOptions struct {
	// MaxBytes is the largest encoded file accepted; 0 means
	// DefaultMaxBytes.
	MaxBytes int
	// MaxPixels is the largest image (width times height) accepted, checked
	// on the file's header before anything is decoded; 0 means
	// DefaultMaxPixels.
	MaxPixels int
	// ID names the medium for libmtmd's caches (the prompt cache of a
	// server tells media apart by it); empty means the SHA-256 of the file.
	ID string
}

// Media is one decoded image or audio clip, ready to tokenize. It owns C
// memory: Close frees it (idempotent). It is safe for concurrent use: it
// is only read once made, and Close waits for a Tokenize using it.
type Media struct {
	mu     sync.RWMutex
	ptr    mtmdcapi.Bitmap
	kind   Kind
	nx, ny int
	id     string
}

// Sniff tells from the first bytes of a file whether NewMedia can take it,
// and as what: KindImage for PNG, JPEG, GIF and BMP, KindAudio for WAV, MP3
// and FLAC, 0 otherwise. It does not check that the rest of the file is
// well formed.
func Sniff(data []byte) Kind {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")), bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}),
		bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")),
		len(data) >= 26 && bytes.HasPrefix(data, []byte("BM")):
		return KindImage
	case len(data) >= 12 && bytes.HasPrefix(data, []byte("RIFF")) && string(data[8:12]) == "WAVE",
		bytes.HasPrefix(data, []byte("ID3")), len(data) >= 12 && data[0] == 0xff && data[1]&0xe0 == 0xe0,
		bytes.HasPrefix(data, []byte("fLaC")):
		return KindAudio
	}
	return 0
}

// imageSize reads an image's dimensions from its header.
func imageSize(data []byte) (int, int, error) {
	if bytes.HasPrefix(data, []byte("BM")) {
		w := int32(binary.LittleEndian.Uint32(data[18:22]))
		h := int32(binary.LittleEndian.Uint32(data[22:26]))
		if h < 0 {
			h = -h
		}
		if w <= 0 || h <= 0 {
			return 0, 0, errorf(llama.CodeInvalid, "media", "BMP header has a size of %dx%d", w, h)
		}
		return int(w), int(h), nil
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, &llama.Error{Code: llama.CodeInvalid, Op: "media", Msg: "malformed image", Err: err}
	}
	return cfg.Width, cfg.Height, nil
}

// NewMedia decodes an image (PNG, JPEG, GIF, BMP) or audio clip (WAV, MP3,
// FLAC; resampled to the projector's rate) for this projector. Data of
// another type, a malformed file, an image larger than opts.MaxPixels or a
// file larger than opts.MaxBytes is an error matching llama.ErrInvalid, and
// a kind the projector cannot encode one matching llama.ErrUnsupported.
func (p *Projector) NewMedia(data []byte, opts MediaOptions) (*Media, error) {
	const op = "media"
	maxBytes, maxPixels := opts.MaxBytes, opts.MaxPixels
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
	}
	if len(data) == 0 {
		return nil, errorf(llama.CodeInvalid, op, "empty file")
	}
	if len(data) > maxBytes {
		return nil, errorf(llama.CodeInvalid, op, "file of %d bytes exceeds the limit of %d bytes", len(data), maxBytes)
	}
	kind := Sniff(data)
	switch kind {
	case KindImage:
		w, h, err := imageSize(data)
		if err != nil {
			return nil, err
		}
		if int64(w)*int64(h) > int64(maxPixels) {
			return nil, errorf(llama.CodeInvalid, op, "image of %dx%d pixels exceeds the limit of %d pixels", w, h, maxPixels)
		}
		if !p.vision {
			return nil, errorf(llama.CodeUnsupported, op, "this projector does not encode images")
		}
	case KindAudio:
		if !p.audio {
			return nil, errorf(llama.CodeUnsupported, op, "this projector does not encode audio")
		}
	default:
		return nil, errorf(llama.CodeInvalid, op, "not an image (PNG, JPEG, GIF, BMP) or audio file (WAV, MP3, FLAC)")
	}
	if err := p.lock(op); err != nil {
		return nil, err
	}
	defer p.mu.Unlock()
	opt := mtmdcapi.HelperInitOptDefault()
	w := mtmdcapi.HelperBitmapInitFromBuf(p.ptr, &data[0], uintptr(len(data)), false, opt)
	runtime.KeepAlive(data)
	if w.Video != 0 {
		mtmdcapi.HelperVideoFree(w.Video)
		if w.Bitmap != 0 {
			mtmdcapi.BitmapFree(w.Bitmap)
		}
		return nil, errorf(llama.CodeUnsupported, op, "video is not supported")
	}
	if w.Bitmap == 0 {
		return nil, errorf(llama.CodeInvalid, op, "libmtmd could not decode the %s", kind)
	}
	return newMedia(w.Bitmap, opts.ID), nil
}

// NewMediaFile reads a file and calls NewMedia.
func (p *Projector) NewMediaFile(path string, opts MediaOptions) (*Media, error) {
	if err := checkFile(path); err != nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "media", Err: err}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &llama.Error{Code: llama.CodeInvalid, Op: "media", Err: err}
	}
	return p.NewMedia(b, opts)
}

// NewImage makes an image from raw RGB pixels (3 bytes a pixel, rows top
// to bottom). id names it for caches; empty leaves it unnamed.
func NewImage(width, height int, rgb []byte, id string) (*Media, error) {
	const op = "image"
	if err := load(op); err != nil {
		return nil, err
	}
	if width <= 0 || height <= 0 || width > 1<<16 || height > 1<<16 {
		return nil, errorf(llama.CodeInvalid, op, "invalid size %dx%d", width, height)
	}
	if len(rgb) != width*height*3 {
		return nil, errorf(llama.CodeInvalid, op, "%d bytes of pixels for %dx%d RGB (want %d)", len(rgb), width, height, width*height*3)
	}
	b := mtmdcapi.BitmapInit(uint32(width), uint32(height), &rgb[0])
	runtime.KeepAlive(rgb)
	if b == 0 {
		return nil, errorf(llama.CodeInvalid, op, "libmtmd refused the image")
	}
	return newMedia(b, id), nil
}

// NewAudio makes an audio clip from mono PCM samples in [-1, 1] at the
// projector's AudioSampleRate. id names it for caches.
func NewAudio(samples []float32, id string) (*Media, error) {
	const op = "audio"
	if err := load(op); err != nil {
		return nil, err
	}
	if len(samples) == 0 {
		return nil, errorf(llama.CodeInvalid, op, "no samples")
	}
	b := mtmdcapi.BitmapInitFromAudio(uintptr(len(samples)), &samples[0])
	runtime.KeepAlive(samples)
	if b == 0 {
		return nil, errorf(llama.CodeInvalid, op, "libmtmd refused the audio")
	}
	return newMedia(b, id), nil
}

func newMedia(b mtmdcapi.Bitmap, id string) *Media {
	if id != "" {
		mtmdcapi.BitmapSetID(b, cleanID(id))
	}
	m := &Media{ptr: b, kind: KindImage, id: mtmdcapi.BitmapGetID(b)}
	if mtmdcapi.BitmapIsAudio(b) {
		m.kind = KindAudio
		m.nx = int(mtmdcapi.BitmapGetNBytes(b) / 4)
	} else {
		m.nx, m.ny = int(mtmdcapi.BitmapGetNx(b)), int(mtmdcapi.BitmapGetNy(b))
	}
	return m
}

func cleanID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == 0 {
			b[i] = '_'
		}
	}
	return string(b)
}

// Kind says whether the medium is an image or audio.
func (m *Media) Kind() Kind { return m.kind }

// Size returns an image's width and height in pixels, or an audio clip's
// number of samples and 0.
func (m *Media) Size() (int, int) { return m.nx, m.ny }

// ID returns the medium's id (by default the SHA-256 of its file).
func (m *Media) ID() string { return m.id }

// Close frees the medium. It is idempotent.
func (m *Media) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr != 0 {
		mtmdcapi.BitmapFree(m.ptr)
		m.ptr = 0
	}
	return nil
}

func checkFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return &os.PathError{Op: "open", Path: path, Err: errIsDir}
	}
	return nil
}

type dirError struct{}

func (dirError) Error() string { return "is a folder" }

var errIsDir error = dirError{}
