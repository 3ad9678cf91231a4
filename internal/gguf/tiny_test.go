package gguf

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func vocabPath(t *testing.T, name string) string {
	return filepath.Join(modelsDir(t), "vocab", "ggml-vocab-"+name+".gguf")
}

// assertKVs asserts that f holds each key of want with its value.
func assertKVs(t *testing.T, f *File, want map[string]any) {
	t.Helper()
	for key, v := range want {
		got, ok := f.Get(key)
		assert.True(t, ok, key)
		assert.Equal(t, v, got, key)
	}
}

func requireShapes(t *testing.T, f *File, want map[string][]uint64) {
	t.Helper()
	got := map[string][]uint64{}
	for _, ti := range f.Tensors {
		assert.Equal(t, F32, ti.Type, ti.Name)
		got[ti.Name] = ti.Shape
	}
	assert.Equal(t, want, got)
}

func TestWriteTinyLlama(t *testing.T) {
	vocab, err := Open(vocabPath(t, "llama-spm"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "llama.gguf")
	require.NoError(t, WriteTinyModel(path, TinyModelOptions{
		Arch: "llama", VocabFrom: vocabPath(t, "llama-spm"),
		NEmbd: 32, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 48, NCtx: 256, Seed: 1,
		ExtraKV: []KV{{"general.name", "custom"}},
	}))
	f, err := Open(path)
	require.NoError(t, err)

	assertKVs(t, f, map[string]any{
		"general.architecture":                   "llama",
		"general.name":                           "custom",
		"general.file_type":                      uint32(0),
		"llama.context_length":                   uint32(256),
		"llama.embedding_length":                 uint32(32),
		"llama.block_count":                      uint32(2),
		"llama.feed_forward_length":              uint32(48),
		"llama.attention.head_count":             uint32(4),
		"llama.attention.head_count_kv":          uint32(2),
		"llama.rope.dimension_count":             uint32(8), // must equal n_embd/n_head for llama
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.vocab_size":                       uint32(32000),
	})
	_, ok := f.Get("llama.pooling_type")
	assert.False(t, ok, "decoder default pooling is left to llama.cpp")
	// Every tokenizer key of the vocab is copied verbatim; nothing else is.
	for _, kv := range vocab.KV {
		got, ok := f.Get(kv.Key)
		if len(kv.Key) > 10 && kv.Key[:10] == "tokenizer." {
			assert.True(t, ok, kv.Key)
			assert.Equal(t, kv.Value, got, kv.Key)
		}
	}
	_, ok = f.Get("llama.attention.head_count_kv")
	assert.True(t, ok)

	const e, ff, kv, nv = 32, 48, 16, 32000
	want := map[string][]uint64{
		"token_embd.weight":  {e, nv},
		"output_norm.weight": {e},
		"output.weight":      {e, nv},
	}
	for _, p := range []string{"blk.0.", "blk.1."} {
		want[p+"attn_norm.weight"] = []uint64{e}
		want[p+"attn_q.weight"] = []uint64{e, e}
		want[p+"attn_k.weight"] = []uint64{e, kv}
		want[p+"attn_v.weight"] = []uint64{e, kv}
		want[p+"attn_output.weight"] = []uint64{e, e}
		want[p+"ffn_norm.weight"] = []uint64{e}
		want[p+"ffn_gate.weight"] = []uint64{e, ff}
		want[p+"ffn_down.weight"] = []uint64{ff, e}
		want[p+"ffn_up.weight"] = []uint64{e, ff}
	}
	requireShapes(t, f, want)

	// Weights are random, finite and reproducible from the seed.
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	q, err := f.TensorF32(fh, "blk.1.attn_q.weight")
	require.NoError(t, err)
	assert.NotEqual(t, q[0], q[1])
	path2 := filepath.Join(t.TempDir(), "again.gguf")
	require.NoError(t, WriteTinyModel(path2, TinyModelOptions{
		Arch: "llama", VocabFrom: vocabPath(t, "llama-spm"),
		NEmbd: 32, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 48, NCtx: 256, Seed: 1,
		ExtraKV: []KV{{"general.name", "custom"}},
	}))
	b1, err := os.ReadFile(path)
	require.NoError(t, err)
	b2, err := os.ReadFile(path2)
	require.NoError(t, err)
	assert.Equal(t, b1, b2)
}

func TestWriteTinyBert(t *testing.T) {
	tests := []struct {
		name       string
		classifier int
		pooling    int
		wantPool   uint32
		labels     int
	}{
		{"embedding", 0, 0, PoolingCLS, 0},
		{"mean", 0, PoolingMean, PoolingMean, 0},
		{"none", 0, PoolingNone, 0, 0},
		{"reranker", 1, 0, PoolingRank, 0},
		{"classifier", 3, 0, PoolingRank, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bert.gguf")
			require.NoError(t, WriteTinyModel(path, TinyModelOptions{
				Arch: "bert", VocabFrom: vocabPath(t, "bert-bge"),
				NEmbd: 32, NLayer: 1, NHead: 2, NFF: 64, NCtx: 128,
				Classifier: tc.classifier, PoolingType: tc.pooling,
			}))
			f, err := Open(path)
			require.NoError(t, err)
			assert.Equal(t, "bert", f.Architecture())
			causal, ok := f.Bool("bert.attention.causal")
			assert.True(t, ok)
			assert.False(t, causal)
			eps, ok := f.Float32("bert.attention.layer_norm_epsilon")
			assert.True(t, ok)
			assert.Greater(t, eps, float32(0))
			pool, ok := f.Uint32("bert.pooling_type")
			assert.True(t, ok)
			assert.Equal(t, tc.wantPool, pool)
			labels, ok := f.Strings("bert.classifier.output_labels")
			assert.Equal(t, tc.labels > 0, ok)
			assert.Len(t, labels, tc.labels)
			model, _ := f.String("tokenizer.ggml.model")
			assert.Equal(t, "bert", model)
			types, ok := f.Uint32("tokenizer.ggml.token_type_count")
			assert.True(t, ok)
			assert.Equal(t, uint32(2), types)

			const e, ff, nv = 32, 64, 30522
			want := map[string][]uint64{
				"token_embd.weight":      {e, nv},
				"token_types.weight":     {e, 2},
				"position_embd.weight":   {e, 128},
				"token_embd_norm.weight": {e},
				"token_embd_norm.bias":   {e},
			}
			if tc.classifier > 0 {
				c := uint64(tc.classifier)
				want["cls.weight"] = []uint64{e, e}
				want["cls.bias"] = []uint64{e}
				want["cls.output.weight"] = []uint64{e, c}
				want["cls.output.bias"] = []uint64{c}
			}
			p := "blk.0."
			for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
				want[p+n+".weight"] = []uint64{e, e}
				want[p+n+".bias"] = []uint64{e}
			}
			for _, n := range []string{"attn_output_norm", "layer_output_norm"} {
				want[p+n+".weight"] = []uint64{e}
				want[p+n+".bias"] = []uint64{e}
			}
			want[p+"ffn_up.weight"] = []uint64{e, ff}
			want[p+"ffn_up.bias"] = []uint64{ff}
			want[p+"ffn_down.weight"] = []uint64{ff, e}
			want[p+"ffn_down.bias"] = []uint64{e}
			requireShapes(t, f, want)
		})
	}
}

func TestWriteTinyBertAddsTokenTypes(t *testing.T) {
	// A vocab without token types still gives a loadable bert.
	path := filepath.Join(t.TempDir(), "bert.gguf")
	require.NoError(t, WriteTinyModel(path, TinyModelOptions{Arch: "bert", VocabFrom: vocabPath(t, "llama-spm"), NLayer: 1}))
	f, err := Open(path)
	require.NoError(t, err)
	n, ok := f.Uint32("tokenizer.ggml.token_type_count")
	assert.True(t, ok)
	assert.Equal(t, uint32(2), n)
	ti, ok := f.Tensor("token_types.weight")
	require.True(t, ok)
	assert.Equal(t, []uint64{64, 2}, ti.Shape)
}

// TestWriteTinyMamba: the keys and tensors llama.cpp's Mamba loader reads:
// no attention or feed-forward, an inner size of twice the width (the
// only expansion it supports), and a time-step rank of ceil(width/16).
func TestWriteTinyMamba(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mamba.gguf")
	require.NoError(t, WriteTinyModel(path, TinyModelOptions{
		Arch: "mamba", VocabFrom: vocabPath(t, "llama-spm"), NEmbd: 32, NLayer: 2, NCtx: 256, Seed: 1,
	}))
	f, err := Open(path)
	require.NoError(t, err)
	assertKVs(t, f, map[string]any{
		"general.architecture":                   "mamba",
		"mamba.context_length":                   uint32(256),
		"mamba.embedding_length":                 uint32(32),
		"mamba.block_count":                      uint32(2),
		"mamba.feed_forward_length":              uint32(0),
		"mamba.attention.head_count":             uint32(0),
		"mamba.attention.head_count_kv":          uint32(0),
		"mamba.ssm.conv_kernel":                  uint32(4),
		"mamba.ssm.inner_size":                   uint32(64),
		"mamba.ssm.state_size":                   uint32(16),
		"mamba.ssm.time_step_rank":               uint32(2),
		"mamba.attention.layer_norm_rms_epsilon": float32(1e-5),
	})
	const e, in, dt, st, nv = 32, 64, 2, 16, 32000
	want := map[string][]uint64{
		"token_embd.weight":  {e, nv},
		"output_norm.weight": {e},
		"output.weight":      {e, nv},
	}
	for _, p := range []string{"blk.0.", "blk.1."} {
		want[p+"attn_norm.weight"] = []uint64{e}
		want[p+"ssm_in.weight"] = []uint64{e, 2 * in}
		want[p+"ssm_conv1d.weight"] = []uint64{4, in}
		want[p+"ssm_conv1d.bias"] = []uint64{in}
		want[p+"ssm_x.weight"] = []uint64{in, dt + 2*st}
		want[p+"ssm_dt.weight"] = []uint64{dt, in}
		want[p+"ssm_dt.bias"] = []uint64{in}
		want[p+"ssm_a"] = []uint64{st, in}
		want[p+"ssm_d"] = []uint64{in}
		want[p+"ssm_out.weight"] = []uint64{in, e}
	}
	requireShapes(t, f, want)

	// A is negative, so that the state decays.
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	a, err := f.TensorF32(fh, "blk.0.ssm_a")
	require.NoError(t, err)
	for _, v := range a {
		require.Less(t, v, float32(0))
	}
}

// TestWriteTinyGLM4MoE: GLM-4.5's layout, a dense first layer then
// experts beside a shared one, with its MTP block counted in block_count
// after the trunk; PassThrough zeroes the output projections.
func TestWriteTinyGLM4MoE(t *testing.T) {
	for _, pass := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "glm.gguf")
		require.NoError(t, WriteTinyModel(path, TinyModelOptions{
			Arch: "glm4moe", VocabFrom: vocabPath(t, "llama-spm"), NEmbd: 32, NLayer: 2, NextN: 1, NHead: 2, NFF: 48, Seed: 1, PassThrough: pass,
		}))
		f, err := Open(path)
		require.NoError(t, err)
		assertKVs(t, f, map[string]any{
			"glm4moe.block_count":               uint32(3),
			"glm4moe.nextn_predict_layers":      uint32(1),
			"glm4moe.expert_count":              uint32(4),
			"glm4moe.leading_dense_block_count": uint32(1),
			"glm4moe.expert_gating_func":        uint32(2),
		})
		const e, ff = 32, 48
		for name, shape := range map[string][]uint64{
			"blk.0.ffn_down.weight":            {ff, e},
			"blk.1.ffn_down_exps.weight":       {ff, e, 4},
			"blk.1.ffn_up_shexp.weight":        {e, ff},
			"blk.2.nextn.eh_proj.weight":       {2 * e, e},
			"blk.2.exp_probs_b.bias":           {4},
			"blk.2.post_attention_norm.weight": {e},
		} {
			ti, ok := f.Tensor(name)
			require.True(t, ok, name)
			assert.Equal(t, shape, ti.Shape, name)
		}
		_, ok := f.Tensor("blk.1.nextn.eh_proj.weight")
		assert.False(t, ok, "the trunk's layers have no MTP tensors")
		r, err := os.Open(path)
		require.NoError(t, err)
		data, err := f.TensorF32(r, "blk.1.attn_output.weight")
		r.Close()
		require.NoError(t, err)
		zero := true
		for _, x := range data {
			zero = zero && x == 0
		}
		assert.Equal(t, pass, zero, "pass-through zeroes the output projections")
	}
}

// TestWriteTinyJamba: Jamba's layers alternate: 0 KV heads makes a Mamba
// layer (with Jamba's norms of dt, B and C), the others attention; each
// has a feed-forward.
func TestWriteTinyJamba(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jamba.gguf")
	require.NoError(t, WriteTinyModel(path, TinyModelOptions{
		Arch: "jamba", VocabFrom: vocabPath(t, "llama-spm"), NEmbd: 32, NLayer: 2, NHead: 2, NFF: 48, NCtx: 256, Seed: 1,
	}))
	f, err := Open(path)
	require.NoError(t, err)
	assertKVs(t, f, map[string]any{
		"jamba.attention.head_count":    uint32(2),
		"jamba.attention.head_count_kv": []uint32{0, 2},
		"jamba.feed_forward_length":     uint32(48),
		"jamba.ssm.inner_size":          uint32(64),
	})
	const e, in, dt, st, ff, nv = 32, 64, 2, 16, 48, 32000
	want := map[string][]uint64{
		"token_embd.weight":  {e, nv},
		"output_norm.weight": {e},
		"output.weight":      {e, nv},
	}
	for i, p := range []string{"blk.0.", "blk.1."} {
		want[p+"attn_norm.weight"] = []uint64{e}
		want[p+"ffn_norm.weight"] = []uint64{e}
		want[p+"ffn_gate.weight"] = []uint64{e, ff}
		want[p+"ffn_down.weight"] = []uint64{ff, e}
		want[p+"ffn_up.weight"] = []uint64{e, ff}
		if i == 1 {
			want[p+"attn_q.weight"] = []uint64{e, e}
			want[p+"attn_k.weight"] = []uint64{e, e}
			want[p+"attn_v.weight"] = []uint64{e, e}
			want[p+"attn_output.weight"] = []uint64{e, e}
			continue
		}
		want[p+"ssm_in.weight"] = []uint64{e, 2 * in}
		want[p+"ssm_conv1d.weight"] = []uint64{4, in}
		want[p+"ssm_conv1d.bias"] = []uint64{in}
		want[p+"ssm_x.weight"] = []uint64{in, dt + 2*st}
		want[p+"ssm_dt_norm.weight"] = []uint64{dt}
		want[p+"ssm_b_norm.weight"] = []uint64{st}
		want[p+"ssm_c_norm.weight"] = []uint64{st}
		want[p+"ssm_dt.weight"] = []uint64{dt, in}
		want[p+"ssm_dt.bias"] = []uint64{in}
		want[p+"ssm_a"] = []uint64{st, in}
		want[p+"ssm_d"] = []uint64{in}
		want[p+"ssm_out.weight"] = []uint64{in, e}
	}
	requireShapes(t, f, want)
}

// TestWriteTinyGemma4: Gemma 4's layout, with full-context heads twice as
// wide as the window's, per-layer embeddings, and shared layers without K
// and V of their own.
func TestWriteTinyGemma4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gemma4.gguf")
	require.NoError(t, WriteTinyModel(path, TinyModelOptions{
		Arch: "gemma4", VocabFrom: vocabPath(t, "llama-spm"), NEmbd: 32, NLayer: 3, NHead: 2, NHeadKV: 1, NFF: 48,
		SlidingWindow: 16, SlidingWindowPattern: 2, SharedKVLayers: 1, PerLayerEmbd: 8, Seed: 1,
	}))
	f, err := Open(path)
	require.NoError(t, err)
	assertKVs(t, f, map[string]any{
		"gemma4.attention.sliding_window_pattern": []bool{true, false, true},
		"gemma4.attention.key_length":             uint32(32),
		"gemma4.attention.key_length_swa":         uint32(16),
		"gemma4.attention.shared_kv_layers":       uint32(1),
		"gemma4.embedding_length_per_layer_input": uint32(8),
	})
	const e, ff, pl, nv = 32, 48, 8, 32000
	want := map[string][]uint64{
		"token_embd.weight":           {e, nv},
		"output_norm.weight":          {e},
		"rope_freqs.weight":           {16},
		"per_layer_token_embd.weight": {pl * 3, nv},
		"per_layer_model_proj.weight": {e, pl * 3},
		"per_layer_proj_norm.weight":  {pl},
	}
	for i, hd := range []uint64{16, 32, 16} {
		p := fmt.Sprintf("blk.%d.", i)
		want[p+"attn_norm.weight"] = []uint64{e}
		want[p+"attn_q.weight"] = []uint64{e, 2 * hd}
		want[p+"attn_q_norm.weight"] = []uint64{hd}
		if i < 2 {
			want[p+"attn_k.weight"] = []uint64{e, hd}
			want[p+"attn_v.weight"] = []uint64{e, hd}
			want[p+"attn_k_norm.weight"] = []uint64{hd}
		}
		want[p+"attn_output.weight"] = []uint64{2 * hd, e}
		want[p+"post_attention_norm.weight"] = []uint64{e}
		want[p+"ffn_norm.weight"] = []uint64{e}
		want[p+"ffn_gate.weight"] = []uint64{e, ff}
		want[p+"ffn_down.weight"] = []uint64{ff, e}
		want[p+"ffn_up.weight"] = []uint64{e, ff}
		want[p+"post_ffw_norm.weight"] = []uint64{e}
		want[p+"inp_gate.weight"] = []uint64{e, pl}
		want[p+"proj.weight"] = []uint64{pl, e}
		want[p+"post_norm.weight"] = []uint64{e}
	}
	requireShapes(t, f, want)
}

func TestWriteTinyModelErrors(t *testing.T) {
	v := "unused"
	tests := []struct {
		name string
		o    TinyModelOptions
		want string
	}{
		{"arch", TinyModelOptions{Arch: "gpt2", VocabFrom: v}, "unsupported architecture"},
		{"no vocab", TinyModelOptions{}, "VocabFrom is required"},
		{"heads", TinyModelOptions{VocabFrom: v, NEmbd: 30, NHead: 4}, "even head size"},
		{"odd head", TinyModelOptions{VocabFrom: v, NEmbd: 12, NHead: 4}, "even head size"},
		{"gqa", TinyModelOptions{VocabFrom: v, NHead: 4, NHeadKV: 3}, "multiple of NHeadKV"},
		{"classifier", TinyModelOptions{VocabFrom: v, Classifier: 1}, "needs the bert"},
		{"pooling", TinyModelOptions{VocabFrom: v, PoolingType: 7}, "invalid pooling"},
		{"experts used", TinyModelOptions{VocabFrom: v, Experts: 2, ExpertsUsed: 3}, "2 experts with 3 used"},
		{"experts elsewhere", TinyModelOptions{VocabFrom: v, Arch: "gemma3", Experts: 4}, "Experts needs the llama"},
		{"shared layers elsewhere", TinyModelOptions{VocabFrom: v, Arch: "gemma3", SharedKVLayers: 2}, "need the gemma4"},
		{"gemma4 without a window", TinyModelOptions{VocabFrom: v, Arch: "gemma4", NLayer: 4}, "gemma4 needs a sliding window"},
		{"gemma4 shared over another kind", TinyModelOptions{VocabFrom: v, Arch: "gemma4", NLayer: 6, SlidingWindow: 8,
			SlidingWindowPattern: 3, SharedKVLayers: 2}, "a sliding then a full one"},
		{"missing vocab", TinyModelOptions{VocabFrom: "/nonexistent.gguf"}, "no such file"},
		{"nextn elsewhere", TinyModelOptions{VocabFrom: v, NextN: 1}, "NextN is one block, for glm4moe"},
		{"two nextn", TinyModelOptions{VocabFrom: v, Arch: "glm4moe", NextN: 2}, "NextN is one block"},
		{"pass-through quantized", TinyModelOptions{VocabFrom: v, Arch: "glm4moe", PassThrough: true, Type: Q8_0}, "F32 glm4moe"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteTinyModel(filepath.Join(t.TempDir(), "x.gguf"), tc.o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "gguf: ")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWriteLoRA(t *testing.T) {
	base, err := Open(filepath.Join(modelsDir(t), "stories260K.gguf"))
	require.NoError(t, err)
	dir := t.TempDir()

	path := filepath.Join(dir, "lora.gguf")
	targets := []string{"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.1.ffn_down.weight", "token_embd.weight", "output.weight"}
	require.NoError(t, WriteLoRA(path, base, targets, 4, 8, 7, 0.01))
	f, err := Open(path)
	require.NoError(t, err)
	assert.Equal(t, "llama", f.Architecture())
	s, _ := f.String("general.type")
	assert.Equal(t, "adapter", s)
	s, _ = f.String("adapter.type")
	assert.Equal(t, "lora", s)
	alpha, ok := f.Float32("adapter.lora.alpha")
	assert.True(t, ok)
	assert.Equal(t, float32(8), alpha)
	requireShapes(t, f, map[string][]uint64{
		// stories260K: attn_q [64 64], attn_k [64 32], ffn_down [172 64], token_embd/output [64 512]
		"blk.0.attn_q.weight.lora_a":   {64, 4},
		"blk.0.attn_q.weight.lora_b":   {4, 64},
		"blk.0.attn_k.weight.lora_a":   {64, 4},
		"blk.0.attn_k.weight.lora_b":   {4, 32},
		"blk.1.ffn_down.weight.lora_a": {172, 4},
		"blk.1.ffn_down.weight.lora_b": {4, 64},
		"token_embd.weight.lora_a":     {4, 512},
		"token_embd.weight.lora_b":     {4, 64},
		"output.weight.lora_a":         {64, 4},
		"output.weight.lora_b":         {4, 512},
	})
	// The checks llama-adapter.cpp applies to every pair.
	for _, name := range targets {
		m, _ := base.Tensor(name)
		a, _ := f.Tensor(name + ".lora_a")
		b, _ := f.Tensor(name + ".lora_b")
		if name == "token_embd.weight" {
			assert.Equal(t, m.Shape[0], b.Shape[1])
			assert.Equal(t, m.Shape[1], a.Shape[1])
			assert.Equal(t, a.Shape[0], b.Shape[0]) // get_rows(a) feeds mul_mat(b)
		} else {
			assert.Equal(t, m.Shape[0], a.Shape[0])
			assert.Equal(t, m.Shape[1], b.Shape[1])
			assert.Equal(t, a.Shape[1], b.Shape[0])
		}
	}
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	vals, err := f.TensorF32(fh, "blk.0.attn_q.weight.lora_b")
	require.NoError(t, err)
	for _, v := range vals {
		assert.LessOrEqual(t, v, float32(0.01))
		assert.GreaterOrEqual(t, v, float32(-0.01))
	}

	// Default targets: attn_q and attn_v of every block.
	require.NoError(t, WriteLoRA(path, base, nil, 2, 4, 1, 0.1))
	f, err = Open(path)
	require.NoError(t, err)
	assert.Len(t, f.Tensors, 5*2*2)
	_, ok = f.Tensor("blk.4.attn_v.weight.lora_b")
	assert.True(t, ok)

	err = WriteLoRA(path, base, []string{"blk.9.attn_q.weight"}, 2, 4, 1, 0.1)
	assert.ErrorContains(t, err, `gguf: lora: base model has no tensor "blk.9.attn_q.weight"`)
	err = WriteLoRA(path, base, []string{"output_norm.weight"}, 2, 4, 1, 0.1)
	assert.ErrorContains(t, err, "want a matrix")
	err = WriteLoRA(path, base, nil, 0, 4, 1, 0.1)
	assert.ErrorContains(t, err, "rank 0")
}
