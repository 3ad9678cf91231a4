package capi

import "unsafe"

// Model loading, metadata and the backend (llama.h: "Model" and "Backend").

var (
	// const char * llama_version(void);
	Version func() string
	// struct llama_model_params llama_model_default_params(void);
	ModelDefaultParams func() ModelParams
	// struct llama_context_params llama_context_default_params(void);
	ContextDefaultParams func() ContextParams
	// struct llama_sampler_chain_params llama_sampler_chain_default_params(void);
	SamplerChainDefaultParams func() SamplerChainParams
	// void llama_backend_init(void);
	BackendInit func()
	// void llama_numa_init(enum ggml_numa_strategy numa);
	NumaInit func(strategy int32)
	// void llama_backend_free(void);
	BackendFree func()
	// struct llama_model * llama_model_load_from_file( const char * path_model, struct llama_model_params params);
	ModelLoadFromFile func(path string, params ModelParams) Model
	// struct llama_model * llama_model_load_from_splits( const char ** paths, size_t n_paths, struct llama_model_params params);
	ModelLoadFromSplits func(paths unsafe.Pointer, n uintptr, params ModelParams) Model
	// void llama_model_save_to_file( const struct llama_model * model, const char * path_model);
	ModelSaveToFile func(m Model, path string)
	// void llama_model_free(struct llama_model * model);
	ModelFree func(m Model)
	// int64_t llama_time_us(void);
	TimeUs func() int64
	// size_t llama_max_devices(void);
	MaxDevices func() uintptr
	// size_t llama_max_parallel_sequences(void);
	MaxParallelSequences func() uintptr
	// bool llama_supports_mmap (void);
	SupportsMmap func() bool
	// bool llama_supports_mlock (void);
	SupportsMlock func() bool
	// bool llama_supports_gpu_offload(void);
	SupportsGPUOffload func() bool
	// bool llama_supports_rpc (void);
	SupportsRPC func() bool
	// const struct llama_vocab * llama_model_get_vocab(const struct llama_model * model);
	ModelGetVocab func(m Model) Vocab
	// enum llama_rope_type llama_model_rope_type(const struct llama_model * model);
	ModelRopeType func(m Model) int32
	// int32_t llama_model_n_ctx_train (const struct llama_model * model);
	ModelNCtxTrain func(m Model) int32
	// int32_t llama_model_n_embd (const struct llama_model * model);
	ModelNEmbd func(m Model) int32
	// int32_t llama_model_n_embd_inp (const struct llama_model * model);
	ModelNEmbdInp func(m Model) int32
	// int32_t llama_model_n_embd_out (const struct llama_model * model);
	ModelNEmbdOut func(m Model) int32
	// int32_t llama_model_n_layer (const struct llama_model * model);
	ModelNLayer func(m Model) int32
	// int32_t llama_model_n_head (const struct llama_model * model);
	ModelNHead func(m Model) int32
	// int32_t llama_model_n_head_kv (const struct llama_model * model);
	ModelNHeadKV func(m Model) int32
	// int32_t llama_model_n_swa (const struct llama_model * model);
	ModelNSwa func(m Model) int32
	// float llama_model_rope_freq_scale_train(const struct llama_model * model);
	ModelRopeFreqScaleTrain func(m Model) float32
	// uint32_t llama_model_n_cls_out(const struct llama_model * model);
	ModelNClsOut func(m Model) uint32
	// const char * llama_model_cls_label(const struct llama_model * model, uint32_t i);
	ModelClsLabel func(m Model, i uint32) string
	// int32_t llama_model_meta_val_str(const struct llama_model * model, const char * key, char * buf, size_t buf_size);
	ModelMetaValStr func(m Model, key string, buf unsafe.Pointer, size uintptr) int32
	// int32_t llama_model_meta_count(const struct llama_model * model);
	ModelMetaCount func(m Model) int32
	// int32_t llama_model_meta_key_by_index(const struct llama_model * model, int32_t i, char * buf, size_t buf_size);
	ModelMetaKeyByIndex func(m Model, i int32, buf unsafe.Pointer, size uintptr) int32
	// int32_t llama_model_meta_val_str_by_index(const struct llama_model * model, int32_t i, char * buf, size_t buf_size);
	ModelMetaValStrByIndex func(m Model, i int32, buf unsafe.Pointer, size uintptr) int32
	// int32_t llama_model_desc(const struct llama_model * model, char * buf, size_t buf_size);
	ModelDesc func(m Model, buf unsafe.Pointer, size uintptr) int32
	// enum llama_ftype llama_model_ftype(const struct llama_model * model);
	ModelFtype func(m Model) int32
	// const char * llama_ftype_name(enum llama_ftype ftype);
	FtypeName func(ftype int32) string
	// uint64_t llama_model_size(const struct llama_model * model);
	ModelSize func(m Model) uint64
	// const char * llama_model_chat_template(const struct llama_model * model, const char * name);
	ModelChatTemplate func(m Model, name unsafe.Pointer) unsafe.Pointer
	// uint64_t llama_model_n_params(const struct llama_model * model);
	ModelNParams func(m Model) uint64
	// bool llama_model_has_encoder(const struct llama_model * model);
	ModelHasEncoder func(m Model) bool
	// bool llama_model_has_decoder(const struct llama_model * model);
	ModelHasDecoder func(m Model) bool
	// llama_token llama_model_decoder_start_token(const struct llama_model * model);
	ModelDecoderStartToken func(m Model) Token
	// bool llama_model_is_recurrent(const struct llama_model * model);
	ModelIsRecurrent func(m Model) bool
	// bool llama_model_is_hybrid(const struct llama_model * model);
	ModelIsHybrid func(m Model) bool
	// bool llama_model_is_diffusion(const struct llama_model * model);
	ModelIsDiffusion func(m Model) bool
	// const char * llama_print_system_info(void);
	PrintSystemInfo func() string
	// void llama_log_set(ggml_log_callback log_callback, void * user_data);
	LogSet func(cb uintptr, userData uintptr)
	// int32_t llama_split_path(char * split_path, size_t maxlen, const char * path_prefix, int32_t split_no, int32_t split_count);
	SplitPath func(buf unsafe.Pointer, maxlen uintptr, prefix string, splitNo, splitCount int32) int32
	// int32_t llama_split_prefix(char * split_prefix, size_t maxlen, const char * split_path, int32_t split_no, int32_t split_count);
	SplitPrefix func(buf unsafe.Pointer, maxlen uintptr, path string, splitNo, splitCount int32) int32
)

// ggml (not llama.h, but needed to pick backends and list devices).
var (
	// void ggml_backend_load_all_from_path(const char * dir_path);
	BackendLoadAllFromPath func(dir string)
	// size_t ggml_backend_dev_count(void);
	BackendDevCount func() uintptr
	// ggml_backend_dev_t ggml_backend_dev_get(size_t index);
	BackendDevGet func(i uintptr) uintptr
	// const char * ggml_backend_dev_name(ggml_backend_dev_t device);
	BackendDevName func(dev uintptr) string
	// const char * ggml_backend_dev_description(ggml_backend_dev_t device);
	BackendDevDescription func(dev uintptr) string
	// enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device);
	BackendDevType func(dev uintptr) int32
	// void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
	BackendDevMemory func(dev uintptr, free, total *uintptr)
	// ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);
	BackendDevByName func(name string) uintptr
	// ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device);
	BackendDevBufferType func(dev uintptr) uintptr
	// const char * ggml_backend_buft_name (ggml_backend_buffer_type_t buft);
	BackendBuftName func(buft uintptr) string
)

func init() {
	register(libLlama,
		binding{fn: &Version, name: "llama_version"},
		binding{fn: &ModelDefaultParams, name: "llama_model_default_params"},
		binding{fn: &ContextDefaultParams, name: "llama_context_default_params"},
		binding{fn: &SamplerChainDefaultParams, name: "llama_sampler_chain_default_params"},
		binding{fn: &BackendInit, name: "llama_backend_init"},
		binding{fn: &NumaInit, name: "llama_numa_init"},
		binding{fn: &BackendFree, name: "llama_backend_free"},
		binding{fn: &ModelLoadFromFile, name: "llama_model_load_from_file"},
		binding{fn: &ModelLoadFromSplits, name: "llama_model_load_from_splits"},
		binding{fn: &ModelSaveToFile, name: "llama_model_save_to_file"},
		binding{fn: &ModelFree, name: "llama_model_free"},
		binding{fn: &TimeUs, name: "llama_time_us"},
		binding{fn: &MaxDevices, name: "llama_max_devices"},
		binding{fn: &MaxParallelSequences, name: "llama_max_parallel_sequences"},
		binding{fn: &SupportsMmap, name: "llama_supports_mmap"},
		binding{fn: &SupportsMlock, name: "llama_supports_mlock"},
		binding{fn: &SupportsGPUOffload, name: "llama_supports_gpu_offload"},
		binding{fn: &SupportsRPC, name: "llama_supports_rpc"},
		binding{fn: &ModelGetVocab, name: "llama_model_get_vocab"},
		binding{fn: &ModelRopeType, name: "llama_model_rope_type"},
		binding{fn: &ModelNCtxTrain, name: "llama_model_n_ctx_train"},
		binding{fn: &ModelNEmbd, name: "llama_model_n_embd"},
		binding{fn: &ModelNEmbdInp, name: "llama_model_n_embd_inp"},
		binding{fn: &ModelNEmbdOut, name: "llama_model_n_embd_out"},
		binding{fn: &ModelNLayer, name: "llama_model_n_layer"},
		binding{fn: &ModelNHead, name: "llama_model_n_head"},
		binding{fn: &ModelNHeadKV, name: "llama_model_n_head_kv"},
		binding{fn: &ModelNSwa, name: "llama_model_n_swa"},
		binding{fn: &ModelRopeFreqScaleTrain, name: "llama_model_rope_freq_scale_train"},
		binding{fn: &ModelNClsOut, name: "llama_model_n_cls_out"},
		binding{fn: &ModelClsLabel, name: "llama_model_cls_label"},
		binding{fn: &ModelMetaValStr, name: "llama_model_meta_val_str"},
		binding{fn: &ModelMetaCount, name: "llama_model_meta_count"},
		binding{fn: &ModelMetaKeyByIndex, name: "llama_model_meta_key_by_index"},
		binding{fn: &ModelMetaValStrByIndex, name: "llama_model_meta_val_str_by_index"},
		binding{fn: &ModelDesc, name: "llama_model_desc"},
		binding{fn: &ModelFtype, name: "llama_model_ftype"},
		binding{fn: &FtypeName, name: "llama_ftype_name"},
		binding{fn: &ModelSize, name: "llama_model_size"},
		binding{fn: &ModelChatTemplate, name: "llama_model_chat_template"},
		binding{fn: &ModelNParams, name: "llama_model_n_params"},
		binding{fn: &ModelHasEncoder, name: "llama_model_has_encoder"},
		binding{fn: &ModelHasDecoder, name: "llama_model_has_decoder"},
		binding{fn: &ModelDecoderStartToken, name: "llama_model_decoder_start_token"},
		binding{fn: &ModelIsRecurrent, name: "llama_model_is_recurrent"},
		binding{fn: &ModelIsHybrid, name: "llama_model_is_hybrid"},
		binding{fn: &ModelIsDiffusion, name: "llama_model_is_diffusion"},
		binding{fn: &PrintSystemInfo, name: "llama_print_system_info"},
		binding{fn: &LogSet, name: "llama_log_set"},
		binding{fn: &SplitPath, name: "llama_split_path"},
		binding{fn: &SplitPrefix, name: "llama_split_prefix"},
	)
	register(libGGML,
		binding{fn: &BackendLoadAllFromPath, name: "ggml_backend_load_all_from_path"},
		binding{fn: &BackendDevCount, name: "ggml_backend_dev_count"},
		binding{fn: &BackendDevGet, name: "ggml_backend_dev_get"},
		binding{fn: &BackendDevName, name: "ggml_backend_dev_name"},
		binding{fn: &BackendDevDescription, name: "ggml_backend_dev_description"},
		binding{fn: &BackendDevType, name: "ggml_backend_dev_type"},
		binding{fn: &BackendDevMemory, name: "ggml_backend_dev_memory"},
		binding{fn: &BackendDevByName, name: "ggml_backend_dev_by_name"},
	)
	register(libGGMLBase,
		binding{fn: &BackendDevBufferType, name: "ggml_backend_dev_buffer_type"},
		binding{fn: &BackendBuftName, name: "ggml_backend_buft_name"},
	)
}
