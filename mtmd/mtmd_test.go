//go:build mtmd

package mtmd_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/mtmd"
)

// fixture is stories260K with a tiny random LLaVA-style projector written
// for it, and a context.
type fixture struct {
	model *llama.Model
	proj  *mtmd.Projector
	lctx  *llama.Context
	path  string
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, false) }

// newFixtureWith makes the fixture, with an audio encoder in the projector
// (and a context of 2048 for its 750 tokens a chunk) when audio is set.
func newFixtureWith(t *testing.T, audio bool) *fixture {
	t.Helper()
	testenv.MTMD(t)
	ctx := context.Background()
	model := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{})
	info, err := model.Info()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mmproj-tiny.gguf")
	require.NoError(t, gguf.WriteTinyProjector(path, gguf.TinyProjectorOptions{TextEmbd: info.EmbeddingSize, Seed: 7, Audio: audio}))
	proj, err := mtmd.LoadProjector(ctx, model, path, mtmd.ProjectorOptions{CPUOnly: true, Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { proj.Close() })
	n := 512
	if audio {
		n = 2048
	}
	lctx := modeltest.NewContext(t, model, llama.ContextOptions{ContextSize: n, Threads: 1})
	return &fixture{model: model, proj: proj, lctx: lctx, path: path}
}

// pngOf draws a test image: a pattern chosen by kind, size w x h.
func pngOf(t testing.TB, kind string, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			var c color.RGBA
			switch kind {
			case "red":
				c = color.RGBA{R: 230, G: uint8(20 + x%16), B: 10, A: 255}
			case "checker":
				if (x/4+y/4)%2 == 0 {
					c = color.RGBA{R: 255, G: 255, B: 255, A: 255}
				} else {
					c = color.RGBA{A: 255}
				}
			default: // gradient
				c = color.RGBA{R: uint8(x * 255 / w), G: uint8(y * 255 / h), B: 128, A: 255}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func jpegOf(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{R: uint8(x), G: uint8(255 - y), B: uint8(x ^ y), A: 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, jpeg.Encode(&b, img, nil))
	return b.Bytes()
}

// pngHeaderClaiming returns a PNG whose (valid, CRC-checked) header claims
// w x h pixels and whose data is truncated.
func pngHeaderClaiming(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// wav returns a short mono 16-bit WAV of a sine tone.
func wav(samples int) []byte { return wavTone(samples, 10) }

// wavTone returns a mono 16-bit WAV at 16 kHz of a sine of the given period
// in samples.
func wavTone(samples int, period float64) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(36+2*samples))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(16000), uint32(32000), uint16(2), uint16(16)} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(2*samples))
	for i := range samples {
		binary.Write(&b, binary.LittleEndian, int16(8000*math.Sin(float64(i)/period)))
	}
	return b.Bytes()
}

func generate(t *testing.T, f *fixture, prompt string, media ...[]byte) string {
	t.Helper()
	var ms []*mtmd.Media
	for _, data := range media {
		m, err := f.proj.NewMedia(data, mtmd.MediaOptions{})
		require.NoError(t, err)
		defer m.Close()
		ms = append(ms, m)
	}
	var out strings.Builder
	for piece, err := range mtmd.Generate(context.Background(), f.lctx, f.proj, prompt, ms, llama.GenerateOptions{MaxTokens: 24}) {
		require.NoError(t, err)
		out.WriteString(piece.Text)
	}
	return out.String()
}

// TestGenerateWithImage is the end-to-end test: a prompt with an image in,
// generation out. The same prompt with two different images gives
// different greedy outputs, the same image gives the same output twice,
// and a prompt without media gives exactly the text-only output of
// llama.Context.Generate.
func TestGenerateWithImage(t *testing.T) {
	f := newFixture(t)
	require.True(t, f.proj.SupportsVision())
	require.False(t, f.proj.SupportsAudio())
	marker := f.proj.Marker()
	prompt := "Once upon a time " + marker + " there was"

	red := generate(t, f, prompt, pngOf(t, "red", 40, 40))
	checker := generate(t, f, prompt, pngOf(t, "checker", 64, 48))
	redAgain := generate(t, f, prompt, pngOf(t, "red", 40, 40))
	jpg := generate(t, f, prompt, jpegOf(t, 50, 50))
	t.Logf("red: %q\nchecker: %q\njpeg: %q", red, checker, jpg)
	assert.NotEmpty(t, red)
	assert.NotEqual(t, red, checker, "two different images gave the same greedy output")
	assert.Equal(t, red, redAgain, "the same image gave different greedy outputs")

	textPrompt := "Once upon a time there was"
	withoutMedia := generate(t, f, textPrompt)
	var want strings.Builder
	for piece, err := range f.lctx.Generate(context.Background(), textPrompt, llama.GenerateOptions{MaxTokens: 24}).Seq() {
		require.NoError(t, err)
		want.WriteString(piece.Text)
	}
	assert.Equal(t, want.String(), withoutMedia)
	assert.NotEqual(t, withoutMedia, red)
}

func TestTokenizeChunks(t *testing.T) {
	f := newFixture(t)
	img, err := f.proj.NewMedia(pngOf(t, "gradient", 33, 17), mtmd.MediaOptions{})
	require.NoError(t, err)
	defer img.Close()
	w, h := img.Size()
	assert.Equal(t, [2]int{33, 17}, [2]int{w, h})
	assert.Equal(t, mtmd.KindImage, img.Kind())
	assert.Len(t, img.ID(), 64, "default id is the SHA-256 of the file")

	chunks, err := f.proj.Tokenize("Hello "+f.proj.Marker()+" world", []*mtmd.Media{img}, mtmd.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	defer chunks.Close()
	require.Equal(t, 3, chunks.Len())
	types := []mtmd.ChunkType{chunks.Chunk(0).Type, chunks.Chunk(1).Type, chunks.Chunk(2).Type}
	assert.Equal(t, []mtmd.ChunkType{mtmd.ChunkText, mtmd.ChunkImage, mtmd.ChunkText}, types)
	// 32x32 images in patches of 8: 16 tokens, one position each.
	assert.Equal(t, 16, chunks.Chunk(1).NTokens)
	assert.Equal(t, 16, chunks.Chunk(1).NPos)
	assert.Equal(t, img.ID(), chunks.Chunk(1).ID)
	hello, err := f.model.Tokenize("Hello ", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	assert.Equal(t, hello, chunks.Chunk(0).Tokens)
	total := 0
	for _, c := range chunks.All() {
		total += c.NPos
	}
	assert.Equal(t, total, chunks.Positions())

	next, err := f.proj.Eval(context.Background(), f.lctx, chunks, mtmd.EvalOptions{Pos: 0, Seq: 0, LogitsLast: true})
	require.NoError(t, err)
	assert.Equal(t, chunks.Positions(), next)
	lo, hi, err := f.lctx.Memory().PosRange(0)
	require.NoError(t, err)
	assert.Equal(t, [2]int{0, next - 1}, [2]int{lo, hi})
}

// TestTokenizeLongRunBPE: llama.cpp's BPE pre-tokenizer overflows the
// thread's stack on a run of ~25,000 characters without white space, and
// libmtmd tokenizes a prompt's text with it: one chat with an image and
// such a run killed the process. Tokenize cuts the runs as
// llama.Model.Tokenize does, so the text chunks hold the same tokens that
// Model.Tokenize gives for the same text; the media sit where their
// markers were.
func TestTokenizeLongRunBPE(t *testing.T) {
	testenv.MTMD(t)
	ctx := context.Background()
	dir := t.TempDir()
	mp := filepath.Join(dir, "bpe-tiny.gguf")
	require.NoError(t, gguf.WriteTinyModel(mp, gguf.TinyModelOptions{
		VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-deepseek-coder.gguf"), NEmbd: 32, NHead: 2, Seed: 3}))
	model, err := llama.LoadModel(ctx, mp, llama.ModelOptions{})
	require.NoError(t, err)
	defer model.Close()
	info, err := model.Info()
	require.NoError(t, err)
	pp := filepath.Join(dir, "mmproj-tiny.gguf")
	require.NoError(t, gguf.WriteTinyProjector(pp, gguf.TinyProjectorOptions{TextEmbd: info.EmbeddingSize, Seed: 7}))
	proj, err := mtmd.LoadProjector(ctx, model, pp, mtmd.ProjectorOptions{CPUOnly: true, Threads: 1})
	require.NoError(t, err)
	defer proj.Close()
	img, err := proj.NewMedia(pngOf(t, "red", 40, 40), mtmd.MediaOptions{})
	require.NoError(t, err)
	defer img.Close()
	for _, tc := range []struct{ before, after string }{
		{"Describe: ", " " + strings.Repeat("a", 60000)},
		{strings.Repeat("é", 30000) + " ", "\n" + strings.Repeat("0123456789", 4000) + " end"},
		{"Hello ", " world"},
	} {
		chunks, err := proj.Tokenize(tc.before+proj.Marker()+tc.after, []*mtmd.Media{img}, mtmd.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
		require.NoError(t, err)
		require.Equal(t, 3, chunks.Len())
		assert.Equal(t, []mtmd.ChunkType{mtmd.ChunkText, mtmd.ChunkImage, mtmd.ChunkText},
			[]mtmd.ChunkType{chunks.Chunk(0).Type, chunks.Chunk(1).Type, chunks.Chunk(2).Type})
		want, err := model.Tokenize(tc.before, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
		require.NoError(t, err)
		assert.Equal(t, want, chunks.Chunk(0).Tokens)
		want, err = model.Tokenize(tc.after, llama.TokenizeOptions{ParseSpecial: true})
		require.NoError(t, err)
		assert.Equal(t, want, chunks.Chunk(2).Tokens)
		back, err := model.Detokenize(chunks.Chunk(2).Tokens, llama.DetokenizeOptions{})
		require.NoError(t, err)
		assert.Equal(t, tc.after, back)
		chunks.Close()
	}
}

func TestTestImageOfTheSource(t *testing.T) {
	f := newFixture(t)
	src := testenv.LlamaSrc(t)
	img, err := f.proj.NewMediaFile(filepath.Join(src, "tools", "mtmd", "test-1.jpeg"), mtmd.MediaOptions{})
	require.NoError(t, err)
	defer img.Close()
	w, h := img.Size()
	assert.Positive(t, w)
	assert.Positive(t, h)
	out := generate(t, f, "A picture: "+f.proj.Marker()+" It shows", mustRead(t, filepath.Join(src, "tools", "mtmd", "test-1.jpeg")))
	assert.NotEmpty(t, out)
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}

func TestNewMediaRejects(t *testing.T) {
	f := newFixture(t)
	good := pngOf(t, "red", 16, 16)
	tests := []struct {
		name string
		data []byte
		opts mtmd.MediaOptions
		want error
	}{
		{"empty", nil, mtmd.MediaOptions{}, llama.ErrInvalid},
		{"text", []byte("this is not an image at all"), mtmd.MediaOptions{}, llama.ErrInvalid},
		{"webp", append([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), make([]byte, 32)...), mtmd.MediaOptions{}, llama.ErrInvalid},
		{"huge image header", pngHeaderClaiming(100000, 100000), mtmd.MediaOptions{}, llama.ErrInvalid},
		{"over MaxPixels", good, mtmd.MediaOptions{MaxPixels: 100}, llama.ErrInvalid},
		{"over MaxBytes", good, mtmd.MediaOptions{MaxBytes: 10}, llama.ErrInvalid},
		{"truncated png", good[:len(good)/2], mtmd.MediaOptions{}, llama.ErrInvalid},
		{"corrupt png header", append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13, 'I', 'H', 'D', 'R'), mtmd.MediaOptions{}, llama.ErrInvalid},
		{"audio for a vision projector", wav(1600), mtmd.MediaOptions{}, llama.ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := f.proj.NewMedia(tt.data, tt.opts)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, tt.want)
			var le *llama.Error
			assert.True(t, errors.As(err, &le))
		})
	}
}

func TestPromptErrors(t *testing.T) {
	f := newFixture(t)
	img, err := f.proj.NewMedia(pngOf(t, "red", 16, 16), mtmd.MediaOptions{})
	require.NoError(t, err)
	defer img.Close()
	m := f.proj.Marker()
	tests := []struct {
		name   string
		prompt string
		media  []*mtmd.Media
		want   error
	}{
		{"marker without media", "a " + m + " b", nil, llama.ErrInvalid},
		{"media without marker", "a b", []*mtmd.Media{img}, llama.ErrInvalid},
		{"two markers one medium", m + m + " b", []*mtmd.Media{img}, llama.ErrInvalid},
		{"nil medium", "a " + m + " b", []*mtmd.Media{nil}, llama.ErrInvalid},
		{"ends with media", "a " + m, []*mtmd.Media{img}, llama.ErrInvalid},
		{"empty", "", nil, llama.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mtmd.Prepare(context.Background(), f.lctx, f.proj, tt.prompt, tt.media, llama.GenerateOptions{})
			assert.ErrorIs(t, err, tt.want)
		})
	}
	// A sequence out of range.
	_, err = mtmd.Prepare(context.Background(), f.lctx, f.proj, "a "+m+" b", []*mtmd.Media{img}, llama.GenerateOptions{Seq: 5})
	assert.ErrorIs(t, err, llama.ErrInvalid)
}

// TestCancel cancels while the first chunk decodes: the error matches
// ErrCanceled and the sequence is left empty.
func TestCancel(t *testing.T) {
	f := newFixture(t)
	img, err := f.proj.NewMedia(pngOf(t, "red", 16, 16), mtmd.MediaOptions{})
	require.NoError(t, err)
	defer img.Close()
	ctx := newDecodeStarted()
	_, err = mtmd.Prepare(ctx, f.lctx, f.proj, "Once upon a time "+f.proj.Marker()+" there", []*mtmd.Media{img}, llama.GenerateOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, llama.ErrCanceled)
	assert.ErrorIs(t, err, context.Canceled)
	lo, hi, err := f.lctx.Memory().PosRange(0)
	require.NoError(t, err)
	assert.Equal(t, [2]int{-1, -1}, [2]int{lo, hi})
}

// TestCancelBusy: a call on the context while a chunk evaluates
// finds it held (ErrBusy, the guard of Context.Decode), and the first,
// cancelled during its work, ends with ErrCanceled; then the context works.
func TestCancelBusy(t *testing.T) {
	f := newFixture(t)
	img, err := f.proj.NewMedia(pngOf(t, "red", 16, 16), mtmd.MediaOptions{})
	require.NoError(t, err)
	defer img.Close()
	prompt := "Once upon a time " + f.proj.Marker() + " there"
	prepare := func(ctx context.Context) error {
		_, err := mtmd.Prepare(ctx, f.lctx, f.proj, prompt, []*mtmd.Media{img}, llama.GenerateOptions{})
		return err
	}
	var nested error
	ctx := newDecodeStarted()
	// Not Prepare again: it would wait for the projector, which the first
	// call holds.
	ctx.OnStart = func() { nested = f.lctx.Memory().Clear() }
	err = prepare(ctx)
	assert.ErrorIs(t, err, llama.ErrCanceled)
	assert.ErrorIs(t, nested, llama.ErrBusy)
	require.NoError(t, prepare(context.Background()))
}

// newDecodeStarted returns a context.Context that is live when first
// checked and done from the moment a decode arms its abort (asks for Done).
func newDecodeStarted() *modeltest.DecodeStarted { return modeltest.NewDecodeStarted(true, nil) }

func TestCloseAndOwnership(t *testing.T) {
	f := newFixture(t)
	img, err := f.proj.NewMedia(pngOf(t, "red", 16, 16), mtmd.MediaOptions{})
	require.NoError(t, err)
	require.NoError(t, img.Close())
	require.NoError(t, img.Close(), "Close is idempotent")
	_, err = f.proj.Tokenize("a "+f.proj.Marker()+" b", []*mtmd.Media{img}, mtmd.TokenizeOptions{})
	assert.ErrorIs(t, err, llama.ErrClosed)

	// Closing the model closes its projector.
	require.NoError(t, f.model.Close())
	_, err = f.proj.NewMedia(pngOf(t, "red", 16, 16), mtmd.MediaOptions{})
	assert.ErrorIs(t, err, llama.ErrClosed)
	require.NoError(t, f.proj.Close())
	require.NoError(t, f.proj.Close())
}

func TestLoadProjectorErrors(t *testing.T) {
	testenv.MTMD(t)
	ctx := context.Background()
	model := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{})
	dir := t.TempDir()
	wrongSize := filepath.Join(dir, "wrong.gguf")
	require.NoError(t, gguf.WriteTinyProjector(wrongSize, gguf.TinyProjectorOptions{TextEmbd: 48}))
	garbage := filepath.Join(dir, "garbage.gguf")
	require.NoError(t, os.WriteFile(garbage, []byte("GGUF but not really"), 0o644))
	tests := []struct {
		name string
		path string
		want error
	}{
		{"missing file", filepath.Join(dir, "nope.gguf"), llama.ErrLoad},
		{"folder", dir, llama.ErrLoad},
		{"empty path", "", llama.ErrInvalid},
		{"not a GGUF", garbage, llama.ErrLoad},
		{"text model, not a projector", testenv.Model(t, "stories260K.gguf"), llama.ErrLoad},
		{"projector for another embedding size", wrongSize, llama.ErrLoad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := mtmd.LoadProjector(ctx, model, tt.path, mtmd.ProjectorOptions{CPUOnly: true, NoWarmup: true})
			assert.Nil(t, p)
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

// TestGenerateWithAudio runs the projector's audio encoder: WAV (made here)
// and MP3 (the source's test-2.mp3) in, text out; two different sounds give
// different greedy outputs.
func TestGenerateWithAudio(t *testing.T) {
	f := newFixtureWith(t, true)
	require.True(t, f.proj.SupportsAudio())
	require.True(t, f.proj.SupportsVision())
	assert.Equal(t, 16000, f.proj.AudioSampleRate())
	prompt := "Once upon a time " + f.proj.Marker() + " there was"
	low := generate(t, f, prompt, wavTone(16000, 40))
	high := generate(t, f, prompt, wavTone(16000, 3))
	t.Logf("low: %q, high: %q", low, high)
	assert.NotEmpty(t, low)
	assert.NotEqual(t, low, high)

	mp3 := mustRead(t, filepath.Join(testenv.LlamaSrc(t), "tools", "mtmd", "test-2.mp3"))
	m, err := f.proj.NewMedia(mp3, mtmd.MediaOptions{})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, mtmd.KindAudio, m.Kind())
	n, _ := m.Size()
	assert.Positive(t, n)
	chunks, err := f.proj.Tokenize("Listen: "+f.proj.Marker()+" ok", []*mtmd.Media{m}, mtmd.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	defer chunks.Close()
	var kinds []mtmd.ChunkType
	for _, c := range chunks.All() {
		kinds = append(kinds, c.Type)
	}
	assert.Contains(t, kinds, mtmd.ChunkAudio)
	assert.NotEmpty(t, generate(t, f, "Listen: "+f.proj.Marker()+" ok", mp3))
}

// TestRawMedia makes media from raw pixels and samples: the same pixels as
// a PNG give the same output, and malformed input is refused.
func TestRawMedia(t *testing.T) {
	f := newFixture(t)
	const w, h = 20, 12
	rgb := make([]byte, w*h*3)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		c := color.RGBA{R: uint8(i * 7), G: uint8(255 - i), B: uint8(i * 13), A: 255}
		rgb[3*i], rgb[3*i+1], rgb[3*i+2] = c.R, c.G, c.B
		img.Set(i%w, i/w, c)
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	raw, err := mtmd.NewImage(w, h, rgb, "raw")
	require.NoError(t, err)
	defer raw.Close()
	assert.Equal(t, "raw", raw.ID())
	gw, gh := raw.Size()
	assert.Equal(t, [2]int{w, h}, [2]int{gw, gh})
	prompt := "Once upon a time " + f.proj.Marker() + " there was"
	var out strings.Builder
	for piece, err := range mtmd.Generate(context.Background(), f.lctx, f.proj, prompt, []*mtmd.Media{raw}, llama.GenerateOptions{MaxTokens: 24}) {
		require.NoError(t, err)
		out.WriteString(piece.Text)
	}
	assert.Equal(t, generate(t, f, prompt, b.Bytes()), out.String())

	pcm, err := mtmd.NewAudio(make([]float32, 1600), "")
	require.NoError(t, err)
	assert.Equal(t, mtmd.KindAudio, pcm.Kind())
	require.NoError(t, pcm.Close())

	for _, tt := range []struct {
		name string
		w, h int
		rgb  []byte
	}{
		{"zero size", 0, 4, nil},
		{"negative", -1, 4, make([]byte, 12)},
		{"short pixels", 4, 4, make([]byte, 47)},
		{"long pixels", 4, 4, make([]byte, 49)},
		{"huge", 1 << 20, 1 << 20, make([]byte, 3)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := mtmd.NewImage(tt.w, tt.h, tt.rgb, "")
			assert.Nil(t, m)
			assert.ErrorIs(t, err, llama.ErrInvalid)
		})
	}
	_, err = mtmd.NewAudio(nil, "")
	assert.ErrorIs(t, err, llama.ErrInvalid)
}

// TestConcurrentUse decodes and tokenizes from several goroutines at once
// while the projector is closed under them: every call either works or
// reports ErrClosed.
func TestConcurrentUse(t *testing.T) {
	f := newFixture(t)
	data := pngOf(t, "checker", 24, 24)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range 8 {
				m, err := f.proj.NewMedia(data, mtmd.MediaOptions{})
				if err != nil {
					errs <- err
					continue
				}
				c, err := f.proj.Tokenize("a "+f.proj.Marker()+" b", []*mtmd.Media{m}, mtmd.TokenizeOptions{})
				if err == nil {
					c.Close()
				} else {
					errs <- err
				}
				m.Close()
			}
		}()
	}
	close(start)
	// Close while the goroutines run (Close waits for a call in progress).
	m, err := f.proj.NewMedia(data, mtmd.MediaOptions{})
	if err == nil {
		m.Close()
	}
	require.NoError(t, f.proj.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.ErrorIs(t, err, llama.ErrClosed)
	}
}

// BenchmarkEvalImage measures tokenizing (preprocessing) one 64x64 image
// and evaluating it (encoding with the tiny projector and decoding its 16
// embeddings into stories260K).
func BenchmarkEvalImage(b *testing.B) {
	testenv.MTMD(b)
	ctx := context.Background()
	model := modeltest.Load(b, "stories260K.gguf", llama.ModelOptions{})
	path := filepath.Join(b.TempDir(), "mmproj.gguf")
	require.NoError(b, gguf.WriteTinyProjector(path, gguf.TinyProjectorOptions{TextEmbd: 64}))
	proj, err := mtmd.LoadProjector(ctx, model, path, mtmd.ProjectorOptions{CPUOnly: true, Threads: 1})
	require.NoError(b, err)
	lctx, err := model.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
	require.NoError(b, err)
	img, err := proj.NewMedia(pngOf(b, "gradient", 64, 64), mtmd.MediaOptions{})
	require.NoError(b, err)
	defer img.Close()
	b.ResetTimer()
	for b.Loop() {
		chunks, err := proj.Tokenize(proj.Marker()+" x", []*mtmd.Media{img}, mtmd.TokenizeOptions{})
		require.NoError(b, err)
		_, err = proj.Eval(ctx, lctx, chunks, mtmd.EvalOptions{})
		require.NoError(b, err)
		chunks.Close()
		_, err = lctx.Memory().Remove(0, 0, -1)
		require.NoError(b, err)
	}
}

// TestMalformedAudio gives the audio decoder files that only look like
// audio: each is refused with ErrInvalid, nothing crashes.
func TestMalformedAudio(t *testing.T) {
	f := newFixtureWith(t, true)
	good := wavTone(1600, 8)
	bogusSize := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(bogusSize[40:], 0xfffffff0) // data chunk claims 4 GiB
	tests := []struct {
		name string
		data []byte
	}{
		{"ID3 then junk", append([]byte("ID3\x04\x00\x00\x00\x00\x00\x00"), bytes.Repeat([]byte{0x55}, 300)...)},
		{"MPEG sync then junk", append([]byte{0xff, 0xfb, 0x90, 0x00}, bytes.Repeat([]byte{0xaa}, 500)...)},
		{"fLaC then junk", append([]byte("fLaC"), bytes.Repeat([]byte{1, 2, 3}, 100)...)},
		{"WAV header only", good[:44]},
		{"short ID3", []byte("ID3ab")},
		{"RIFF WAVE without chunks", []byte("RIFF\x04\x00\x00\x00WAVE")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := f.proj.NewMedia(tt.data, mtmd.MediaOptions{})
			assert.Nil(t, m)
			assert.ErrorIs(t, err, llama.ErrInvalid)
		})
	}
	// A WAV whose data chunk claims more than the file holds decodes what
	// is there.
	m, err := f.proj.NewMedia(bogusSize, mtmd.MediaOptions{})
	require.NoError(t, err)
	defer m.Close()
	n, _ := m.Size()
	assert.Equal(t, 1600, n)
}
