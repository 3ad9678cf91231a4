package gguf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Pooling types for [TinyModelOptions.PoolingType]. They match llama.cpp's
// enum llama_pooling_type, except that 0 selects the architecture default
// and PoolingNone (written as 0) must be asked for explicitly.
const (
	PoolingDefault = 0
	PoolingNone    = -1
	PoolingMean    = 1
	PoolingCLS     = 2
	PoolingLast    = 3
	PoolingRank    = 4
)

// TinyModelOptions describes a small random-weight model of a llama.cpp
// architecture. Zero fields take the defaults noted on each field.
type TinyModelOptions struct {
	// Arch is "llama" (decoder), "gemma3" (decoder, with sliding-window
	// layers when SlidingWindow is set), "gemma4" (as gemma3, its
	// full-context layers' heads twice as wide as the window's, with
	// SharedKVLayers and PerLayerEmbd), "mamba" (recurrent decoder: no
	// attention, NHead, NHeadKV and NFF unused; llama.cpp's expansion
	// factor 2, a convolution of 4 and a state of 16), "jamba" (hybrid
	// decoder: even layers Mamba's, odd ones attention without RoPE, each
	// with a feed-forward), "glm4moe" (GLM-4.5's decoder: a dense first
	// layer, then Experts sigmoid-routed experts of NFF beside one shared
	// expert, with NextN multi-token-prediction blocks), "qwen35"
	// (Qwen3.5's hybrid decoder: gated delta-net layers, every second one
	// a gated attention layer instead, with NextN MTP blocks) or "bert"
	// (encoder). Default "llama".
	Arch string
	// VocabFrom is the path of a vocab-only GGUF (e.g. from
	// models/vocab/) whose tokenizer.* keys are copied. Required.
	VocabFrom string
	// NEmbd is the embedding width. Default 64.
	NEmbd int
	// NLayer is the number of blocks. Default 2.
	NLayer int
	// NHead is the number of attention heads. Default 4. NEmbd/NHead must
	// be even (it is the rotary dimension for llama).
	NHead int
	// NHeadKV is the number of key/value heads. Default NHead; NHead must be
	// a multiple of it.
	NHeadKV int
	// NFF is the feed-forward width. Default 2*NEmbd.
	NFF int
	// NCtx is the training context length (for bert also the number of
	// position embeddings). Default 512.
	NCtx int
	// Seed seeds the random weights.
	Seed int64
	// Classifier, for bert, is the number of classification outputs. A
	// positive value makes a reranker: it adds cls.weight, cls.bias,
	// cls.output.weight and cls.output.bias, and the default pooling type
	// becomes PoolingRank. Values above 1 also write
	// bert.classifier.output_labels, which is how llama.cpp learns the
	// number of outputs.
	Classifier int
	// PoolingType is written as <arch>.pooling_type; see the Pooling*
	// constants. The default is none written for llama, PoolingCLS for bert
	// (PoolingRank with Classifier > 0).
	PoolingType int
	// Type is the type of the weight matrices (token embedding, output and
	// the blocks' projections): F32 (default), F16, Q8_0 or Q4_0. Norms
	// and biases stay F32. Quantized types need NEmbd and NFF to be
	// multiples of 32.
	Type TensorType
	// SlidingWindow, for gemma3, is the window of its sliding-window
	// layers (0: none, every layer sees the whole context), and
	// SlidingWindowPattern how often a layer is a full one: layer i is a
	// full-context layer when i%SlidingWindowPattern is
	// SlidingWindowPattern-1 (default 2: every other layer).
	SlidingWindow, SlidingWindowPattern int
	// SharedKVLayers, for gemma4, is how many of the last layers keep no
	// KV cache of their own and attend over that of the last earlier
	// layer of their kind (sliding or full), as Gemma 4's smaller models.
	SharedKVLayers int
	// PerLayerEmbd, for gemma4, is the width of the per-layer token
	// embeddings (per_layer_token_embd, NLayer*PerLayerEmbd wide, which
	// llama.cpp may read on demand: ModelOptions.Lazy); 0: none.
	PerLayerEmbd int
	// PassThrough, for glm4moe and qwen35, zeroes every block's output projections,
	// so that each layer passes its input on: the model predicts from the
	// last token alone, and its MTP head, whose projection takes the next
	// token's half of its input (plus a little of the hidden half),
	// predicts nearly what the model will: drafts the target accepts.
	PassThrough bool
	// Only, for glm4moe with NextN, writes part of the model: "trunk"
	// leaves out the MTP block's tensors (a model whose head ships apart),
	// "mtp" writes only what the head reads (the token embedding, the
	// output norm and head, the MTP block): llama.cpp's MTP sidecar file.
	// The tensors written hold the values of the whole model's.
	Only string
	// NextN, for glm4moe, is how many multi-token-prediction blocks
	// (blk.N.nextn.*, after the NLayer trunk blocks) it carries, for
	// llama.cpp's draft-mtp; 0: none.
	NextN int
	// Experts, for llama, makes a mixture of experts as Mixtral's: each
	// layer's feed-forward is Experts experts of NFF (ffn_*_exps, with the
	// router ffn_gate_inp), of which ExpertsUsed (default 2, at most
	// Experts) run for each token. 0: a dense feed-forward.
	Experts, ExpertsUsed int
	// ExtraKV is set last and may override any generated key.
	ExtraKV []KV
}

// BenchModel125M is the shape of a realistic small llama (about 125M
// parameters with a 32k vocabulary): 768 wide, 12 layers, 12 heads over 4
// KV heads, 2048 feed-forward. Set VocabFrom (a full vocabulary, e.g.
// llama-2-tiny-random.gguf) and Type.
var BenchModel125M = TinyModelOptions{NEmbd: 768, NLayer: 12, NHead: 12, NHeadKV: 4, NFF: 2048, NCtx: 4096}

// BenchModel1B is a 1B-class shape (Llama 3.2 1B's widths with a 32k
// vocabulary): 2048 wide, 16 layers, 32 heads over 8 KV heads, 8192
// feed-forward.
var BenchModel1B = TinyModelOptions{NEmbd: 2048, NLayer: 16, NHead: 32, NHeadKV: 8, NFF: 8192, NCtx: 4096}

func (o *TinyModelOptions) defaults() error {
	if o.Arch == "" {
		o.Arch = "llama"
	}
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.NEmbd, 64)
	def(&o.NLayer, 2)
	def(&o.NHead, 4)
	def(&o.NHeadKV, o.NHead)
	def(&o.NFF, 2*o.NEmbd)
	def(&o.NCtx, 512)
	def(&o.SlidingWindowPattern, 2)
	if o.Arch == "glm4moe" {
		def(&o.Experts, 4)
	}
	if o.Experts > 0 {
		def(&o.ExpertsUsed, min(2, o.Experts))
	}
	switch {
	case o.Arch != "llama" && o.Arch != "bert" && o.Arch != "gemma3" && o.Arch != "gemma4" && o.Arch != "mamba" && o.Arch != "jamba" && o.Arch != "glm4moe" && o.Arch != "qwen35":
		return fmt.Errorf("gguf: tiny model: unsupported architecture %q (want llama, gemma3, gemma4, mamba, jamba, glm4moe, qwen35 or bert)", o.Arch)
	case o.NextN != 0 && (o.Arch != "glm4moe" && o.Arch != "qwen35" || o.NextN != 1):
		return fmt.Errorf("gguf: tiny model: NextN is one block, for glm4moe or qwen35")
	case o.PassThrough && (o.Arch != "glm4moe" && o.Arch != "qwen35" || o.Type != F32):
		return fmt.Errorf("gguf: tiny model: PassThrough is for an F32 glm4moe or qwen35")
	case o.Only != "" && (o.NextN == 0 || o.Arch != "glm4moe" || o.Only != "trunk" && o.Only != "mtp"):
		return fmt.Errorf("gguf: tiny model: Only is \"trunk\" or \"mtp\", with NextN")
	case (o.SlidingWindow != 0 || o.SlidingWindowPattern != 2) && o.Arch != "gemma3" && o.Arch != "gemma4":
		return fmt.Errorf("gguf: tiny model: SlidingWindow needs the gemma3 or gemma4 architecture")
	case (o.SharedKVLayers != 0 || o.PerLayerEmbd != 0) && o.Arch != "gemma4":
		return fmt.Errorf("gguf: tiny model: SharedKVLayers and PerLayerEmbd need the gemma4 architecture")
	case o.Arch == "gemma4" && (o.SlidingWindow <= 0 || o.SharedKVLayers < 0 || o.PerLayerEmbd < 0 ||
		o.NLayer-o.SharedKVLayers < 2 || o.SlidingWindowPattern < 2 ||
		o.SharedKVLayers > 0 && (o.NLayer-o.SharedKVLayers)%o.SlidingWindowPattern != 0):
		// llama.cpp points a shared sliding-window layer at the second
		// last layer with a cache, and a shared full one at the last.
		return fmt.Errorf("gguf: tiny model: gemma4 needs a sliding window, a pattern of at least 2, and its last layers with a cache a sliding then a full one")
	case o.SlidingWindow < 0 || o.SlidingWindowPattern < 1:
		return fmt.Errorf("gguf: tiny model: negative sliding window or pattern")
	case o.VocabFrom == "":
		return fmt.Errorf("gguf: tiny model: VocabFrom is required")
	case o.NEmbd < 0 || o.NLayer < 0 || o.NHead < 0 || o.NHeadKV < 0 || o.NFF < 0 || o.NCtx < 0 || o.Classifier < 0:
		return fmt.Errorf("gguf: tiny model: negative size in options")
	case o.NEmbd%o.NHead != 0 || (o.NEmbd/o.NHead)%2 != 0:
		return fmt.Errorf("gguf: tiny model: NEmbd %d must be NHead %d times an even head size", o.NEmbd, o.NHead)
	case o.NHead%o.NHeadKV != 0:
		return fmt.Errorf("gguf: tiny model: NHead %d is not a multiple of NHeadKV %d", o.NHead, o.NHeadKV)
	case o.Experts < 0 || o.ExpertsUsed < 0 || o.ExpertsUsed > o.Experts:
		return fmt.Errorf("gguf: tiny model: %d experts with %d used", o.Experts, o.ExpertsUsed)
	case o.Experts > 0 && o.Arch != "llama" && o.Arch != "glm4moe":
		return fmt.Errorf("gguf: tiny model: Experts needs the llama or glm4moe architecture")
	case o.Classifier > 0 && o.Arch != "bert":
		return fmt.Errorf("gguf: tiny model: Classifier needs the bert architecture")
	case o.Type != F32 && o.Type != F16 && o.Type != Q8_0 && o.Type != Q4_0:
		return fmt.Errorf("gguf: tiny model: unsupported weight type %s", o.Type)
	case (o.Type == Q8_0 || o.Type == Q4_0) && (o.NEmbd%32 != 0 || o.NFF%32 != 0):
		return fmt.Errorf("gguf: tiny model: %s needs NEmbd and NFF multiples of 32", o.Type)
	case o.PoolingType < PoolingNone || o.PoolingType > PoolingRank:
		return fmt.Errorf("gguf: tiny model: invalid pooling type %d", o.PoolingType)
	}
	return nil
}

// randTensors adds random tensors to a writer: F32, but weight matrices
// of type typ.
type randTensors struct {
	w   *Writer
	rng *rand.Rand
	typ TensorType
	err error
	// skip, when set, leaves out the tensors it names: their values are
	// drawn all the same, so that the others are those of the whole set.
	skip func(name string) bool
}

// add adds a tensor of the given shape with values uniform in
// [center-spread, center+spread].
func (r *randTensors) add(name string, center, spread float32, shape ...int) {
	r.addTyped(name, F32, center, spread, shape...)
}

func (r *randTensors) addTyped(name string, typ TensorType, center, spread float32, shape ...int) {
	if r.err != nil {
		return
	}
	n := 1
	dims := make([]uint64, len(shape))
	for i, d := range shape {
		n *= d
		dims[i] = uint64(d)
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = center + spread*(2*r.rng.Float32()-1)
	}
	if r.skip != nil && r.skip(name) {
		return
	}
	b, err := Quantize(typ, data)
	if err != nil {
		r.err = err
		return
	}
	r.err = r.w.AddTensor(name, dims, typ, b)
}

// addData adds an F32 tensor of the given shape holding data.
func (r *randTensors) addData(name string, data []float32, shape ...int) {
	if r.err != nil || r.skip != nil && r.skip(name) {
		return
	}
	dims := make([]uint64, len(shape))
	for i, d := range shape {
		dims[i] = uint64(d)
	}
	b, err := Quantize(F32, data)
	if err != nil {
		r.err = err
		return
	}
	r.err = r.w.AddTensor(name, dims, F32, b)
}

// weight adds a matrix of the weight type, initialised with spread
// 1/sqrt(fan_in).
func (r *randTensors) weight(name string, nIn, nOut int) {
	r.addTyped(name, r.typ, 0, float32(1/math.Sqrt(float64(nIn))), nIn, nOut)
}

// vocabEnds adds the token embedding (of type typ), the output norm and
// an output projection of its own (embeddings not tied), for a model e
// wide with nVocab tokens.
func (r *randTensors) vocabEnds(typ TensorType, e, nVocab int) {
	r.addTyped("token_embd.weight", typ, 0, 0.5, e, nVocab)
	r.add("output_norm.weight", 1, 0.1, e)
	r.weight("output.weight", e, nVocab)
}

// output adds a block's output projection: a weight matrix, or zeros
// with pass (TinyModelOptions.PassThrough).
func (r *randTensors) output(name string, pass bool, shape ...int) {
	spread := float32(1 / math.Sqrt(float64(shape[0])))
	if pass {
		spread = 0
	}
	r.addTyped(name, r.typ, 0, spread, shape...)
}

// nextn adds an MTP block's own tensors (layer prefix p, width e): with
// pass, a projection that takes the next token's normed embedding and a
// little of the hidden state.
func (r *randTensors) nextn(p string, e int, pass bool) {
	if pass {
		proj := make([]float32, 2*e*e)
		for j := range e {
			proj[j*2*e+j] = 1
			for k := e; k < 2*e; k++ {
				proj[j*2*e+k] = 0.02 * (2*r.rng.Float32() - 1)
			}
		}
		r.addData(p+"nextn.eh_proj.weight", proj, 2*e, e)
	} else {
		r.weight(p+"nextn.eh_proj.weight", 2*e, e)
	}
	r.add(p+"nextn.enorm.weight", 1, 0.1, e)
	r.add(p+"nextn.hnorm.weight", 1, 0.1, e)
}

// experts adds n experts' matrices of the weight type, as weight does
// one.
func (r *randTensors) experts(name string, nIn, nOut, n int) {
	r.addTyped(name, r.typ, 0, float32(1/math.Sqrt(float64(nIn))), nIn, nOut, n)
}

// gemmaFeedForward adds a Gemma block's attention output norm and its
// normed feed-forward, the tensors of layer prefix p.
func (r *randTensors) gemmaFeedForward(p string, e, ff int) {
	r.add(p+"post_attention_norm.weight", 1, 0.1, e)
	r.add(p+"ffn_norm.weight", 1, 0.1, e)
	r.weight(p+"ffn_gate.weight", e, ff)
	r.weight(p+"ffn_down.weight", ff, e)
	r.weight(p+"ffn_up.weight", e, ff)
	r.add(p+"post_ffw_norm.weight", 1, 0.1, e)
}

func newRand(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
}

// WriteTinyModel writes a small random-weight model to path that llama.cpp's
// loader accepts for the chosen architecture: the hyper-parameter keys it
// requires (with the exact value types it checks), the tokenizer copied from
// o.VocabFrom, and exactly the tensors its load_tensors creates, all F32.
func WriteTinyModel(path string, o TinyModelOptions) error {
	if err := o.defaults(); err != nil {
		return err
	}
	vocab, err := Open(o.VocabFrom)
	if err != nil {
		return err
	}
	tokens, ok := vocab.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 {
		return fmt.Errorf("gguf: tiny model: %s has no tokenizer.ggml.tokens", o.VocabFrom)
	}
	nVocab := len(tokens)

	w := NewWriter()
	a := o.Arch
	u32 := func(v int) uint32 { return uint32(v) }
	w.SetKV("general.architecture", a)
	w.SetKV("general.type", "model")
	w.SetKV("general.name", "tiny-random-"+a)
	// llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7.
	w.SetKV("general.file_type", map[TensorType]uint32{F32: 0, F16: 1, Q4_0: 2, Q8_0: 7}[o.Type])
	w.SetKV(a+".context_length", u32(o.NCtx))
	w.SetKV(a+".embedding_length", u32(o.NEmbd))
	w.SetKV(a+".block_count", u32(o.NLayer+o.NextN))
	if a == "mamba" {
		// No attention and no feed-forward: what llama.cpp's converter
		// writes for Mamba.
		w.SetKV(a+".feed_forward_length", uint32(0))
		w.SetKV(a+".attention.head_count", uint32(0))
		w.SetKV(a+".attention.head_count_kv", uint32(0))
	} else {
		w.SetKV(a+".feed_forward_length", u32(o.NFF))
		w.SetKV(a+".attention.head_count", u32(o.NHead))
		if a == "jamba" {
			// Per layer: 0 KV heads makes a Mamba layer.
			kv := make([]uint32, o.NLayer)
			for i := range kv {
				if i%2 == 1 {
					kv[i] = u32(o.NHeadKV)
				}
			}
			w.SetKV(a+".attention.head_count_kv", kv)
		} else {
			w.SetKV(a+".attention.head_count_kv", u32(o.NHeadKV))
		}
	}
	headDim := o.NEmbd / o.NHead
	nEmbdKV := headDim * o.NHeadKV
	pooling := o.PoolingType
	switch a {
	case "llama":
		w.SetKV(a+".rope.dimension_count", u32(headDim))
		if o.Experts > 0 {
			w.SetKV(a+".expert_count", u32(o.Experts))
			w.SetKV(a+".expert_used_count", u32(o.ExpertsUsed))
		}
		w.SetKV(a+".rope.freq_base", float32(10000))
		w.SetKV(a+".attention.layer_norm_rms_epsilon", float32(1e-5))
		w.SetKV(a+".vocab_size", u32(nVocab))
	case "glm4moe":
		w.SetKV(a+".rope.dimension_count", u32(headDim/2))
		w.SetKV(a+".rope.freq_base", float32(10000))
		w.SetKV(a+".attention.layer_norm_rms_epsilon", float32(1e-5))
		w.SetKV(a+".expert_count", u32(o.Experts))
		w.SetKV(a+".expert_used_count", u32(o.ExpertsUsed))
		w.SetKV(a+".expert_feed_forward_length", u32(o.NFF))
		w.SetKV(a+".expert_shared_count", uint32(1))
		w.SetKV(a+".leading_dense_block_count", uint32(1))
		w.SetKV(a+".expert_weights_norm", true)
		w.SetKV(a+".expert_weights_scale", float32(1))
		w.SetKV(a+".expert_gating_func", uint32(2)) // sigmoid
		w.SetKV(a+".nextn_predict_layers", u32(o.NextN))
		w.SetKV(a+".vocab_size", u32(nVocab))
	case "qwen35":
		// Gated delta-net layers of qwenSSMGroups key heads and
		// qwenSSMHeads value heads of qwenSSMState; every second layer
		// attention, its heads roped by sections.
		w.SetKV(a+".attention.key_length", u32(headDim))
		w.SetKV(a+".attention.value_length", u32(headDim))
		w.SetKV(a+".rope.dimension_count", u32(headDim))
		w.SetKV(a+".rope.dimension_sections", []int32{int32(headDim / 4), int32(headDim / 8), int32(headDim / 8), 0})
		w.SetKV(a+".rope.freq_base", float32(10000000))
		w.SetKV(a+".attention.layer_norm_rms_epsilon", float32(1e-6))
		w.SetKV(a+".ssm.conv_kernel", u32(mambaConv))
		w.SetKV(a+".ssm.state_size", u32(qwenSSMState))
		w.SetKV(a+".ssm.group_count", u32(qwenSSMGroups))
		w.SetKV(a+".ssm.time_step_rank", u32(qwenSSMHeads))
		w.SetKV(a+".ssm.inner_size", u32(qwenSSMState*qwenSSMHeads))
		w.SetKV(a+".full_attention_interval", uint32(2))
		w.SetKV(a+".nextn_predict_layers", u32(o.NextN))
		w.SetKV(a+".vocab_size", u32(nVocab))
	case "gemma3":
		w.SetKV(a+".rope.freq_base", float32(10000))
		w.SetKV(a+".attention.layer_norm_rms_epsilon", float32(1e-6))
		w.SetKV(a+".attention.key_length", u32(headDim))
		w.SetKV(a+".attention.value_length", u32(headDim))
		if o.SlidingWindow > 0 {
			w.SetKV(a+".attention.sliding_window", u32(o.SlidingWindow))
			w.SetKV(a+".attention.sliding_window_pattern", u32(o.SlidingWindowPattern))
		}
	case "gemma4":
		// Sliding-window layers have heads of headDim, full ones of
		// twice that, each with RoPE over its whole head.
		w.SetKV(a+".rope.freq_base", float32(1000000))
		w.SetKV(a+".rope.freq_base_swa", float32(10000))
		w.SetKV(a+".attention.layer_norm_rms_epsilon", float32(1e-6))
		w.SetKV(a+".attention.key_length", u32(2*headDim))
		w.SetKV(a+".attention.value_length", u32(2*headDim))
		w.SetKV(a+".rope.dimension_count", u32(2*headDim))
		w.SetKV(a+".attention.key_length_swa", u32(headDim))
		w.SetKV(a+".attention.value_length_swa", u32(headDim))
		w.SetKV(a+".rope.dimension_count_swa", u32(headDim))
		w.SetKV(a+".attention.sliding_window", u32(o.SlidingWindow))
		w.SetKV(a+".attention.sliding_window_pattern", o.gemma4SWA())
		w.SetKV(a+".attention.shared_kv_layers", u32(o.SharedKVLayers))
		w.SetKV(a+".embedding_length_per_layer_input", u32(o.PerLayerEmbd))
		w.SetKV(a+".final_logit_softcapping", float32(30))
	case "mamba", "jamba":
		w.SetKV(a+".ssm.conv_kernel", u32(mambaConv))
		w.SetKV(a+".ssm.inner_size", u32(2*o.NEmbd))
		w.SetKV(a+".ssm.state_size", u32(mambaState))
		w.SetKV(a+".ssm.time_step_rank", u32(mambaDtRank(o.NEmbd)))
		w.SetKV(a+".attention.layer_norm_rms_epsilon", float32(1e-5))
		w.SetKV(a+".vocab_size", u32(nVocab))
	case "bert":
		w.SetKV(a+".attention.layer_norm_epsilon", float32(1e-12))
		w.SetKV(a+".attention.causal", false)
		if pooling == PoolingDefault {
			pooling = PoolingCLS
			if o.Classifier > 0 {
				pooling = PoolingRank
			}
		}
		if o.Classifier > 1 {
			labels := make([]string, o.Classifier)
			for i := range labels {
				labels[i] = fmt.Sprintf("LABEL_%d", i)
			}
			w.SetKV(a+".classifier.output_labels", labels)
		}
	}
	switch {
	case pooling == PoolingNone:
		w.SetKV(a+".pooling_type", uint32(0))
	case pooling != PoolingDefault:
		w.SetKV(a+".pooling_type", u32(pooling))
	}
	w.CopyKV(vocab, func(key string) bool { return !strings.HasPrefix(key, "tokenizer.") })
	nTokenTypes := 0
	if a == "bert" {
		// llama.cpp's bert loader refuses a vocab without token types.
		if v, ok := vocab.Int("tokenizer.ggml.token_type_count"); ok && v > 0 {
			nTokenTypes = v
		} else {
			nTokenTypes = 2
			w.SetKV("tokenizer.ggml.token_type_count", uint32(2))
		}
	}
	for _, kv := range o.ExtraKV {
		w.SetKV(kv.Key, kv.Value)
	}

	r := &randTensors{w: w, rng: newRand(o.Seed), typ: o.Type}
	if o.Only != "" {
		head := fmt.Sprintf("blk.%d.", o.NLayer) // the MTP block (NextN is 1)
		r.skip = func(name string) bool {
			inHead := strings.HasPrefix(name, head)
			if o.Only == "trunk" {
				return inHead
			}
			return !inHead && name != "token_embd.weight" && name != "output_norm.weight" && name != "output.weight"
		}
	}
	e, ff := o.NEmbd, o.NFF
	switch a {
	case "llama":
		r.vocabEnds(o.Type, e, nVocab)
		for i := 0; i < o.NLayer; i++ {
			p := fmt.Sprintf("blk.%d.", i)
			r.add(p+"attn_norm.weight", 1, 0.1, e)
			r.weight(p+"attn_q.weight", e, e)
			r.weight(p+"attn_k.weight", e, nEmbdKV)
			r.weight(p+"attn_v.weight", e, nEmbdKV)
			r.weight(p+"attn_output.weight", e, e)
			r.add(p+"ffn_norm.weight", 1, 0.1, e)
			if o.Experts > 0 {
				r.add(p+"ffn_gate_inp.weight", 0, float32(1/math.Sqrt(float64(e))), e, o.Experts)
				r.experts(p+"ffn_gate_exps.weight", e, ff, o.Experts)
				r.experts(p+"ffn_down_exps.weight", ff, e, o.Experts)
				r.experts(p+"ffn_up_exps.weight", e, ff, o.Experts)
				continue
			}
			r.weight(p+"ffn_gate.weight", e, ff)
			r.weight(p+"ffn_down.weight", ff, e)
			r.weight(p+"ffn_up.weight", e, ff)
		}
	case "glm4moe":
		out := func(name string, shape ...int) { r.output(name, o.PassThrough, shape...) }
		r.vocabEnds(o.Type, e, nVocab)
		for i := 0; i < o.NLayer+o.NextN; i++ {
			p := fmt.Sprintf("blk.%d.", i)
			r.add(p+"attn_norm.weight", 1, 0.1, e)
			r.weight(p+"attn_q.weight", e, e)
			r.weight(p+"attn_k.weight", e, nEmbdKV)
			r.weight(p+"attn_v.weight", e, nEmbdKV)
			r.add(p+"attn_q.bias", 0, 0.1, e)
			r.add(p+"attn_k.bias", 0, 0.1, nEmbdKV)
			r.add(p+"attn_v.bias", 0, 0.1, nEmbdKV)
			out(p+"attn_output.weight", e, e)
			r.add(p+"post_attention_norm.weight", 1, 0.1, e)
			if i == 0 {
				r.weight(p+"ffn_gate.weight", e, ff)
				out(p+"ffn_down.weight", ff, e)
				r.weight(p+"ffn_up.weight", e, ff)
				continue
			}
			r.add(p+"ffn_gate_inp.weight", 0, float32(1/math.Sqrt(float64(e))), e, o.Experts)
			r.add(p+"exp_probs_b.bias", 0, 0.1, o.Experts)
			r.experts(p+"ffn_gate_exps.weight", e, ff, o.Experts)
			out(p+"ffn_down_exps.weight", ff, e, o.Experts)
			r.experts(p+"ffn_up_exps.weight", e, ff, o.Experts)
			r.weight(p+"ffn_gate_shexp.weight", e, ff)
			out(p+"ffn_down_shexp.weight", ff, e)
			r.weight(p+"ffn_up_shexp.weight", e, ff)
			if i >= o.NLayer {
				r.nextn(p, e, o.PassThrough)
			}
		}
	case "qwen35":
		kd, vd := qwenSSMState*qwenSSMGroups, qwenSSMState*qwenSSMHeads
		r.vocabEnds(o.Type, e, nVocab)
		for i := 0; i < o.NLayer+o.NextN; i++ {
			p := fmt.Sprintf("blk.%d.", i)
			r.add(p+"attn_norm.weight", 1, 0.1, e)
			r.add(p+"post_attention_norm.weight", 1, 0.1, e)
			if i < o.NLayer && i%2 == 0 {
				// Gated delta net: q, k, v in one projection, z apart.
				r.weight(p+"attn_qkv.weight", e, 2*kd+vd)
				r.weight(p+"attn_gate.weight", e, vd)
				r.add(p+"ssm_conv1d.weight", 0, 0.5, mambaConv, 2*kd+vd)
				r.add(p+"ssm_dt.bias", 0, 0.5, qwenSSMHeads)
				r.add(p+"ssm_a", -0.5, 0.3, qwenSSMHeads)
				r.weight(p+"ssm_beta.weight", e, qwenSSMHeads)
				r.weight(p+"ssm_alpha.weight", e, qwenSSMHeads)
				r.add(p+"ssm_norm.weight", 1, 0.1, qwenSSMState)
				r.output(p+"ssm_out.weight", o.PassThrough, vd, e)
			} else {
				// Gated attention: the query projection also makes the
				// gate.
				r.weight(p+"attn_q.weight", e, 2*headDim*o.NHead)
				r.weight(p+"attn_k.weight", e, nEmbdKV)
				r.weight(p+"attn_v.weight", e, nEmbdKV)
				r.output(p+"attn_output.weight", o.PassThrough, headDim*o.NHead, e)
				r.add(p+"attn_q_norm.weight", 1, 0.1, headDim)
				r.add(p+"attn_k_norm.weight", 1, 0.1, headDim)
			}
			r.weight(p+"ffn_gate.weight", e, ff)
			r.output(p+"ffn_down.weight", o.PassThrough, ff, e)
			r.weight(p+"ffn_up.weight", e, ff)
			if i >= o.NLayer {
				r.nextn(p, e, o.PassThrough)
			}
		}
	case "gemma3":
		hd := headDim
		r.addTyped("token_embd.weight", o.Type, 0, 0.5, e, nVocab)
		r.add("output_norm.weight", 1, 0.1, e)
		for i := 0; i < o.NLayer; i++ {
			p := fmt.Sprintf("blk.%d.", i)
			r.add(p+"attn_norm.weight", 1, 0.1, e)
			r.weight(p+"attn_q.weight", e, e)
			r.weight(p+"attn_k.weight", e, nEmbdKV)
			r.weight(p+"attn_v.weight", e, nEmbdKV)
			r.add(p+"attn_q_norm.weight", 1, 0.1, hd)
			r.add(p+"attn_k_norm.weight", 1, 0.1, hd)
			r.weight(p+"attn_output.weight", e, e)
			r.gemmaFeedForward(p, e, ff)
		}
	case "gemma4":
		r.addTyped("token_embd.weight", o.Type, 0, 0.5, e, nVocab)
		r.add("output_norm.weight", 1, 0.1, e)
		r.add("rope_freqs.weight", 1, 0, headDim) // full heads' RoPE: 2*headDim/2 factors
		pl := o.PerLayerEmbd
		if pl > 0 {
			r.addTyped("per_layer_token_embd.weight", o.Type, 0, 0.5, pl*o.NLayer, nVocab)
			r.weight("per_layer_model_proj.weight", e, pl*o.NLayer)
			r.add("per_layer_proj_norm.weight", 1, 0.1, pl)
		}
		swa := o.gemma4SWA()
		for i := 0; i < o.NLayer; i++ {
			p := fmt.Sprintf("blk.%d.", i)
			hd := headDim
			if !swa[i] {
				hd = 2 * headDim
			}
			r.add(p+"attn_norm.weight", 1, 0.1, e)
			r.weight(p+"attn_q.weight", e, o.NHead*hd)
			r.add(p+"attn_q_norm.weight", 1, 0.1, hd)
			if i < o.NLayer-o.SharedKVLayers {
				r.weight(p+"attn_k.weight", e, o.NHeadKV*hd)
				r.weight(p+"attn_v.weight", e, o.NHeadKV*hd)
				r.add(p+"attn_k_norm.weight", 1, 0.1, hd)
			}
			r.weight(p+"attn_output.weight", o.NHead*hd, e)
			r.gemmaFeedForward(p, e, ff)
			if pl > 0 {
				r.weight(p+"inp_gate.weight", e, pl)
				r.weight(p+"proj.weight", pl, e)
				r.add(p+"post_norm.weight", 1, 0.1, e)
			}
		}
	case "mamba", "jamba":
		inner, conv, state, dt := 2*e, mambaConv, mambaState, mambaDtRank(e)
		// Small embeddings (each block normalises its input): the
		// residual stream is then the blocks' output more than the
		// current token's embedding.
		r.addTyped("token_embd.weight", o.Type, 0, 0.02, e, nVocab)
		r.add("output_norm.weight", 1, 0.1, e)
		r.weight("output.weight", e, nVocab)
		for i := 0; i < o.NLayer; i++ {
			p := fmt.Sprintf("blk.%d.", i)
			r.add(p+"attn_norm.weight", 1, 0.1, e)
			if a == "jamba" {
				r.add(p+"ffn_norm.weight", 1, 0.1, e)
				r.weight(p+"ffn_gate.weight", e, ff)
				r.weight(p+"ffn_down.weight", ff, e)
				r.weight(p+"ffn_up.weight", e, ff)
				if i%2 == 1 {
					r.weight(p+"attn_q.weight", e, e)
					r.weight(p+"attn_k.weight", e, nEmbdKV)
					r.weight(p+"attn_v.weight", e, nEmbdKV)
					r.weight(p+"attn_output.weight", e, e)
					continue
				}
				r.add(p+"ssm_dt_norm.weight", 1, 0.1, dt)
				r.add(p+"ssm_b_norm.weight", 1, 0.1, state)
				r.add(p+"ssm_c_norm.weight", 1, 0.1, state)
			}
			r.weight(p+"ssm_in.weight", e, 2*inner)
			r.add(p+"ssm_conv1d.weight", 0, 0.5, conv, inner)
			r.add(p+"ssm_conv1d.bias", 0, 0.1, inner)
			r.weight(p+"ssm_x.weight", inner, dt+2*state)
			r.weight(p+"ssm_dt.weight", dt, inner)
			// A small time step (softplus(-4) is about 0.02) and A, stored
			// as -exp(A_log), negative but small: the state decays slowly,
			// so that outputs depend on tokens far back (what tests of
			// the recurrent state need to tell a wrong state).
			r.add(p+"ssm_dt.bias", 0, 0.5, inner)
			r.add(p+"ssm_a", -0.02, 0.015, state, inner)
			r.add(p+"ssm_d", 0, 0.1, inner)
			r.weight(p+"ssm_out.weight", inner, e)
		}
	case "bert":
		r.add("token_embd.weight", 0, 0.5, e, nVocab)
		r.add("token_types.weight", 0, 0.1, e, nTokenTypes)
		r.add("position_embd.weight", 0, 0.1, e, o.NCtx)
		r.add("token_embd_norm.weight", 1, 0.1, e)
		r.add("token_embd_norm.bias", 0, 0.1, e)
		if o.Classifier > 0 {
			r.weight("cls.weight", e, e)
			r.add("cls.bias", 0, 0.1, e)
			r.weight("cls.output.weight", e, o.Classifier)
			r.add("cls.output.bias", 0, 0.1, o.Classifier)
		}
		for i := 0; i < o.NLayer; i++ {
			p := fmt.Sprintf("blk.%d.", i)
			r.weight(p+"attn_q.weight", e, e)
			r.add(p+"attn_q.bias", 0, 0.1, e)
			r.weight(p+"attn_k.weight", e, nEmbdKV)
			r.add(p+"attn_k.bias", 0, 0.1, nEmbdKV)
			r.weight(p+"attn_v.weight", e, nEmbdKV)
			r.add(p+"attn_v.bias", 0, 0.1, nEmbdKV)
			r.weight(p+"attn_output.weight", e, e)
			r.add(p+"attn_output.bias", 0, 0.1, e)
			r.add(p+"attn_output_norm.weight", 1, 0.1, e)
			r.add(p+"attn_output_norm.bias", 0, 0.1, e)
			r.weight(p+"ffn_up.weight", e, ff)
			r.add(p+"ffn_up.bias", 0, 0.1, ff)
			r.weight(p+"ffn_down.weight", ff, e)
			r.add(p+"ffn_down.bias", 0, 0.1, e)
			r.add(p+"layer_output_norm.weight", 1, 0.1, e)
			r.add(p+"layer_output_norm.bias", 0, 0.1, e)
		}
	}
	if r.err != nil {
		return r.err
	}
	return w.WriteFile(path)
}

// The gated delta-net sizes of a tiny qwen35: key heads (groups), value
// heads and the state (head) size.
const (
	qwenSSMGroups = 2
	qwenSSMHeads  = 4
	qwenSSMState  = 16
)

// gemma4SWA is which layers of a gemma4 use the sliding window: all but
// the last of each SlidingWindowPattern.
func (o *TinyModelOptions) gemma4SWA() []bool {
	swa := make([]bool, o.NLayer)
	for i := range swa {
		swa[i] = i%o.SlidingWindowPattern < o.SlidingWindowPattern-1
	}
	return swa
}

// The tiny Mamba's convolution width and state size (llama.cpp's Mamba
// defaults), and its time-step rank: ceil(NEmbd/16), as Mamba's.
const (
	mambaConv  = 4
	mambaState = 16
)

func mambaDtRank(nEmbd int) int { return (nEmbd + 15) / 16 }

var defaultLoRATarget = regexp.MustCompile(`^blk\.\d+\.attn_[qv]\.weight$`)

// LoRAShapes returns the shapes llama.cpp expects for the lora_a and lora_b
// tensors adapting a base tensor of shape base (ne[0] = inputs, ne[1] =
// outputs) at the given rank. For a token embedding, which llama.cpp applies
// through a row lookup, A is [rank, n_vocab] and B is [rank, n_embd];
// otherwise A is [n_in, rank] and B is [rank, n_out].
func LoRAShapes(name string, base []uint64, rank int) (a, b []uint64, err error) {
	if len(base) != 2 {
		return nil, nil, fmt.Errorf("gguf: lora target %q has shape %v, want a matrix", name, base)
	}
	if rank <= 0 {
		return nil, nil, fmt.Errorf("gguf: lora rank %d must be positive", rank)
	}
	r := uint64(rank)
	if strings.HasSuffix(name, "token_embd.weight") {
		return []uint64{r, base[1]}, []uint64{r, base[0]}, nil
	}
	return []uint64{base[0], r}, []uint64{r, base[1]}, nil
}

// WriteLoRA writes a LoRA adapter GGUF for the model described by base:
// general.type=adapter, adapter.type=lora, adapter.lora.alpha, the base
// model's general.architecture, and for each target base tensor (e.g.
// "blk.0.attn_q.weight") F32 tensors "<name>.lora_a" and "<name>.lora_b"
// shaped as [LoRAShapes] describes, with values uniform in [-scale, scale].
// An empty targets list selects every blk.N.attn_q.weight and
// blk.N.attn_v.weight of the base model.
func WriteLoRA(path string, base *File, targets []string, rank int, alpha float32, seed int64, scale float32) error {
	arch := base.Architecture()
	if arch == "" {
		return fmt.Errorf("gguf: lora: base model has no general.architecture")
	}
	if len(targets) == 0 {
		for _, t := range base.Tensors {
			if defaultLoRATarget.MatchString(t.Name) {
				targets = append(targets, t.Name)
			}
		}
		if len(targets) == 0 {
			return fmt.Errorf("gguf: lora: base model has no attn_q/attn_v weights to target")
		}
	}
	w := NewWriter()
	w.SetKV("general.architecture", arch)
	w.SetKV("general.type", "adapter")
	w.SetKV("general.name", "tiny-random-lora")
	w.SetKV("adapter.type", "lora")
	w.SetKV("adapter.lora.alpha", alpha)
	r := &randTensors{w: w, rng: newRand(seed)}
	for _, name := range targets {
		t, ok := base.Tensor(name)
		if !ok {
			return fmt.Errorf("gguf: lora: base model has no tensor %q", name)
		}
		as, bs, err := LoRAShapes(name, t.Shape, rank)
		if err != nil {
			return err
		}
		r.add(name+".lora_a", 0, scale, int(as[0]), int(as[1]))
		r.add(name+".lora_b", 0, scale, int(bs[0]), int(bs[1]))
		if r.err != nil {
			return r.err
		}
	}
	return w.WriteFile(path)
}

// BenchModelFile returns the path of a random-weight benchmark model of the
// given shape and weight type with the vocabulary of vocabFrom, writing it
// on first use into the user's cache folder (about 133 MB for the 125M
// shape in Q8_0) and reusing it after. Benchmark models are made, never
// stored in the repository. The weights' seed is shape.Seed, 1 when zero.
func BenchModelFile(vocabFrom, name string, shape TinyModelOptions, typ TensorType) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "go-llama-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+"-"+strings.ToLower(typ.String())+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	shape.VocabFrom, shape.Type = vocabFrom, typ
	if shape.Seed == 0 {
		shape.Seed = 1
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := WriteTinyModel(tmp, shape); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, os.Rename(tmp, path)
}
