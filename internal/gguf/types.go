// Package gguf reads and writes GGUF files, the model container format used
// by llama.cpp and ggml.
//
// The reader parses the header, the metadata key/value pairs and the tensor
// descriptors, validating every count and length against the size of the
// input so that a corrupt file yields an error rather than a panic or a huge
// allocation. Tensor data is read lazily with [File.TensorData].
//
// The [Writer] builds GGUF version 3 files. [WriteTinyModel] and [WriteLoRA]
// use it to produce small random-weight models and adapters for tests.
package gguf

import "fmt"

// Magic is the four-byte signature at the start of every GGUF file.
const Magic = "GGUF"

// Version is the GGUF version produced by [Writer].
const Version = 3

// DefaultAlignment is the data alignment used when the file does not set
// general.alignment.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides the data alignment.
const KeyAlignment = "general.alignment"

// MaxDims is the largest number of dimensions a ggml tensor may have.
const MaxDims = 4

// MaxNameLen is the exclusive upper bound on the length of a tensor name
// (ggml stores names in a 64-byte buffer including the terminating NUL).
const MaxNameLen = 64

// Type is the type of a metadata value as stored in a GGUF file.
type Type uint32

// Metadata value types.
const (
	Uint8   Type = 0
	Int8    Type = 1
	Uint16  Type = 2
	Int16   Type = 3
	Uint32  Type = 4
	Int32   Type = 5
	Float32 Type = 6
	Bool    Type = 7
	String  Type = 8
	Array   Type = 9
	Uint64  Type = 10
	Int64   Type = 11
	Float64 Type = 12
)

var typeNames = [...]string{
	Uint8: "u8", Int8: "i8", Uint16: "u16", Int16: "i16", Uint32: "u32", Int32: "i32",
	Float32: "f32", Bool: "bool", String: "str", Array: "arr", Uint64: "u64", Int64: "i64", Float64: "f64",
}

// String returns the short name ggml uses for the type ("u32", "str", ...).
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// fixedSize returns the encoded size of one scalar of type t, or 0 for
// strings, arrays and unknown types.
func (t Type) fixedSize() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// TensorType is a ggml tensor element type (enum ggml_type).
type TensorType uint32

// Tensor types. Gaps in the numbering are types ggml has removed.
const (
	F32     TensorType = 0
	F16     TensorType = 1
	Q4_0    TensorType = 2
	Q4_1    TensorType = 3
	Q5_0    TensorType = 6
	Q5_1    TensorType = 7
	Q8_0    TensorType = 8
	Q8_1    TensorType = 9
	Q2_K    TensorType = 10
	Q3_K    TensorType = 11
	Q4_K    TensorType = 12
	Q5_K    TensorType = 13
	Q6_K    TensorType = 14
	Q8_K    TensorType = 15
	IQ2_XXS TensorType = 16
	IQ2_XS  TensorType = 17
	IQ3_XXS TensorType = 18
	IQ1_S   TensorType = 19
	IQ4_NL  TensorType = 20
	IQ3_S   TensorType = 21
	IQ2_S   TensorType = 22
	IQ4_XS  TensorType = 23
	I8      TensorType = 24
	I16     TensorType = 25
	I32     TensorType = 26
	I64     TensorType = 27
	F64     TensorType = 28
	IQ1_M   TensorType = 29
	BF16    TensorType = 30
	TQ1_0   TensorType = 34
	TQ2_0   TensorType = 35
	MXFP4   TensorType = 39
	NVFP4   TensorType = 40
	Q1_0    TensorType = 41
	Q2_0    TensorType = 42
)

type tensorTypeInfo struct {
	name      string
	blockSize uint64 // elements per block
	typeSize  uint64 // bytes per block
}

const qkK = 256

var tensorTypes = map[TensorType]tensorTypeInfo{
	F32:     {"f32", 1, 4},
	F16:     {"f16", 1, 2},
	Q4_0:    {"q4_0", 32, 2 + 16},
	Q4_1:    {"q4_1", 32, 2 + 2 + 16},
	Q5_0:    {"q5_0", 32, 2 + 4 + 16},
	Q5_1:    {"q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:    {"q8_0", 32, 2 + 32},
	Q8_1:    {"q8_1", 32, 4 + 4 + 32},
	Q2_K:    {"q2_K", qkK, 2 + 2 + qkK/16 + qkK/4},
	Q3_K:    {"q3_K", qkK, 2 + qkK/4 + qkK/8 + 12},
	Q4_K:    {"q4_K", qkK, 2 + 2 + qkK/2 + 12},
	Q5_K:    {"q5_K", qkK, 2 + 2 + qkK/2 + qkK/8 + 12},
	Q6_K:    {"q6_K", qkK, 2 + qkK/2 + qkK/4 + qkK/16},
	Q8_K:    {"q8_K", qkK, 4 + qkK + qkK/8},
	IQ2_XXS: {"iq2_xxs", qkK, 2 + qkK/4},
	IQ2_XS:  {"iq2_xs", qkK, 2 + qkK/4 + qkK/32},
	IQ3_XXS: {"iq3_xxs", qkK, 2 + qkK/4 + qkK/8},
	IQ1_S:   {"iq1_s", qkK, 2 + qkK/8 + qkK/16},
	IQ4_NL:  {"iq4_nl", 32, 2 + 16},
	IQ3_S:   {"iq3_s", qkK, 2 + qkK/4 + qkK/8 + qkK/32 + 4},
	IQ2_S:   {"iq2_s", qkK, 2 + qkK/4 + qkK/16},
	IQ4_XS:  {"iq4_xs", qkK, 2 + 2 + qkK/2 + qkK/64},
	I8:      {"i8", 1, 1},
	I16:     {"i16", 1, 2},
	I32:     {"i32", 1, 4},
	I64:     {"i64", 1, 8},
	F64:     {"f64", 1, 8},
	IQ1_M:   {"iq1_m", qkK, qkK/8 + qkK/16 + qkK/32},
	BF16:    {"bf16", 1, 2},
	TQ1_0:   {"tq1_0", qkK, 2 + 4*13},
	TQ2_0:   {"tq2_0", qkK, 2 + 64},
	MXFP4:   {"mxfp4", 32, 1 + 16},
	NVFP4:   {"nvfp4", 64, 4 + 32},
	Q1_0:    {"q1_0", 128, 2 + 16},
	Q2_0:    {"q2_0", 64, 2 + 16},
}

// String returns the ggml name of the type ("f32", "q8_0", ...).
func (t TensorType) String() string {
	if ti, ok := tensorTypes[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// Valid reports whether t is a tensor type this package knows the layout of.
func (t TensorType) Valid() bool {
	_, ok := tensorTypes[t]
	return ok
}

// BlockSize returns the number of elements per quantization block (1 for
// plain types), or 0 for an unknown type.
func (t TensorType) BlockSize() uint64 { return tensorTypes[t].blockSize }

// TypeSize returns the number of bytes per block, or 0 for an unknown type.
func (t TensorType) TypeSize() uint64 { return tensorTypes[t].typeSize }

// TensorSize returns the number of bytes of a tensor of type t and the given
// shape (ne[0] first). It fails for unknown types, a first dimension that is
// not a multiple of the block size, more than [MaxDims] dimensions, or sizes
// that overflow int64.
func TensorSize(t TensorType, shape []uint64) (uint64, error) {
	ti, ok := tensorTypes[t]
	if !ok {
		return 0, fmt.Errorf("gguf: unknown tensor type %d", uint32(t))
	}
	if len(shape) > MaxDims {
		return 0, fmt.Errorf("gguf: %d dimensions, at most %d allowed", len(shape), MaxDims)
	}
	n := uint64(1)
	for i, d := range shape {
		if d > 1<<62 {
			return 0, fmt.Errorf("gguf: dimension %d too large: %d", i, d)
		}
		if d != 0 && n > (1<<62)/d {
			return 0, fmt.Errorf("gguf: tensor shape %v too large", shape)
		}
		n *= d
	}
	ne0 := uint64(1)
	if len(shape) > 0 {
		ne0 = shape[0]
	}
	if ne0%ti.blockSize != 0 {
		return 0, fmt.Errorf("gguf: first dimension %d of a %s tensor is not a multiple of the block size %d", ne0, ti.name, ti.blockSize)
	}
	blocks := n / ti.blockSize
	if blocks != 0 && ti.typeSize > (1<<62)/blocks {
		return 0, fmt.Errorf("gguf: tensor shape %v too large", shape)
	}
	return blocks * ti.typeSize, nil
}

// KV is one metadata key/value pair. Value holds one of uint8, int8, uint16,
// int16, uint32, int32, uint64, int64, float32, float64, bool, string, or a
// slice of one of those types for array values.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	// Name is the tensor name, e.g. "blk.0.attn_q.weight".
	Name string
	// Shape lists the dimensions with ne[0] (the contiguous one) first, as ggml does.
	Shape []uint64
	// Type is the element type.
	Type TensorType
	// Offset is the position of the data relative to File.DataOffset.
	Offset uint64
}

// Elements returns the number of elements of the tensor.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size returns the number of bytes of the tensor data.
func (t TensorInfo) Size() (uint64, error) { return TensorSize(t.Type, t.Shape) }

// typeOf returns the GGUF type of a supported Go value, whether it is an
// array, and false if the value is not supported.
func typeOf(v any) (elem Type, isArray bool, ok bool) {
	switch v.(type) {
	case uint8:
		return Uint8, false, true
	case int8:
		return Int8, false, true
	case uint16:
		return Uint16, false, true
	case int16:
		return Int16, false, true
	case uint32:
		return Uint32, false, true
	case int32:
		return Int32, false, true
	case float32:
		return Float32, false, true
	case bool:
		return Bool, false, true
	case string:
		return String, false, true
	case uint64:
		return Uint64, false, true
	case int64:
		return Int64, false, true
	case float64:
		return Float64, false, true
	case []uint8:
		return Uint8, true, true
	case []int8:
		return Int8, true, true
	case []uint16:
		return Uint16, true, true
	case []int16:
		return Int16, true, true
	case []uint32:
		return Uint32, true, true
	case []int32:
		return Int32, true, true
	case []float32:
		return Float32, true, true
	case []bool:
		return Bool, true, true
	case []string:
		return String, true, true
	case []uint64:
		return Uint64, true, true
	case []int64:
		return Int64, true, true
	case []float64:
		return Float64, true, true
	}
	return 0, false, false
}

// TypeOf returns the GGUF type a value would be stored as: the scalar type,
// or [Array] for slices. It reports false for unsupported values.
func TypeOf(v any) (Type, bool) {
	t, arr, ok := typeOf(v)
	if arr {
		return Array, ok
	}
	return t, ok
}
