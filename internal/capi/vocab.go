package capi

import "unsafe"

// Vocabulary, tokenization and chat templates.

var (
	// enum llama_vocab_type llama_vocab_type(const struct llama_vocab * vocab);
	VocabType func(v Vocab) int32
	// int32_t llama_vocab_n_tokens(const struct llama_vocab * vocab);
	VocabNTokens func(v Vocab) int32
	// const char * llama_vocab_get_text(const struct llama_vocab * vocab, llama_token token);
	VocabGetText func(v Vocab, t Token) string
	// float llama_vocab_get_score(const struct llama_vocab * vocab, llama_token token);
	VocabGetScore func(v Vocab, t Token) float32
	// enum llama_token_attr llama_vocab_get_attr(const struct llama_vocab * vocab, llama_token token);
	VocabGetAttr func(v Vocab, t Token) int32
	// bool llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token);
	VocabIsEOG func(v Vocab, t Token) bool
	// bool llama_vocab_is_control(const struct llama_vocab * vocab, llama_token token);
	VocabIsControl func(v Vocab, t Token) bool
	// llama_token llama_vocab_bos(const struct llama_vocab * vocab);
	VocabBOS func(v Vocab) Token
	// llama_token llama_vocab_eos(const struct llama_vocab * vocab);
	VocabEOS func(v Vocab) Token
	// llama_token llama_vocab_eot(const struct llama_vocab * vocab);
	VocabEOT func(v Vocab) Token
	// llama_token llama_vocab_sep(const struct llama_vocab * vocab);
	VocabSEP func(v Vocab) Token
	// llama_token llama_vocab_nl (const struct llama_vocab * vocab);
	VocabNL func(v Vocab) Token
	// llama_token llama_vocab_pad(const struct llama_vocab * vocab);
	VocabPAD func(v Vocab) Token
	// llama_token llama_vocab_mask(const struct llama_vocab * vocab);
	VocabMASK func(v Vocab) Token
	// bool llama_vocab_get_add_bos(const struct llama_vocab * vocab);
	VocabGetAddBOS func(v Vocab) bool
	// bool llama_vocab_get_add_eos(const struct llama_vocab * vocab);
	VocabGetAddEOS func(v Vocab) bool
	// bool llama_vocab_get_add_sep(const struct llama_vocab * vocab);
	VocabGetAddSEP func(v Vocab) bool
	// llama_token llama_vocab_fim_pre(const struct llama_vocab * vocab);
	VocabFIMPre func(v Vocab) Token
	// llama_token llama_vocab_fim_suf(const struct llama_vocab * vocab);
	VocabFIMSuf func(v Vocab) Token
	// llama_token llama_vocab_fim_mid(const struct llama_vocab * vocab);
	VocabFIMMid func(v Vocab) Token
	// llama_token llama_vocab_fim_pad(const struct llama_vocab * vocab);
	VocabFIMPad func(v Vocab) Token
	// llama_token llama_vocab_fim_rep(const struct llama_vocab * vocab);
	VocabFIMRep func(v Vocab) Token
	// llama_token llama_vocab_fim_sep(const struct llama_vocab * vocab);
	VocabFIMSep func(v Vocab) Token
	// int32_t llama_tokenize( const struct llama_vocab * vocab, const char * text, int32_t text_len, llama_token * tokens, int32_t n_tokens_max, bool add_special, bool parse_special);
	Tokenize func(v Vocab, text unsafe.Pointer, textLen int32, tokens unsafe.Pointer, nMax int32, addSpecial, parseSpecial bool) int32
	// int32_t llama_token_to_piece( const struct llama_vocab * vocab, llama_token token, char * buf, int32_t length, int32_t lstrip, bool special);
	TokenToPiece func(v Vocab, t Token, buf unsafe.Pointer, length int32, lstrip int32, special bool) int32
	// int32_t llama_detokenize( const struct llama_vocab * vocab, const llama_token * tokens, int32_t n_tokens, char * text, int32_t text_len_max, bool remove_special, bool unparse_special);
	Detokenize func(v Vocab, tokens unsafe.Pointer, n int32, text unsafe.Pointer, max int32, removeSpecial, unparseSpecial bool) int32
	// int32_t llama_chat_apply_template( const char * tmpl, const struct llama_chat_message * chat, size_t n_msg, bool add_ass, char * buf, int32_t length);
	ChatApplyTemplate func(tmpl string, chat unsafe.Pointer, n uintptr, addAss bool, buf unsafe.Pointer, length int32) int32
	// int32_t llama_chat_builtin_templates(const char ** output, size_t len);
	ChatBuiltinTemplates func(out unsafe.Pointer, n uintptr) int32
)

func init() {
	register(libLlama,
		binding{fn: &VocabType, name: "llama_vocab_type"},
		binding{fn: &VocabNTokens, name: "llama_vocab_n_tokens"},
		binding{fn: &VocabGetText, name: "llama_vocab_get_text"},
		binding{fn: &VocabGetScore, name: "llama_vocab_get_score"},
		binding{fn: &VocabGetAttr, name: "llama_vocab_get_attr"},
		binding{fn: &VocabIsEOG, name: "llama_vocab_is_eog"},
		binding{fn: &VocabIsControl, name: "llama_vocab_is_control"},
		binding{fn: &VocabBOS, name: "llama_vocab_bos"},
		binding{fn: &VocabEOS, name: "llama_vocab_eos"},
		binding{fn: &VocabEOT, name: "llama_vocab_eot"},
		binding{fn: &VocabSEP, name: "llama_vocab_sep"},
		binding{fn: &VocabNL, name: "llama_vocab_nl"},
		binding{fn: &VocabPAD, name: "llama_vocab_pad"},
		binding{fn: &VocabMASK, name: "llama_vocab_mask"},
		binding{fn: &VocabGetAddBOS, name: "llama_vocab_get_add_bos"},
		binding{fn: &VocabGetAddEOS, name: "llama_vocab_get_add_eos"},
		binding{fn: &VocabGetAddSEP, name: "llama_vocab_get_add_sep"},
		binding{fn: &VocabFIMPre, name: "llama_vocab_fim_pre"},
		binding{fn: &VocabFIMSuf, name: "llama_vocab_fim_suf"},
		binding{fn: &VocabFIMMid, name: "llama_vocab_fim_mid"},
		binding{fn: &VocabFIMPad, name: "llama_vocab_fim_pad"},
		binding{fn: &VocabFIMRep, name: "llama_vocab_fim_rep"},
		binding{fn: &VocabFIMSep, name: "llama_vocab_fim_sep"},
		binding{fn: &Tokenize, name: "llama_tokenize"},
		binding{fn: &TokenToPiece, name: "llama_token_to_piece"},
		binding{fn: &Detokenize, name: "llama_detokenize"},
		binding{fn: &ChatApplyTemplate, name: "llama_chat_apply_template"},
		binding{fn: &ChatBuiltinTemplates, name: "llama_chat_builtin_templates"},
	)
}
