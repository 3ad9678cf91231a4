package capi

import (
	"testing"

	"github.com/x/llama/internal/testenv"
)

var layouts = []testenv.CStruct{
	{C: "struct llama_model_params", GoType: ModelParams{}, Fields: []string{"devices", "tensor_buft_overrides", "n_gpu_layers",
		"split_mode", "load_mode", "lazy_mode", "main_gpu", "tensor_split", "progress_callback",
		"progress_callback_user_data", "kv_overrides", "vocab_only", "check_tensors", "use_extra_bufts",
		"no_host", "no_alloc", "load_mtp"}},
	{C: "struct llama_context_params", GoType: ContextParams{}, Fields: []string{"n_ctx", "n_batch", "n_ubatch", "n_seq_max",
		"n_rs_seq", "n_outputs_max", "n_outputs_max_per_seq", "n_threads", "n_threads_batch", "ctx_type",
		"rope_scaling_type", "pooling_type", "attention_type", "flash_attn_type", "rope_freq_base",
		"rope_freq_scale", "yarn_ext_factor", "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow",
		"yarn_orig_ctx", "defrag_thold", "cb_eval", "cb_eval_user_data", "type_k", "type_v",
		"abort_callback", "abort_callback_data", "embeddings", "offload_kqv", "no_perf", "op_offload",
		"swa_full", "kv_unified", "samplers", "n_samplers", "ctx_other"}},
	{C: "struct llama_batch", GoType: Batch{}, Fields: []string{"n_tokens", "token", "embd", "pos", "n_seq_id", "seq_id", "logits"}},
	{C: "llama_token_data", GoType: TokenData{}, Fields: []string{"id", "logit", "p"}},
	{C: "llama_token_data_array", GoType: TokenDataArray{}, Fields: []string{"data", "size", "selected", "sorted"}},
	{C: "struct llama_sampler_chain_params", GoType: SamplerChainParams{}, Fields: []string{"no_perf"}},
	{C: "struct llama_chat_message", GoType: ChatMessage{}, Fields: []string{"role", "content"}},
	{C: "llama_logit_bias", GoType: LogitBias{}, Fields: []string{"token", "bias"}},
	{C: "struct llama_model_tensor_buft_override", GoType: TensorBuftOverride{}, Fields: []string{"pattern", "buft"}},
	{C: "struct llama_model_kv_override", GoType: ModelKVOverride{}, Fields: []string{"tag", "key", "val_str"}},
	{C: "struct llama_perf_context_data", GoType: PerfContextData{}, Fields: []string{"t_start_ms", "t_load_ms", "t_p_eval_ms",
		"t_eval_ms", "n_p_eval", "n_eval", "n_reused"}},
	{C: "struct llama_perf_sampler_data", GoType: PerfSamplerData{}, Fields: []string{"t_sample_ms", "n_sample"}},
	{C: "struct llama_sampler_i", GoType: SamplerI{}, Fields: []string{"name", "accept", "apply", "reset", "clone", "free",
		"backend_init", "backend_accept", "backend_apply", "backend_set_input", "backend_reset", "copy_state"}},
	{C: "struct llama_sampler", GoType: SamplerStruct{}, Fields: []string{"iface", "ctx"}},
	{C: "struct ggml_threadpool_params", GoType: ThreadpoolParams{}, Fields: []string{"cpumask", "n_threads", "prio", "poll", "strict_cpu", "paused"}},
}

// TestStructLayout compiles a few lines of C against the pinned llama.h and
// holds the size, alignment and every field offset of each Go mirror
// against what the C compiler says.
func TestStructLayout(t *testing.T) {
	testenv.CheckLayouts(t, []string{"llama.h"}, []string{"include", "ggml/include"}, layouts)
}
