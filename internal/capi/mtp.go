package capi

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// llama.cpp's multi-token-prediction calls (src/llama-ext.h) are a staging
// API declared without extern "C": the library exports them under their
// C++ names. They are looked up by their Itanium names (Linux, macOS) and
// stay nil where the library lacks them (another C++ ABI), which callers
// report as unsupported.
var (
	// void llama_set_embeddings_nextn(struct llama_context * ctx, bool value, bool masked);
	SetEmbeddingsNextn func(c Context, on, masked bool)
	// void llama_set_nextn_layer_offset(struct llama_context * ctx, int32_t offset);
	SetNextnLayerOffset func(c Context, offset int32)
	// float * llama_get_embeddings_nextn_ith(struct llama_context * ctx, int32_t i);
	GetEmbeddingsNextnIth func(c Context, i int32) unsafe.Pointer
	// llama_context * llama_get_ctx_other(struct llama_context * ctx);
	GetCtxOther func(c Context) Context
	// int32_t llama_model_n_layer_nextn(const struct llama_model * model);
	ModelNLayerNextn func(m Model) int32
)

// bindMTP binds the calls above that libllama (handle h) exports.
func bindMTP(h uintptr) {
	bind := func(fn any, names ...string) {
		for _, n := range names {
			if _, err := purego.Dlsym(h, n); err == nil {
				purego.RegisterLibFunc(fn, h, n)
				return
			}
		}
	}
	bind(&SetEmbeddingsNextn, "_Z26llama_set_embeddings_nextnP13llama_contextbb")
	bind(&SetNextnLayerOffset, "_Z28llama_set_nextn_layer_offsetP13llama_contexti")
	bind(&GetEmbeddingsNextnIth, "_Z30llama_get_embeddings_nextn_ithP13llama_contexti")
	bind(&GetCtxOther, "_Z19llama_get_ctx_otherP13llama_context")
	bind(&ModelNLayerNextn, "llama_model_n_layer_nextn")
}

// HaveMTP reports whether the library exports the multi-token-prediction
// calls.
func HaveMTP() bool {
	return SetEmbeddingsNextn != nil && SetNextnLayerOffset != nil &&
		GetEmbeddingsNextnIth != nil && GetCtxOther != nil && ModelNLayerNextn != nil
}
