package capi

import "unsafe"

// Go mirrors of the C structs of llama.h that cross the boundary by value or
// by pointer. Field order, types and padding follow the header exactly;
// layout_test.go compiles the real header with the system C compiler and
// holds every size and offset here against it.

// Handles of opaque C objects.
type (
	Model       uintptr // struct llama_model *
	Context     uintptr // struct llama_context *
	Vocab       uintptr // const struct llama_vocab *
	Memory      uintptr // llama_memory_t
	Sampler     uintptr // struct llama_sampler *
	AdapterLora uintptr // struct llama_adapter_lora *
	Token       = int32 // llama_token
	Pos         = int32 // llama_pos
	SeqID       = int32 // llama_seq_id
)

// TokenNull is LLAMA_TOKEN_NULL.
const TokenNull Token = -1

// DefaultSeed is LLAMA_DEFAULT_SEED.
const DefaultSeed uint32 = 0xFFFFFFFF

// TensorBuftOverride mirrors struct llama_model_tensor_buft_override.
type TensorBuftOverride struct {
	Pattern uintptr // const char *
	Buft    uintptr // ggml_backend_buffer_type_t
}

// ModelParams mirrors struct llama_model_params.
type ModelParams struct {
	Devices                  uintptr // ggml_backend_dev_t *
	TensorBuftOverrides      uintptr // const struct llama_model_tensor_buft_override *
	NGPULayers               int32
	SplitMode                int32 // enum llama_split_mode
	LoadMode                 int32 // enum llama_load_mode
	LazyMode                 int32 // enum llama_lazy_mode
	MainGPU                  int32
	_                        [4]byte
	TensorSplit              uintptr // const float *
	ProgressCallback         uintptr // llama_progress_callback
	ProgressCallbackUserData uintptr // void *
	KVOverrides              uintptr // const struct llama_model_kv_override *
	VocabOnly                bool
	CheckTensors             bool
	UseExtraBufts            bool
	NoHost                   bool
	NoAlloc                  bool
	LoadMTP                  bool
	_                        [2]byte
}

// ContextParams mirrors struct llama_context_params.
type ContextParams struct {
	NCtx              uint32
	NBatch            uint32
	NUbatch           uint32
	NSeqMax           uint32
	NRsSeq            uint32
	NOutputsMax       uint32
	NOutputsMaxPerSeq uint32
	NThreads          int32
	NThreadsBatch     int32
	CtxType           int32 // enum llama_context_type
	RopeScalingType   int32 // enum llama_rope_scaling_type
	PoolingType       int32 // enum llama_pooling_type
	AttentionType     int32 // enum llama_attention_type
	FlashAttnType     int32 // enum llama_flash_attn_type
	RopeFreqBase      float32
	RopeFreqScale     float32
	YarnExtFactor     float32
	YarnAttnFactor    float32
	YarnBetaFast      float32
	YarnBetaSlow      float32
	YarnOrigCtx       uint32
	DefragThold       float32
	CbEval            uintptr // ggml_backend_sched_eval_callback
	CbEvalUserData    uintptr
	TypeK             int32   // enum ggml_type
	TypeV             int32   // enum ggml_type
	AbortCallback     uintptr // ggml_abort_callback
	AbortCallbackData uintptr
	Embeddings        bool
	OffloadKQV        bool
	NoPerf            bool
	OpOffload         bool
	SwaFull           bool
	KVUnified         bool
	_                 [2]byte
	Samplers          uintptr // struct llama_sampler_seq_config *
	NSamplers         uintptr // size_t
	CtxOther          uintptr // struct llama_context *
}

// Batch mirrors struct llama_batch.
type Batch struct {
	NTokens int32
	_       [4]byte
	Token   uintptr // llama_token *
	Embd    uintptr // float *
	Pos     uintptr // llama_pos *
	NSeqID  uintptr // int32_t *
	SeqID   uintptr // llama_seq_id **
	Logits  uintptr // int8_t *
}

// TokenData mirrors llama_token_data.
type TokenData struct {
	ID    Token
	Logit float32
	P     float32
}

// TokenDataArray mirrors llama_token_data_array.
type TokenDataArray struct {
	Data     unsafe.Pointer // llama_token_data *
	Size     uintptr        // size_t
	Selected int64
	Sorted   bool
	_        [7]byte
}

// SamplerChainParams mirrors llama_sampler_chain_params.
type SamplerChainParams struct {
	NoPerf bool
}

// ChatMessage mirrors llama_chat_message.
type ChatMessage struct {
	Role    uintptr // const char *
	Content uintptr // const char *
}

// LogitBias mirrors llama_logit_bias.
type LogitBias struct {
	Token Token
	Bias  float32
}

// Kinds of llama_model_kv_override.
const (
	KVOverrideInt   = 0
	KVOverrideFloat = 1
	KVOverrideBool  = 2
	KVOverrideStr   = 3
)

// ModelKVOverride mirrors struct llama_model_kv_override (the union is the
// 128-byte, 8-aligned Value; integers, floats and bools sit at its start,
// strings fill it NUL-terminated).
type ModelKVOverride struct {
	Tag   int32
	Key   [128]byte
	_     [4]byte
	Value [16]uint64
}

// PerfContextData mirrors struct llama_perf_context_data.
type PerfContextData struct {
	TStartMs float64
	TLoadMs  float64
	TPEvalMs float64
	TEvalMs  float64
	NPEval   int32
	NEval    int32
	NReused  int32
	_        [4]byte
}

// PerfSamplerData mirrors struct llama_perf_sampler_data.
type PerfSamplerData struct {
	TSampleMs float64
	NSample   int32
	_         [4]byte
}

// SamplerI mirrors struct llama_sampler_i: a table of function pointers.
type SamplerI struct {
	Name            uintptr
	Accept          uintptr
	Apply           uintptr
	Reset           uintptr
	Clone           uintptr
	Free            uintptr
	BackendInit     uintptr
	BackendAccept   uintptr
	BackendApply    uintptr
	BackendSetInput uintptr
	BackendReset    uintptr
	CopyState       uintptr
}

// SamplerStruct mirrors struct llama_sampler.
type SamplerStruct struct {
	Iface uintptr // struct llama_sampler_i *
	Ctx   uintptr // llama_sampler_context_t
}

// Enum values used by the root package.
const (
	PoolingUnspecified = -1
	PoolingNone        = 0
	PoolingMean        = 1
	PoolingCLS         = 2
	PoolingLast        = 3
	PoolingRank        = 4

	FlashAttnAuto     = -1
	FlashAttnDisabled = 0
	FlashAttnEnabled  = 1
)
