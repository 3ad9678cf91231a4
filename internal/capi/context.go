package capi

import "unsafe"

// Contexts, decoding, outputs and performance counters.

var (
	// struct llama_context * llama_init_from_model( struct llama_model * model, struct llama_context_params params);
	InitFromModel func(m Model, params ContextParams) Context
	// void llama_free(struct llama_context * ctx);
	Free func(c Context)
	// uint32_t llama_n_ctx (const struct llama_context * ctx);
	NCtx func(c Context) uint32
	// uint32_t llama_n_ctx_seq (const struct llama_context * ctx);
	NCtxSeq func(c Context) uint32
	// uint32_t llama_n_batch (const struct llama_context * ctx);
	NBatch func(c Context) uint32
	// uint32_t llama_n_ubatch (const struct llama_context * ctx);
	NUbatch func(c Context) uint32
	// uint32_t llama_n_seq_max (const struct llama_context * ctx);
	NSeqMax func(c Context) uint32
	// uint32_t llama_n_rs_seq (const struct llama_context * ctx);
	NRsSeq func(c Context) uint32
	// llama_memory_t llama_get_memory (const struct llama_context * ctx);
	GetMemory func(c Context) Memory
	// enum llama_pooling_type llama_pooling_type(const struct llama_context * ctx);
	PoolingType func(c Context) int32
	// int32_t llama_encode( struct llama_context * ctx, struct llama_batch batch);
	Encode func(c Context, b Batch) int32
	// int32_t llama_decode( struct llama_context * ctx, struct llama_batch batch);
	Decode func(c Context, b Batch) int32
	// void llama_set_n_threads(struct llama_context * ctx, int32_t n_threads, int32_t n_threads_batch);
	SetNThreads func(c Context, n, nBatch int32)
	// int32_t llama_n_threads(struct llama_context * ctx);
	NThreads func(c Context) int32
	// int32_t llama_n_threads_batch(struct llama_context * ctx);
	NThreadsBatch func(c Context) int32
	// void llama_set_embeddings(struct llama_context * ctx, bool embeddings);
	SetEmbeddings func(c Context, on bool)
	// void llama_set_causal_attn(struct llama_context * ctx, bool causal_attn);
	SetCausalAttn func(c Context, on bool)
	// void llama_set_abort_callback(struct llama_context * ctx, ggml_abort_callback abort_callback, void * abort_callback_data);
	SetAbortCallback func(c Context, cb uintptr, data unsafe.Pointer)
	// void llama_synchronize(struct llama_context * ctx);
	Synchronize func(c Context)
	// float * llama_get_logits(struct llama_context * ctx);
	GetLogits func(c Context) unsafe.Pointer
	// float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);
	GetLogitsIth func(c Context, i int32) unsafe.Pointer
	// bool llama_set_sampler(struct llama_context * ctx, llama_seq_id seq_id, struct llama_sampler * smpl);
	SetSampler func(c Context, seq SeqID, s Sampler) bool
	// llama_token llama_get_sampled_token_ith(struct llama_context * ctx, int32_t i);
	GetSampledTokenIth func(c Context, i int32) Token
	// float * llama_get_embeddings(struct llama_context * ctx);
	GetEmbeddings func(c Context) unsafe.Pointer
	// float * llama_get_embeddings_ith(struct llama_context * ctx, int32_t i);
	GetEmbeddingsIth func(c Context, i int32) unsafe.Pointer
	// float * llama_get_embeddings_seq(struct llama_context * ctx, llama_seq_id seq_id);
	GetEmbeddingsSeq func(c Context, seq SeqID) unsafe.Pointer
	// struct llama_perf_context_data llama_perf_context (const struct llama_context * ctx);
	PerfContext func(c Context) PerfContextData
	// void llama_perf_context_reset( struct llama_context * ctx);
	PerfContextReset func(c Context)
	// struct llama_perf_sampler_data llama_perf_sampler (const struct llama_sampler * chain);
	PerfSampler func(s Sampler) PerfSamplerData
	// void llama_perf_sampler_reset( struct llama_sampler * chain);
	PerfSamplerReset func(s Sampler)
)

// Memory (KV cache) of a context.
var (
	// void llama_memory_clear( llama_memory_t mem, bool data);
	MemoryClear func(m Memory, data bool)
	// bool llama_memory_seq_rm( llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
	MemorySeqRm func(m Memory, seq SeqID, p0, p1 Pos) bool
	// void llama_memory_seq_cp( llama_memory_t mem, llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0, llama_pos p1);
	MemorySeqCp func(m Memory, src, dst SeqID, p0, p1 Pos)
	// void llama_memory_seq_keep( llama_memory_t mem, llama_seq_id seq_id);
	MemorySeqKeep func(m Memory, seq SeqID)
	// void llama_memory_seq_add( llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta);
	MemorySeqAdd func(m Memory, seq SeqID, p0, p1, delta Pos)
	// void llama_memory_seq_div( llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d);
	MemorySeqDiv func(m Memory, seq SeqID, p0, p1 Pos, d int32)
	// llama_pos llama_memory_seq_pos_min( llama_memory_t mem, llama_seq_id seq_id);
	MemorySeqPosMin func(m Memory, seq SeqID) Pos
	// llama_pos llama_memory_seq_pos_max( llama_memory_t mem, llama_seq_id seq_id);
	MemorySeqPosMax func(m Memory, seq SeqID) Pos
	// bool llama_memory_can_shift(llama_memory_t mem);
	MemoryCanShift func(m Memory) bool
)

// State save and load.
var (
	// size_t llama_state_get_size(struct llama_context * ctx);
	StateGetSize func(c Context) uintptr
	// size_t llama_state_get_data( struct llama_context * ctx, uint8_t * dst, size_t size);
	StateGetData func(c Context, dst unsafe.Pointer, size uintptr) uintptr
	// size_t llama_state_set_data( struct llama_context * ctx, const uint8_t * src, size_t size);
	StateSetData func(c Context, src unsafe.Pointer, size uintptr) uintptr
	// bool llama_state_load_file( struct llama_context * ctx, const char * path_session, llama_token * tokens_out, size_t n_token_capacity, size_t * n_token_count_out);
	StateLoadFile func(c Context, path string, tokens unsafe.Pointer, capacity uintptr, count *uintptr) bool
	// bool llama_state_save_file( struct llama_context * ctx, const char * path_session, const llama_token * tokens, size_t n_token_count);
	StateSaveFile func(c Context, path string, tokens unsafe.Pointer, n uintptr) bool
	// size_t llama_state_seq_get_size( struct llama_context * ctx, llama_seq_id seq_id);
	StateSeqGetSize func(c Context, seq SeqID) uintptr
	// size_t llama_state_seq_get_data( struct llama_context * ctx, uint8_t * dst, size_t size, llama_seq_id seq_id);
	StateSeqGetData func(c Context, dst unsafe.Pointer, size uintptr, seq SeqID) uintptr
	// size_t llama_state_seq_set_data( struct llama_context * ctx, const uint8_t * src, size_t size, llama_seq_id dest_seq_id);
	StateSeqSetData func(c Context, src unsafe.Pointer, size uintptr, seq SeqID) uintptr
	// size_t llama_state_seq_save_file( struct llama_context * ctx, const char * filepath, llama_seq_id seq_id, const llama_token * tokens, size_t n_token_count);
	StateSeqSaveFile func(c Context, path string, seq SeqID, tokens unsafe.Pointer, n uintptr) uintptr
	// size_t llama_state_seq_load_file( struct llama_context * ctx, const char * filepath, llama_seq_id dest_seq_id, llama_token * tokens_out, size_t n_token_capacity, size_t * n_token_count_out);
	StateSeqLoadFile func(c Context, path string, seq SeqID, tokens unsafe.Pointer, capacity uintptr, count *uintptr) uintptr
	// size_t llama_state_seq_get_size_ext( struct llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags);
	StateSeqGetSizeExt func(c Context, seq SeqID, flags uint32) uintptr
	// size_t llama_state_seq_get_data_ext( struct llama_context * ctx, uint8_t * dst, size_t size, llama_seq_id seq_id, llama_state_seq_flags flags);
	StateSeqGetDataExt func(c Context, dst unsafe.Pointer, size uintptr, seq SeqID, flags uint32) uintptr
	// size_t llama_state_seq_set_data_ext( struct llama_context * ctx, const uint8_t * src, size_t size, llama_seq_id dest_seq_id, llama_state_seq_flags flags);
	StateSeqSetDataExt func(c Context, src unsafe.Pointer, size uintptr, seq SeqID, flags uint32) uintptr
)

// StateSeqFlagsPartialOnly is LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY (also
// LLAMA_STATE_SEQ_FLAGS_SWA_ONLY): only the parts of a sequence's memory
// that cannot be rolled back (a sliding-window cache, a recurrent state).
const StateSeqFlagsPartialOnly uint32 = 1

// LoRA adapters and control vectors.
var (
	// struct llama_adapter_lora * llama_adapter_lora_init( struct llama_model * model, const char * path_lora);
	AdapterLoraInit func(m Model, path string) AdapterLora
	// void llama_adapter_lora_free(struct llama_adapter_lora * adapter);
	AdapterLoraFree func(a AdapterLora)
	// int32_t llama_adapter_meta_val_str(const struct llama_adapter_lora * adapter, const char * key, char * buf, size_t buf_size);
	AdapterMetaValStr func(a AdapterLora, key string, buf unsafe.Pointer, size uintptr) int32
	// int32_t llama_adapter_meta_count(const struct llama_adapter_lora * adapter);
	AdapterMetaCount func(a AdapterLora) int32
	// int32_t llama_adapter_meta_key_by_index(const struct llama_adapter_lora * adapter, int32_t i, char * buf, size_t buf_size);
	AdapterMetaKeyByIndex func(a AdapterLora, i int32, buf unsafe.Pointer, size uintptr) int32
	// int32_t llama_adapter_meta_val_str_by_index(const struct llama_adapter_lora * adapter, int32_t i, char * buf, size_t buf_size);
	AdapterMetaValStrByIndex func(a AdapterLora, i int32, buf unsafe.Pointer, size uintptr) int32
	// uint64_t llama_adapter_get_alora_n_invocation_tokens(const struct llama_adapter_lora * adapter);
	AdapterGetAloraNInvocationTokens func(a AdapterLora) uint64
	// int32_t llama_set_adapters_lora( struct llama_context * ctx, struct llama_adapter_lora ** adapters, size_t n_adapters, float * scales);
	SetAdaptersLora func(c Context, adapters unsafe.Pointer, n uintptr, scales unsafe.Pointer) int32
	// int32_t llama_set_adapter_cvec( struct llama_context * ctx, const float * data, size_t len, int32_t n_embd, int32_t il_start, int32_t il_end);
	SetAdapterCvec func(c Context, data unsafe.Pointer, n uintptr, nEmbd, ilStart, ilEnd int32) int32
)

func init() {
	register(libLlama,
		binding{fn: &InitFromModel, name: "llama_init_from_model"},
		binding{fn: &Free, name: "llama_free"},
		binding{fn: &NCtx, name: "llama_n_ctx"},
		binding{fn: &NCtxSeq, name: "llama_n_ctx_seq"},
		binding{fn: &NBatch, name: "llama_n_batch"},
		binding{fn: &NUbatch, name: "llama_n_ubatch"},
		binding{fn: &NSeqMax, name: "llama_n_seq_max"},
		binding{fn: &NRsSeq, name: "llama_n_rs_seq"},
		binding{fn: &GetMemory, name: "llama_get_memory"},
		binding{fn: &PoolingType, name: "llama_pooling_type"},
		binding{fn: &Encode, name: "llama_encode"},
		binding{fn: &Decode, name: "llama_decode"},
		binding{fn: &SetNThreads, name: "llama_set_n_threads"},
		binding{fn: &NThreads, name: "llama_n_threads"},
		binding{fn: &NThreadsBatch, name: "llama_n_threads_batch"},
		binding{fn: &SetEmbeddings, name: "llama_set_embeddings"},
		binding{fn: &SetCausalAttn, name: "llama_set_causal_attn"},
		binding{fn: &SetAbortCallback, name: "llama_set_abort_callback"},
		binding{fn: &Synchronize, name: "llama_synchronize"},
		binding{fn: &GetLogits, name: "llama_get_logits"},
		binding{fn: &GetLogitsIth, name: "llama_get_logits_ith"},
		binding{fn: &SetSampler, name: "llama_set_sampler"},
		binding{fn: &GetSampledTokenIth, name: "llama_get_sampled_token_ith"},
		binding{fn: &GetEmbeddings, name: "llama_get_embeddings"},
		binding{fn: &GetEmbeddingsIth, name: "llama_get_embeddings_ith"},
		binding{fn: &GetEmbeddingsSeq, name: "llama_get_embeddings_seq"},
		binding{fn: &PerfContext, name: "llama_perf_context"},
		binding{fn: &PerfContextReset, name: "llama_perf_context_reset"},
		binding{fn: &PerfSampler, name: "llama_perf_sampler"},
		binding{fn: &PerfSamplerReset, name: "llama_perf_sampler_reset"},
		binding{fn: &MemoryClear, name: "llama_memory_clear"},
		binding{fn: &MemorySeqRm, name: "llama_memory_seq_rm"},
		binding{fn: &MemorySeqCp, name: "llama_memory_seq_cp"},
		binding{fn: &MemorySeqKeep, name: "llama_memory_seq_keep"},
		binding{fn: &MemorySeqAdd, name: "llama_memory_seq_add"},
		binding{fn: &MemorySeqDiv, name: "llama_memory_seq_div"},
		binding{fn: &MemorySeqPosMin, name: "llama_memory_seq_pos_min"},
		binding{fn: &MemorySeqPosMax, name: "llama_memory_seq_pos_max"},
		binding{fn: &MemoryCanShift, name: "llama_memory_can_shift"},
		binding{fn: &StateGetSize, name: "llama_state_get_size"},
		binding{fn: &StateGetData, name: "llama_state_get_data"},
		binding{fn: &StateSetData, name: "llama_state_set_data"},
		binding{fn: &StateLoadFile, name: "llama_state_load_file"},
		binding{fn: &StateSaveFile, name: "llama_state_save_file"},
		binding{fn: &StateSeqGetSize, name: "llama_state_seq_get_size"},
		binding{fn: &StateSeqGetData, name: "llama_state_seq_get_data"},
		binding{fn: &StateSeqSetData, name: "llama_state_seq_set_data"},
		binding{fn: &StateSeqSaveFile, name: "llama_state_seq_save_file"},
		binding{fn: &StateSeqLoadFile, name: "llama_state_seq_load_file"},
		binding{fn: &StateSeqGetSizeExt, name: "llama_state_seq_get_size_ext"},
		binding{fn: &StateSeqGetDataExt, name: "llama_state_seq_get_data_ext"},
		binding{fn: &StateSeqSetDataExt, name: "llama_state_seq_set_data_ext"},
		binding{fn: &AdapterLoraInit, name: "llama_adapter_lora_init"},
		binding{fn: &AdapterLoraFree, name: "llama_adapter_lora_free"},
		binding{fn: &AdapterMetaValStr, name: "llama_adapter_meta_val_str"},
		binding{fn: &AdapterMetaCount, name: "llama_adapter_meta_count"},
		binding{fn: &AdapterMetaKeyByIndex, name: "llama_adapter_meta_key_by_index"},
		binding{fn: &AdapterMetaValStrByIndex, name: "llama_adapter_meta_val_str_by_index"},
		binding{fn: &AdapterGetAloraNInvocationTokens, name: "llama_adapter_get_alora_n_invocation_tokens"},
		binding{fn: &SetAdaptersLora, name: "llama_set_adapters_lora"},
		binding{fn: &SetAdapterCvec, name: "llama_set_adapter_cvec"},
	)
}
