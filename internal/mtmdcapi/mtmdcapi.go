// Package mtmdcapi binds the C API of libmtmd (tools/mtmd/mtmd.h and
// mtmd-helper.h of the pinned llama.cpp source) through purego, without
// cgo. Like package capi it is a thin, unchecked mirror: package mtmd checks
// every argument before a call. The C declaration is written above each
// binding; bindings_test.go holds them against the headers and
// layout_test.go holds the struct mirrors against the C compiler.
package mtmdcapi

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// C handles.
type (
	Context uintptr // mtmd_context *
	Bitmap  uintptr // mtmd_bitmap *
	Chunks  uintptr // mtmd_input_chunks *
	Chunk   uintptr // const mtmd_input_chunk *
)

// Chunk types (enum mtmd_input_chunk_type).
const (
	ChunkText  = 0
	ChunkImage = 1
	ChunkAudio = 2
)

// ContextParams mirrors struct mtmd_context_params.
type ContextParams struct {
	UseGPU           bool
	Device           uintptr
	PrintTimings     bool
	NThreads         int32
	ImageMarker      uintptr
	MediaMarker      uintptr
	FlashAttnType    int32
	Warmup           bool
	ImageMinTokens   int32
	ImageMaxTokens   int32
	CbEval           uintptr
	CbEvalUserData   uintptr
	BatchMaxTokens   int32
	ProgressCallback uintptr
	ProgressUserData uintptr
}

// InputText mirrors struct mtmd_input_text.
type InputText struct {
	Text         uintptr
	TextLen      uintptr
	AddSpecial   bool
	ParseSpecial bool
}

// InputPart mirrors struct mtmd_input_part: Text (a *InputText) or
// Bitmap is set.
type InputPart struct {
	Text   uintptr
	Bitmap Bitmap
}

// VideoInitParams mirrors struct mtmd_helper_video_init_params.
type VideoInitParams struct {
	FPSTarget           float32
	FFmpegBinDir        uintptr
	TimestampIntervalMs int64
}

// HelperInitOpt mirrors struct mtmd_helper_init_opt.
type HelperInitOpt struct {
	VideoParams VideoInitParams
}

// BitmapWrapper mirrors struct mtmd_helper_bitmap_wrapper.
type BitmapWrapper struct {
	Bitmap Bitmap
	Video  uintptr
}

var (
	// const char * mtmd_default_marker(void);
	DefaultMarker func() string
	// struct mtmd_context_params mtmd_context_params_default(void);
	ContextParamsDefault func() ContextParams
	// mtmd_context * mtmd_init_from_file(const char * mmproj_fname, const struct llama_model * text_model, const struct mtmd_context_params ctx_params);
	InitFromFile func(path string, model uintptr, params ContextParams) Context
	// void mtmd_free(mtmd_context * ctx);
	Free func(c Context)
	// bool mtmd_decode_use_mrope(const mtmd_context * ctx);
	DecodeUseMrope func(c Context) bool
	// bool mtmd_support_vision(const mtmd_context * ctx);
	SupportVision func(c Context) bool
	// bool mtmd_support_audio(const mtmd_context * ctx);
	SupportAudio func(c Context) bool
	// int mtmd_get_audio_sample_rate(const mtmd_context * ctx);
	GetAudioSampleRate func(c Context) int32
	// const char * mtmd_get_marker(const mtmd_context * ctx);
	GetMarker func(c Context) string

	// mtmd_bitmap * mtmd_bitmap_init (uint32_t nx, uint32_t ny, const unsigned char * data);
	BitmapInit func(nx, ny uint32, data *byte) Bitmap
	// mtmd_bitmap * mtmd_bitmap_init_from_audio(size_t n_samples, const float * data);
	BitmapInitFromAudio func(n uintptr, data *float32) Bitmap
	// uint32_t mtmd_bitmap_get_nx (const mtmd_bitmap * bitmap);
	BitmapGetNx func(b Bitmap) uint32
	// uint32_t mtmd_bitmap_get_ny (const mtmd_bitmap * bitmap);
	BitmapGetNy func(b Bitmap) uint32
	// size_t mtmd_bitmap_get_n_bytes(const mtmd_bitmap * bitmap);
	BitmapGetNBytes func(b Bitmap) uintptr
	// bool mtmd_bitmap_is_audio (const mtmd_bitmap * bitmap);
	BitmapIsAudio func(b Bitmap) bool
	// void mtmd_bitmap_free (mtmd_bitmap * bitmap);
	BitmapFree func(b Bitmap)
	// const char * mtmd_bitmap_get_id(const mtmd_bitmap * bitmap);
	BitmapGetID func(b Bitmap) string
	// void mtmd_bitmap_set_id(mtmd_bitmap * bitmap, const char * id);
	BitmapSetID func(b Bitmap, id string)

	// mtmd_input_chunks * mtmd_input_chunks_init(void);
	ChunksInit func() Chunks
	// size_t mtmd_input_chunks_size(const mtmd_input_chunks * chunks);
	ChunksSize func(c Chunks) uintptr
	// const mtmd_input_chunk * mtmd_input_chunks_get (const mtmd_input_chunks * chunks, size_t idx);
	ChunksGet func(c Chunks, i uintptr) Chunk
	// void mtmd_input_chunks_free(mtmd_input_chunks * chunks);
	ChunksFree func(c Chunks)
	// enum mtmd_input_chunk_type mtmd_input_chunk_get_type (const mtmd_input_chunk * chunk);
	ChunkGetType func(c Chunk) int32
	// const llama_token * mtmd_input_chunk_get_tokens_text (const mtmd_input_chunk * chunk, size_t * n_tokens_output);
	ChunkGetTokensText func(c Chunk, n *uintptr) *int32
	// size_t mtmd_input_chunk_get_n_tokens (const mtmd_input_chunk * chunk);
	ChunkGetNTokens func(c Chunk) uintptr
	// const char * mtmd_input_chunk_get_id (const mtmd_input_chunk * chunk);
	ChunkGetID func(c Chunk) string
	// llama_pos mtmd_input_chunk_get_n_pos (const mtmd_input_chunk * chunk);
	ChunkGetNPos func(c Chunk) int32

	// int32_t mtmd_tokenize(const mtmd_context * ctx, mtmd_input_chunks * output, const mtmd_input_text * text, const mtmd_bitmap * const * bitmaps, size_t n_bitmaps);
	Tokenize func(c Context, out Chunks, text *InputText, bitmaps *Bitmap, n uintptr) int32
	// int32_t mtmd_tokenize_from_parts(const mtmd_context * ctx, mtmd_input_chunks * output, const mtmd_input_part * const * parts, size_t n_parts, bool add_special);
	TokenizeFromParts func(c Context, out Chunks, parts *uintptr, n uintptr, addSpecial bool) int32
	// void mtmd_log_set(ggml_log_callback log_callback, void * user_data);
	LogSet func(cb, user uintptr)

	// struct mtmd_helper_init_opt mtmd_helper_init_opt_default(void);
	HelperInitOptDefault func() HelperInitOpt
	// void mtmd_helper_log_set(ggml_log_callback log_callback, void * user_data);
	HelperLogSet func(cb, user uintptr)
	// struct mtmd_helper_bitmap_wrapper mtmd_helper_bitmap_init_from_buf( const mtmd_context * ctx, const unsigned char * buf, size_t len, bool placeholder, struct mtmd_helper_init_opt opt);
	HelperBitmapInitFromBuf func(c Context, buf *byte, n uintptr, placeholder bool, opt HelperInitOpt) BitmapWrapper
	// size_t mtmd_helper_get_n_tokens(const mtmd_input_chunks * chunks);
	HelperGetNTokens func(c Chunks) uintptr
	// llama_pos mtmd_helper_get_n_pos(const mtmd_input_chunks * chunks);
	HelperGetNPos func(c Chunks) int32
	// int32_t mtmd_helper_eval_chunks(mtmd_context * ctx, struct llama_context * lctx, const mtmd_input_chunks * chunks, llama_pos n_past, llama_seq_id seq_id, int32_t n_batch, bool logits_last, llama_pos * new_n_past);
	HelperEvalChunks func(c Context, lctx uintptr, chunks Chunks, nPast, seq, nBatch int32, logitsLast bool, newNPast *int32) int32
	// int32_t mtmd_helper_eval_chunk_single(mtmd_context * ctx, struct llama_context * lctx, const mtmd_input_chunk * chunk, llama_pos n_past, llama_seq_id seq_id, int32_t n_batch, bool logits_last, llama_pos * new_n_past);
	HelperEvalChunkSingle func(c Context, lctx uintptr, chunk Chunk, nPast, seq, nBatch int32, logitsLast bool, newNPast *int32) int32
	// void mtmd_helper_video_free(mtmd_helper_video * ctx);
	HelperVideoFree func(v uintptr)
)

type binding struct {
	fn   any
	name string
}

var registry = []binding{
	{&DefaultMarker, "mtmd_default_marker"},
	{&ContextParamsDefault, "mtmd_context_params_default"},
	{&InitFromFile, "mtmd_init_from_file"},
	{&Free, "mtmd_free"},
	{&DecodeUseMrope, "mtmd_decode_use_mrope"},
	{&SupportVision, "mtmd_support_vision"},
	{&SupportAudio, "mtmd_support_audio"},
	{&GetAudioSampleRate, "mtmd_get_audio_sample_rate"},
	{&GetMarker, "mtmd_get_marker"},
	{&BitmapInit, "mtmd_bitmap_init"},
	{&BitmapInitFromAudio, "mtmd_bitmap_init_from_audio"},
	{&BitmapGetNx, "mtmd_bitmap_get_nx"},
	{&BitmapGetNy, "mtmd_bitmap_get_ny"},
	{&BitmapGetNBytes, "mtmd_bitmap_get_n_bytes"},
	{&BitmapIsAudio, "mtmd_bitmap_is_audio"},
	{&BitmapFree, "mtmd_bitmap_free"},
	{&BitmapGetID, "mtmd_bitmap_get_id"},
	{&BitmapSetID, "mtmd_bitmap_set_id"},
	{&ChunksInit, "mtmd_input_chunks_init"},
	{&ChunksSize, "mtmd_input_chunks_size"},
	{&ChunksGet, "mtmd_input_chunks_get"},
	{&ChunksFree, "mtmd_input_chunks_free"},
	{&ChunkGetType, "mtmd_input_chunk_get_type"},
	{&ChunkGetTokensText, "mtmd_input_chunk_get_tokens_text"},
	{&ChunkGetNTokens, "mtmd_input_chunk_get_n_tokens"},
	{&ChunkGetID, "mtmd_input_chunk_get_id"},
	{&ChunkGetNPos, "mtmd_input_chunk_get_n_pos"},
	{&Tokenize, "mtmd_tokenize"},
	{&TokenizeFromParts, "mtmd_tokenize_from_parts"},
	{&LogSet, "mtmd_log_set"},
	{&HelperInitOptDefault, "mtmd_helper_init_opt_default"},
	{&HelperLogSet, "mtmd_helper_log_set"},
	{&HelperBitmapInitFromBuf, "mtmd_helper_bitmap_init_from_buf"},
	{&HelperGetNTokens, "mtmd_helper_get_n_tokens"},
	{&HelperGetNPos, "mtmd_helper_get_n_pos"},
	{&HelperEvalChunks, "mtmd_helper_eval_chunks"},
	{&HelperEvalChunkSingle, "mtmd_helper_eval_chunk_single"},
	{&HelperVideoFree, "mtmd_helper_video_free"},
}

// Symbols lists every bound C symbol.
func Symbols() []string {
	out := make([]string, len(registry))
	for i, b := range registry {
		out[i] = b.name
	}
	return out
}

var (
	loadMu   sync.Mutex
	loadPath string
	loadErr  error
	loaded   bool
)

// Load opens libmtmd at path (libllama must be loaded already, with global
// symbols: libmtmd links it) and binds every symbol. Only the first call
// opens a library; later calls return its result, or an error when they
// name another file.
func Load(path string) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded {
		if path != loadPath {
			return fmt.Errorf("mtmd: libmtmd already loaded from %s, cannot load %s too", loadPath, path)
		}
		return loadErr
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		// Not remembered: a later call may find the file installed.
		return fmt.Errorf("mtmd: cannot load %s: %w", path, err)
	}
	loaded, loadPath = true, path
	loadErr = bind(h, path)
	return loadErr
}

func bind(h uintptr, path string) error {
	var missing []string
	for _, b := range registry {
		if _, err := purego.Dlsym(h, b.name); err != nil {
			missing = append(missing, b.name)
		}
	}
	if len(missing) > 0 {
		if len(missing) > 8 {
			missing = append(missing[:8:8], "...")
		}
		return fmt.Errorf("mtmd: %s is not the libmtmd of llama.cpp v0.4.0: it lacks %s", path, strings.Join(missing, ", "))
	}
	for _, b := range registry {
		purego.RegisterLibFunc(b.fn, h, b.name)
	}
	if err := checkABI(); err != nil {
		return fmt.Errorf("mtmd: %s: %w", path, err)
	}
	return nil
}

// checkABI compares the defaults of the structs passed by value with what
// the mirrors expect: another layout shows other values at these offsets.
func checkABI() error {
	p := ContextParamsDefault()
	if !p.UseGPU || p.Device != 0 || !p.PrintTimings || p.NThreads != 4 || p.ImageMarker != 0 || p.MediaMarker == 0 ||
		p.FlashAttnType != -1 || !p.Warmup || p.ImageMinTokens != -1 || p.ImageMaxTokens != -1 || p.CbEval != 0 ||
		p.BatchMaxTokens != 1024 || p.ProgressCallback != 0 || p.ProgressUserData != 0 {
		return errors.New("mtmd_context_params does not have the expected layout (another ABI)")
	}
	o := HelperInitOptDefault()
	if o.VideoParams.FPSTarget != 4 || o.VideoParams.FFmpegBinDir != 0 || o.VideoParams.TimestampIntervalMs != 5000 {
		return errors.New("mtmd_helper_init_opt does not have the expected layout (another ABI)")
	}
	return nil
}
