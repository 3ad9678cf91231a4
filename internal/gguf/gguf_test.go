package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/testenv"
)

// modelsDir returns the shared test models folder (see internal/testenv).
func modelsDir(t testing.TB) string {
	t.Helper()
	return testenv.ModelsDir(t)
}

func allValues() []KV {
	return []KV{
		{"u8", uint8(200)},
		{"i8", int8(-100)},
		{"u16", uint16(60000)},
		{"i16", int16(-30000)},
		{"u32", uint32(4000000000)},
		{"i32", int32(-2000000000)},
		{"f32", float32(3.25)},
		{"bool.true", true},
		{"bool.false", false},
		{"str", "héllo\x00world"},
		{"str.empty", ""},
		{"u64", uint64(math.MaxUint64)},
		{"i64", int64(math.MinInt64)},
		{"f64", math.Pi},
		{"arr.u8", []uint8{0, 1, 255}},
		{"arr.i8", []int8{-128, 0, 127}},
		{"arr.u16", []uint16{1, 65535}},
		{"arr.i16", []int16{-32768, 32767}},
		{"arr.u32", []uint32{7, 8, 9}},
		{"arr.i32", []int32{-1, 0, 1}},
		{"arr.f32", []float32{0.5, -1.5, float32(math.Inf(1))}},
		{"arr.bool", []bool{true, false, true}},
		{"arr.str", []string{"a", "", "ccc"}},
		{"arr.u64", []uint64{1 << 40}},
		{"arr.i64", []int64{-1 << 40}},
		{"arr.f64", []float64{1e300, -2}},
		{"arr.empty", []int32{}},
	}
}

func TestRoundTrip(t *testing.T) {
	w := NewWriter()
	for _, kv := range allValues() {
		w.SetKV(kv.Key, kv.Value)
	}
	f32 := []float32{1, 2, 3, 4, 5, 6}
	require.NoError(t, w.AddTensorF32("a", []uint64{3, 2}, f32))
	f16 := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.NoError(t, w.AddTensor("b.weight", []uint64{5}, F16, f16))
	q8 := make([]byte, 2*34)
	for i := range q8 {
		q8[i] = byte(i)
	}
	require.NoError(t, w.AddTensor("c", []uint64{32, 1, 2}, Q8_0, q8))

	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	require.NoError(t, err)
	assert.Equal(t, int64(buf.Len()), n)

	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	assert.Equal(t, uint32(3), f.Version)
	assert.Equal(t, uint64(32), f.Alignment)
	assert.Zero(t, f.DataOffset%32)
	assert.Equal(t, allValues(), f.KV)
	for _, kv := range allValues() {
		v, ok := f.Get(kv.Key)
		assert.True(t, ok, kv.Key)
		assert.Equal(t, kv.Value, v, kv.Key)
	}
	require.Len(t, f.Tensors, 3)
	assert.Equal(t, TensorInfo{Name: "a", Shape: []uint64{3, 2}, Type: F32, Offset: 0}, f.Tensors[0])
	assert.Equal(t, TensorInfo{Name: "b.weight", Shape: []uint64{5}, Type: F16, Offset: 32}, f.Tensors[1])
	assert.Equal(t, TensorInfo{Name: "c", Shape: []uint64{32, 1, 2}, Type: Q8_0, Offset: 64}, f.Tensors[2])

	r := bytes.NewReader(buf.Bytes())
	got, err := f.TensorF32(r, "a")
	require.NoError(t, err)
	assert.Equal(t, f32, got)
	b, err := f.TensorData(r, "b.weight")
	require.NoError(t, err)
	assert.Equal(t, f16, b)
	b, err = f.TensorData(r, "c")
	require.NoError(t, err)
	assert.Equal(t, q8, b)
	_, err = f.TensorData(r, "missing")
	assert.ErrorContains(t, err, "gguf: no tensor")

	// Writing the read file again gives identical bytes.
	w2 := NewWriter()
	w2.CopyKV(f, nil)
	for _, ti := range f.Tensors {
		d, err := f.TensorData(r, ti.Name)
		require.NoError(t, err)
		require.NoError(t, w2.AddTensor(ti.Name, ti.Shape, ti.Type, d))
	}
	var buf2 bytes.Buffer
	_, err = w2.WriteTo(&buf2)
	require.NoError(t, err)
	assert.Equal(t, buf.Bytes(), buf2.Bytes())
}

func TestWriterAlignmentAndOrder(t *testing.T) {
	w := NewWriter()
	w.SetKV("general.architecture", "x")
	w.SetKV(KeyAlignment, uint32(64))
	w.SetKV("k", int32(1))
	w.SetKV("general.architecture", "y") // replaces in place
	require.NoError(t, w.AddTensorF32("t0", []uint64{3}, []float32{1, 2, 3}))
	require.NoError(t, w.AddTensorF32("t1", []uint64{1}, []float32{4}))
	path := filepath.Join(t.TempDir(), "a.gguf")
	require.NoError(t, w.WriteFile(path))

	f, err := Open(path)
	require.NoError(t, err)
	assert.Equal(t, []KV{{"general.architecture", "y"}, {KeyAlignment, uint32(64)}, {"k", int32(1)}}, f.KV)
	assert.Equal(t, uint64(64), f.Alignment)
	assert.Zero(t, f.DataOffset%64)
	assert.Equal(t, uint64(64), f.Tensors[1].Offset)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, f.DataOffset+128, st.Size())

	w.DeleteKV("k")
	assert.Equal(t, []KV{{"general.architecture", "y"}, {KeyAlignment, uint32(64)}}, w.KV())
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name string
		run  func(w *Writer) error
		want string
	}{
		{"short data", func(w *Writer) error { return w.AddTensor("t", []uint64{4}, F32, make([]byte, 15)) }, "needs 16"},
		{"long data", func(w *Writer) error { return w.AddTensorF32("t", []uint64{2, 2}, make([]float32, 5)) }, "needs 16"},
		{"block size", func(w *Writer) error { return w.AddTensor("t", []uint64{16}, Q8_0, make([]byte, 17)) }, "block size"},
		{"unknown type", func(w *Writer) error { return w.AddTensor("t", []uint64{1}, TensorType(4), nil) }, "unknown tensor type"},
		{"too many dims", func(w *Writer) error { return w.AddTensor("t", []uint64{1, 1, 1, 1, 1}, F32, make([]byte, 4)) }, "dimensions"},
		{"no dims", func(w *Writer) error { return w.AddTensor("t", nil, F32, nil) }, "no dimensions"},
		{"empty name", func(w *Writer) error { return w.AddTensor("", []uint64{1}, F32, make([]byte, 4)) }, "empty tensor name"},
		{"long name", func(w *Writer) error {
			return w.AddTensor(string(bytes.Repeat([]byte("x"), 64)), []uint64{1}, F32, make([]byte, 4))
		}, "shorter than 64"},
		{"duplicate", func(w *Writer) error {
			require.NoError(t, w.AddTensorF32("t", []uint64{1}, []float32{1}))
			return w.AddTensorF32("t", []uint64{1}, []float32{1})
		}, "duplicate tensor"},
		{"unsupported value", func(w *Writer) error {
			w.SetKV("k", 3) // plain int is ambiguous
			_, err := w.WriteTo(&bytes.Buffer{})
			return err
		}, `key "k": unsupported value type int`},
		{"nested array", func(w *Writer) error {
			w.SetKV("k", [][]int32{{1}})
			_, err := w.WriteTo(&bytes.Buffer{})
			return err
		}, "unsupported value type"},
		{"alignment type", func(w *Writer) error {
			w.SetKV(KeyAlignment, uint64(32))
			_, err := w.WriteTo(&bytes.Buffer{})
			return err
		}, "must be a uint32"},
		{"alignment value", func(w *Writer) error {
			w.SetKV(KeyAlignment, uint32(48))
			_, err := w.WriteTo(&bytes.Buffer{})
			return err
		}, "not a power of two"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(NewWriter())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "gguf: ")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReadStories260K(t *testing.T) {
	path := filepath.Join(modelsDir(t), "stories260K.gguf")
	f, err := Open(path)
	require.NoError(t, err)
	assert.Equal(t, uint32(3), f.Version)
	assert.Equal(t, "llama", f.Architecture())
	tok, ok := f.String("tokenizer.ggml.model")
	assert.True(t, ok)
	assert.Equal(t, "llama", tok)
	for key, want := range map[string]int{
		"llama.context_length":        2048,
		"llama.embedding_length":      64,
		"llama.feed_forward_length":   172,
		"llama.attention.head_count":  8,
		"llama.block_count":           5,
		"llama.rope.dimension_count":  8,
		"tokenizer.ggml.bos_token_id": 1,
	} {
		got, ok := f.Int(key)
		assert.True(t, ok, key)
		assert.Equal(t, want, got, key)
	}
	u, ok := f.Uint32("llama.attention.head_count_kv")
	assert.True(t, ok)
	assert.Equal(t, uint32(4), u)
	eps, ok := f.Float32("llama.attention.layer_norm_rms_epsilon")
	assert.True(t, ok)
	assert.InDelta(t, 1e-5, eps, 1e-12)
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	require.True(t, ok)
	assert.Len(t, tokens, 512)
	assert.Equal(t, []string{"<unk>", "<s>", "</s>"}, tokens[:3])
	_, ok = f.String("llama.block_count") // wrong type
	assert.False(t, ok)
	_, ok = f.Get("no.such.key")
	assert.False(t, ok)

	// 3 global tensors + 9 per block for 5 blocks.
	require.Len(t, f.Tensors, 3+9*5)
	shapes := map[string][]uint64{
		"token_embd.weight":        {64, 512},
		"output_norm.weight":       {64},
		"output.weight":            {64, 512},
		"blk.0.attn_q.weight":      {64, 64},
		"blk.0.attn_k.weight":      {64, 32},
		"blk.0.attn_v.weight":      {64, 32},
		"blk.4.attn_output.weight": {64, 64},
		"blk.4.ffn_gate.weight":    {64, 172},
		"blk.4.ffn_down.weight":    {172, 64},
		"blk.4.ffn_up.weight":      {64, 172},
		"blk.2.ffn_norm.weight":    {64},
	}
	for name, shape := range shapes {
		ti, ok := f.Tensor(name)
		require.True(t, ok, name)
		assert.Equal(t, shape, ti.Shape, name)
		assert.Equal(t, F32, ti.Type, name)
	}

	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	norm, err := f.TensorF32(fh, "output_norm.weight")
	require.NoError(t, err)
	assert.Len(t, norm, 64)
	for _, v := range norm {
		assert.False(t, math.IsNaN(float64(v)))
	}
	// The last tensor ends within the file.
	last := f.Tensors[len(f.Tensors)-1]
	data, err := f.TensorData(fh, last.Name)
	require.NoError(t, err)
	assert.Len(t, data, 64*4)
}

func TestReadVocabs(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(modelsDir(t), "vocab", "*.gguf"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	wantModel := map[string]string{
		"ggml-vocab-bert-bge.gguf":  "bert",
		"ggml-vocab-llama-spm.gguf": "llama",
		"ggml-vocab-llama-bpe.gguf": "gpt2",
		"ggml-vocab-qwen2.gguf":     "gpt2",
		"ggml-vocab-gpt-2.gguf":     "gpt2",
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			require.NoError(t, err)
			assert.Empty(t, f.Tensors, "vocab-only file")
			arch := f.Architecture()
			assert.NotEmpty(t, arch)
			model, ok := f.String("tokenizer.ggml.model")
			require.True(t, ok)
			if want, ok := wantModel[filepath.Base(p)]; ok {
				assert.Equal(t, want, model)
			}
			tokens, ok := f.Strings("tokenizer.ggml.tokens")
			require.True(t, ok)
			assert.Greater(t, len(tokens), 1000)
			types, ok := f.Get("tokenizer.ggml.token_type")
			require.True(t, ok)
			assert.Len(t, types, len(tokens))
			_, ok = f.Int(arch + ".block_count")
			assert.True(t, ok)
		})
	}
}

func TestTensorSize(t *testing.T) {
	tests := []struct {
		typ   TensorType
		shape []uint64
		want  uint64
		err   string
	}{
		{F32, []uint64{3, 2}, 24, ""},
		{F16, []uint64{7}, 14, ""},
		{BF16, []uint64{2, 2}, 8, ""},
		{Q8_0, []uint64{64, 3}, 2 * 3 * 34, ""},
		{Q4_K, []uint64{256}, 144, ""},
		{Q6_K, []uint64{512}, 2 * 210, ""},
		{Q8_0, []uint64{33}, 0, "block size"},
		{F32, []uint64{0, 5}, 0, ""},
		{F32, []uint64{1 << 40, 1 << 40}, 0, "too large"},
		{TensorType(5), []uint64{1}, 0, "unknown tensor type"},
	}
	for _, tc := range tests {
		got, err := TensorSize(tc.typ, tc.shape)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, "%s %v", tc.typ, tc.shape)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s %v", tc.typ, tc.shape)
	}
	assert.Equal(t, "q8_0", Q8_0.String())
	assert.Equal(t, "f16", F16.String())
	assert.Equal(t, "TensorType(4)", TensorType(4).String())
	assert.Equal(t, "str", String.String())
}

// le is a little helper for building raw GGUF bytes in tests.
type le struct{ bytes.Buffer }

func (b *le) u32(v uint32) *le  { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *le) u64(v uint64) *le  { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *le) str(s string) *le  { b.u64(uint64(len(s))); b.WriteString(s); return b }
func (b *le) raw(p ...byte) *le { b.Write(p); return b }
