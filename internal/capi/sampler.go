package capi

import "unsafe"

// Samplers.

var (
	// struct llama_sampler * llama_sampler_init (struct llama_sampler_i * iface, llama_sampler_context_t ctx);
	SamplerInit func(iface unsafe.Pointer, ctx uintptr) Sampler
	// const char * llama_sampler_name (const struct llama_sampler * smpl);
	SamplerName func(s Sampler) string
	// void llama_sampler_accept( struct llama_sampler * smpl, llama_token token);
	SamplerAccept func(s Sampler, t Token)
	// void llama_sampler_apply ( struct llama_sampler * smpl, llama_token_data_array * cur_p);
	SamplerApply func(s Sampler, cur *TokenDataArray)
	// void llama_sampler_reset ( struct llama_sampler * smpl);
	SamplerReset func(s Sampler)
	// struct llama_sampler * llama_sampler_clone (const struct llama_sampler * smpl);
	SamplerClone func(s Sampler) Sampler
	// void llama_sampler_free ( struct llama_sampler * smpl);
	SamplerFree func(s Sampler)
	// struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params params);
	SamplerChainInit func(p SamplerChainParams) Sampler
	// void llama_sampler_chain_add( struct llama_sampler * chain, struct llama_sampler * smpl);
	SamplerChainAdd func(chain, s Sampler)
	// struct llama_sampler * llama_sampler_chain_get( struct llama_sampler * chain, int32_t i);
	SamplerChainGet func(chain Sampler, i int32) *SamplerStruct
	// int llama_sampler_chain_n (const struct llama_sampler * chain);
	SamplerChainN func(chain Sampler) int32
	// struct llama_sampler * llama_sampler_chain_remove( struct llama_sampler * chain, int32_t i);
	SamplerChainRemove func(chain Sampler, i int32) Sampler
	// struct llama_sampler * llama_sampler_init_greedy(void);
	SamplerInitGreedy func() Sampler
	// struct llama_sampler * llama_sampler_init_dist(uint32_t seed);
	SamplerInitDist func(seed uint32) Sampler
	// struct llama_sampler * llama_sampler_init_top_k (int32_t k);
	SamplerInitTopK func(k int32) Sampler
	// struct llama_sampler * llama_sampler_init_top_p (float p, size_t min_keep);
	SamplerInitTopP func(p float32, minKeep uintptr) Sampler
	// struct llama_sampler * llama_sampler_init_min_p (float p, size_t min_keep);
	SamplerInitMinP func(p float32, minKeep uintptr) Sampler
	// struct llama_sampler * llama_sampler_init_typical (float p, size_t min_keep);
	SamplerInitTypical func(p float32, minKeep uintptr) Sampler
	// struct llama_sampler * llama_sampler_init_temp (float t);
	SamplerInitTemp func(t float32) Sampler
	// struct llama_sampler * llama_sampler_init_temp_ext (float t, float delta, float exponent);
	SamplerInitTempExt func(t, delta, exponent float32) Sampler
	// struct llama_sampler * llama_sampler_init_xtc (float p, float t, size_t min_keep, uint32_t seed);
	SamplerInitXTC func(p, t float32, minKeep uintptr, seed uint32) Sampler
	// struct llama_sampler * llama_sampler_init_top_n_sigma(float n);
	SamplerInitTopNSigma func(n float32) Sampler
	// struct llama_sampler * llama_sampler_init_mirostat( int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m);
	SamplerInitMirostat func(nVocab int32, seed uint32, tau, eta float32, m int32) Sampler
	// struct llama_sampler * llama_sampler_init_mirostat_v2( uint32_t seed, float tau, float eta);
	SamplerInitMirostatV2 func(seed uint32, tau, eta float32) Sampler
	// struct llama_sampler * llama_sampler_init_grammar( const struct llama_vocab * vocab, const char * grammar_str, const char * grammar_root);
	SamplerInitGrammar func(v Vocab, grammar, root string) Sampler
	// struct llama_sampler * llama_sampler_init_grammar_lazy_patterns( const struct llama_vocab * vocab, const char * grammar_str, const char * grammar_root, const char ** trigger_patterns, size_t num_trigger_patterns, const llama_token * trigger_tokens, size_t num_trigger_tokens);
	SamplerInitGrammarLazyPatterns func(v Vocab, grammar, root string, patterns unsafe.Pointer, nPatterns uintptr, tokens unsafe.Pointer, nTokens uintptr) Sampler
	// struct llama_sampler * llama_sampler_init_penalties( int32_t n_vocab, int32_t penalty_last_n, float penalty_repeat, float penalty_freq, float penalty_present);
	SamplerInitPenalties func(nVocab, lastN int32, repeat, freq, present float32) Sampler
	// struct llama_sampler * llama_sampler_init_dry( const struct llama_vocab * vocab, float dry_multiplier, float dry_base, int32_t dry_allowed_length, int32_t dry_penalty_last_n, const char ** seq_breakers, size_t num_breakers);
	SamplerInitDRY func(v Vocab, multiplier, base float32, allowedLength, lastN int32, breakers unsafe.Pointer, nBreakers uintptr) Sampler
	// struct llama_sampler * llama_sampler_init_adaptive_p( float target, float decay, uint32_t seed);
	SamplerInitAdaptiveP func(target, decay float32, seed uint32) Sampler
	// struct llama_sampler * llama_sampler_init_logit_bias( int32_t n_vocab, int32_t n_logit_bias, const llama_logit_bias * logit_bias);
	SamplerInitLogitBias func(nVocab, n int32, biases unsafe.Pointer) Sampler
	// struct llama_sampler * llama_sampler_init_infill(const struct llama_vocab * vocab);
	SamplerInitInfill func(v Vocab) Sampler
	// uint32_t llama_sampler_get_seed(const struct llama_sampler * smpl);
	SamplerGetSeed func(s Sampler) uint32
	// llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx);
	SamplerSample func(s Sampler, c Context, idx int32) Token
)

func init() {
	register(libLlama,
		binding{fn: &SamplerInit, name: "llama_sampler_init"},
		binding{fn: &SamplerName, name: "llama_sampler_name"},
		binding{fn: &SamplerAccept, name: "llama_sampler_accept"},
		binding{fn: &SamplerApply, name: "llama_sampler_apply"},
		binding{fn: &SamplerReset, name: "llama_sampler_reset"},
		binding{fn: &SamplerClone, name: "llama_sampler_clone"},
		binding{fn: &SamplerFree, name: "llama_sampler_free"},
		binding{fn: &SamplerChainInit, name: "llama_sampler_chain_init"},
		binding{fn: &SamplerChainAdd, name: "llama_sampler_chain_add"},
		binding{fn: &SamplerChainGet, name: "llama_sampler_chain_get"},
		binding{fn: &SamplerChainN, name: "llama_sampler_chain_n"},
		binding{fn: &SamplerChainRemove, name: "llama_sampler_chain_remove"},
		binding{fn: &SamplerInitGreedy, name: "llama_sampler_init_greedy"},
		binding{fn: &SamplerInitDist, name: "llama_sampler_init_dist"},
		binding{fn: &SamplerInitTopK, name: "llama_sampler_init_top_k"},
		binding{fn: &SamplerInitTopP, name: "llama_sampler_init_top_p"},
		binding{fn: &SamplerInitMinP, name: "llama_sampler_init_min_p"},
		binding{fn: &SamplerInitTypical, name: "llama_sampler_init_typical"},
		binding{fn: &SamplerInitTemp, name: "llama_sampler_init_temp"},
		binding{fn: &SamplerInitTempExt, name: "llama_sampler_init_temp_ext"},
		binding{fn: &SamplerInitXTC, name: "llama_sampler_init_xtc"},
		binding{fn: &SamplerInitTopNSigma, name: "llama_sampler_init_top_n_sigma"},
		binding{fn: &SamplerInitMirostat, name: "llama_sampler_init_mirostat"},
		binding{fn: &SamplerInitMirostatV2, name: "llama_sampler_init_mirostat_v2"},
		binding{fn: &SamplerInitGrammar, name: "llama_sampler_init_grammar"},
		binding{fn: &SamplerInitGrammarLazyPatterns, name: "llama_sampler_init_grammar_lazy_patterns"},
		binding{fn: &SamplerInitPenalties, name: "llama_sampler_init_penalties"},
		binding{fn: &SamplerInitDRY, name: "llama_sampler_init_dry"},
		binding{fn: &SamplerInitAdaptiveP, name: "llama_sampler_init_adaptive_p"},
		binding{fn: &SamplerInitLogitBias, name: "llama_sampler_init_logit_bias"},
		binding{fn: &SamplerInitInfill, name: "llama_sampler_init_infill"},
		binding{fn: &SamplerGetSeed, name: "llama_sampler_get_seed"},
		binding{fn: &SamplerSample, name: "llama_sampler_sample"},
	)
}
