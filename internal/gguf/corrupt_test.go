package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// header starts a raw GGUF v3 file with the given counts.
func header(nTensors, nKV uint64) *le {
	b := &le{}
	b.raw('G', 'G', 'U', 'F').u32(3).u64(nTensors).u64(nKV)
	return b
}

// oneTensor returns a raw file with one KV and one tensor descriptor whose
// fields are given, followed by enough (aligned) data for 4 floats.
func oneTensor(name string, dims []uint64, typ uint32, offset uint64) []byte {
	b := header(1, 1)
	b.str("general.architecture").u32(uint32(String)).str("llama")
	b.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	b.u32(typ).u64(offset)
	for b.Len()%32 != 0 {
		b.raw(0)
	}
	b.raw(make([]byte, 16)...)
	return b.Bytes()
}

func validFile(t testing.TB) []byte {
	w := NewWriter()
	w.SetKV("general.architecture", "llama")
	w.SetKV("tokenizer.ggml.tokens", []string{"a", "b"})
	w.SetKV("n", uint32(1))
	require.NoError(t, w.AddTensorF32("t", []uint64{2, 2}, []float32{1, 2, 3, 4}))
	require.NoError(t, w.AddTensorF32("u", []uint64{1}, []float32{5}))
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

func TestReadCorrupt(t *testing.T) {
	kv := func(key string, typ Type, value ...byte) []byte {
		b := header(0, 1)
		b.str(key).u32(uint32(typ)).raw(value...)
		return b.Bytes()
	}
	arr := func(elem Type, n uint64, value ...byte) []byte {
		b := header(0, 1)
		b.str("k").u32(uint32(Array)).u32(uint32(elem)).u64(n).raw(value...)
		return b.Bytes()
	}
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	valid := validFile(t)
	longName := strings.Repeat("n", 64)

	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated while reading magic"},
		{"short magic", []byte("GGU"), "truncated while reading magic"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), "bad magic"},
		{"no version", []byte("GGUF"), "truncated while reading version"},
		{"version 0", header(0, 0).Bytes()[:4], "truncated"},
		{"version 1", append([]byte("GGUF"), 1, 0, 0, 0), "version 1 is not supported"},
		{"version 4", append([]byte("GGUF"), 4, 0, 0, 0), "unsupported GGUF version 4"},
		{"big endian", append([]byte("GGUF"), 0, 0, 0, 3), "wrong endianness"},
		{"no counts", append([]byte("GGUF"), 3, 0, 0, 0), "truncated while reading tensor count"},
		{"huge tensor count", header(math.MaxUint64, 0).Bytes(), "tensor count"},
		{"tensor count beyond file", header(1000, 0).Bytes(), "does not fit"},
		{"huge kv count", header(0, 1<<62).Bytes(), "metadata count"},
		{"missing kv", header(0, 1).Bytes(), "does not fit"},
		{"huge key length", append(header(0, 1).Bytes(), append(u64(math.MaxUint64), make([]byte, 16)...)...), "key length"},
		{"key beyond file", append(header(0, 1).Bytes(), append(u64(100), make([]byte, 16)...)...), "exceeds the remaining"},
		{"empty key", kv("", Uint8, 1), "empty key"},
		{"invalid type", kv("k", 13, 1, 2, 3, 4), "invalid type 13"},
		{"truncated u32", kv("k", Uint32, 1, 2), "truncated"},
		{"truncated f64", kv("k", Float64, 1, 2, 3, 4, 5, 6, 7), "truncated"},
		{"bad bool", kv("k", Bool, 2), "invalid bool"},
		{"huge string", kv("k", String, u64(1<<40)...), "exceeds the remaining"},
		{"nested array", arr(Array, 1, make([]byte, 16)...), "invalid array element type 9"},
		{"array of unknown", arr(99, 1, 0), "invalid array element type 99"},
		{"huge array", arr(Uint64, 1<<60, make([]byte, 64)...), "does not fit"},
		{"huge string array", arr(String, 1<<30, make([]byte, 64)...), "does not fit"},
		{"truncated string array", arr(String, 2, append(append(u64(1), 'a'), u64(5)...)...), "exceeds the remaining"},
		{"duplicate key", func() []byte {
			b := header(0, 2)
			b.str("k").u32(uint32(Uint8)).raw(1)
			b.str("k").u32(uint32(Uint8)).raw(2)
			return b.Bytes()
		}(), `duplicate metadata key "k"`},
		{"alignment type", kv(KeyAlignment, Uint64, u64(32)...), "general.alignment must be u32"},
		{"alignment zero", kv(KeyAlignment, Uint32, 0, 0, 0, 0), "not a power of two"},
		{"alignment 48", kv(KeyAlignment, Uint32, 48, 0, 0, 0), "not a power of two"},
		{"missing tensor offset", header(1, 0).str("t").u32(1).u64(4).u32(0).Bytes(), "truncated while reading tensor offset"},
		{"empty tensor name", header(1, 0).str("").u32(1).u64(4).u32(0).u64(0).Bytes(), "empty tensor name"},
		{"long tensor name", oneTensor(longName, []uint64{4}, 0, 0), "shorter than 64"},
		{"too many dims", oneTensor("t", []uint64{1, 1, 1, 1, 4}, 0, 0), "5 dimensions"},
		{"negative dim", oneTensor("t", []uint64{1 << 63}, 0, 0), "negative"},
		{"dim overflow", oneTensor("t", []uint64{1 << 40, 1 << 40}, 0, 0), "too large"},
		{"removed type", oneTensor("t", []uint64{4}, 4, 0), "unknown tensor type 4"},
		{"type out of range", oneTensor("t", []uint64{4}, 1000, 0), "unknown tensor type 1000"},
		{"block size", oneTensor("t", []uint64{4}, uint32(Q8_0), 0), "block size"},
		{"bad offset", oneTensor("t", []uint64{4}, 0, 32), "has offset 32, expected 0"},
		{"data beyond file", oneTensor("t", []uint64{5}, 0, 0), "beyond the end of the file"},
		{"huge data", oneTensor("t", []uint64{1 << 20, 1 << 20}, 0, 0), "beyond the end of the file"},
		{"duplicate tensor", func() []byte {
			b := header(2, 0)
			b.str("t").u32(1).u64(4).u32(0).u64(0)
			b.str("t").u32(1).u64(4).u32(0).u64(32)
			return b.Bytes()
		}(), `duplicate tensor name "t"`},
		{"truncated data", valid[:len(valid)-40], "beyond the end of the file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Read(bytes.NewReader(tc.data), int64(len(tc.data)))
			require.Error(t, err)
			assert.Nil(t, f)
			assert.True(t, strings.HasPrefix(err.Error(), "gguf: "), err.Error())
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReadValidEdgeCases(t *testing.T) {
	// A header with no tensors and no metadata is valid.
	b := header(0, 0).Bytes()
	f, err := Read(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	assert.Empty(t, f.KV)
	assert.Equal(t, int64(len(b)), f.DataOffset)

	// GGUF v2 has the same layout as v3.
	b = header(0, 1).str("k").u32(uint32(Int8)).raw(0xff).Bytes()
	binary.LittleEndian.PutUint32(b[4:], 2)
	f, err = Read(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	assert.Equal(t, uint32(2), f.Version)
	assert.Equal(t, []KV{{"k", int8(-1)}}, f.KV)

	// A tensor with zero dimensions is a scalar.
	b = oneTensor("s", nil, 0, 0)
	f, err = Read(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), f.Tensors[0].Elements())
}

func TestReadEveryTruncation(t *testing.T) {
	valid := validFile(t)
	_, err := Read(bytes.NewReader(valid), int64(len(valid)))
	require.NoError(t, err)
	// The last tensor's data ends 28 bytes before the end (padding).
	end := len(valid) - 28
	for n := 0; n < end; n++ {
		_, err := Read(bytes.NewReader(valid[:n]), int64(n))
		require.Error(t, err, "prefix of %d bytes", n)
		assert.True(t, errors.Is(err, ErrFormat), "prefix %d: %v", n, err)
	}
	for n := end; n <= len(valid); n++ {
		_, err := Read(bytes.NewReader(valid[:n]), int64(n))
		assert.NoError(t, err, "prefix of %d bytes", n)
	}
}

type failingReaderAt struct{}

func (failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk on fire") }

func TestReadIOError(t *testing.T) {
	_, err := Read(failingReaderAt{}, 100)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gguf: reading magic")
	assert.Contains(t, err.Error(), "disk on fire")
	_, err = Open("/nonexistent/x.gguf")
	assert.ErrorContains(t, err, "gguf: open /nonexistent/x.gguf")
}

// FuzzRead checks that Read never panics, allocates at most a small multiple
// of the input size, and that whatever it accepts survives a write/read
// round trip.
func FuzzRead(f *testing.F) {
	f.Add(validFile(f))
	f.Add(header(0, 0).Bytes())
	f.Add(oneTensor("t", []uint64{4}, 0, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		file, err := Read(bytes.NewReader(data), int64(len(data)))
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64*uint64(len(data))+1<<20 {
			t.Fatalf("Read of %d bytes allocated %d bytes", len(data), alloc)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		first := rewrite(t, file, data)
		again, err := Read(bytes.NewReader(first), int64(len(first)))
		if err != nil {
			t.Fatalf("re-reading a written file: %v", err)
		}
		// Compare encodings rather than values so NaNs compare equal.
		if second := rewrite(t, again, first); !bytes.Equal(first, second) {
			t.Fatalf("write/read/write is not stable")
		}
		if len(again.Tensors) != len(file.Tensors) || len(again.KV) != len(file.KV) {
			t.Fatalf("round trip lost entries")
		}
	})
}

// rewrite writes file (read from data) back out with a Writer.
func rewrite(t *testing.T, file *File, data []byte) []byte {
	w := NewWriter()
	w.CopyKV(file, nil)
	r := bytes.NewReader(data)
	for _, ti := range file.Tensors {
		d, err := file.TensorData(r, ti.Name)
		if err != nil {
			t.Fatalf("TensorData(%q) of an accepted file: %v", ti.Name, err)
		}
		shape := ti.Shape
		if len(shape) == 0 {
			shape = []uint64{1} // the writer requires a dimension; ggml treats both alike
		}
		if err := w.AddTensor(ti.Name, shape, ti.Type, d); err != nil {
			t.Fatalf("AddTensor(%q): %v", ti.Name, err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return buf.Bytes()
}

// ReadMetadataLight accepts and refuses exactly the prefixes ReadMetadata
// does, keeps short arrays and scalars as they are, and stands a
// SkippedArray in for longer arrays.
func TestReadMetadataLight(t *testing.T) {
	w := NewWriter()
	w.SetKV("general.architecture", "llama")
	w.SetKV("tokenizer.ggml.tokens", []string{"a", "bb", "ccc"})
	w.SetKV("scores", []float32{1, 2, 3})
	w.SetKV("short", []int32{7})
	w.SetKV("n", uint32(1))
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	valid := buf.Bytes()
	for n := 0; n <= len(valid); n++ {
		_, full := ReadMetadata(bytes.NewReader(valid[:n]), int64(n))
		_, light := ReadMetadataLight(bytes.NewReader(valid[:n]), int64(n), 2)
		assert.Equal(t, full == nil, light == nil, "prefix of %d bytes: %v / %v", n, full, light)
		if light != nil {
			assert.ErrorIs(t, light, ErrFormat)
		}
	}
	f, err := ReadMetadataLight(bytes.NewReader(valid), int64(len(valid)), 2)
	require.NoError(t, err)
	v, _ := f.Get("tokenizer.ggml.tokens")
	assert.Equal(t, SkippedArray{Elem: String, Len: 3}, v)
	v, _ = f.Get("scores")
	assert.Equal(t, SkippedArray{Elem: Float32, Len: 3}, v)
	v, _ = f.Get("short")
	assert.Equal(t, []int32{7}, v)
	n, ok := f.Int("n")
	assert.True(t, ok)
	assert.Equal(t, 1, n)
}
