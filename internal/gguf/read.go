package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// File is the parsed header of a GGUF file: metadata and tensor
// descriptors, without the tensor data.
type File struct {
	// Version is the GGUF format version (2 or 3).
	Version uint32
	// KV holds the metadata in file order.
	KV []KV
	// Tensors holds the tensor descriptors in file order.
	Tensors []TensorInfo
	// Alignment is the data alignment (general.alignment or 32).
	Alignment uint64
	// DataOffset is the file offset where the tensor data section starts.
	DataOffset int64

	kvIndex     map[string]int
	tensorIndex map[string]int
}

// Open reads the header, metadata and tensor descriptors of the GGUF file at
// path. Tensor data is not read; use [File.TensorData].
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Read(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return f, nil
}

// ErrFormat is wrapped by every error that reports malformed GGUF content.
var ErrFormat = errors.New("gguf: invalid file")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// reader is a buffered, bounded cursor over an io.ReaderAt.
type reader struct {
	br   *bufio.Reader
	pos  int64
	size int64
	buf  [8]byte
	// maxArray, when positive, is the longest array value kept; longer
	// ones are walked (bounds checked) and stored as a SkippedArray.
	maxArray int
}

// skip consumes n bytes.
func (r *reader) skip(n int64, what string) error {
	if n > r.remaining() {
		return formatErr("truncated while reading %s at offset %d", what, r.pos)
	}
	if _, err := r.br.Discard(int(n)); err != nil {
		return fmt.Errorf("gguf: reading %s at offset %d: %w", what, r.pos, err)
	}
	r.pos += n
	return nil
}

// SkippedArray stands for an array value ReadMetadataLight did not keep.
type SkippedArray struct {
	Elem Type // the element type
	Len  int  // the element count
}

func (r *reader) remaining() int64 { return r.size - r.pos }

func (r *reader) read(n int, what string) ([]byte, error) {
	if int64(n) > r.remaining() {
		return nil, formatErr("truncated while reading %s at offset %d", what, r.pos)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.br, b); err != nil {
		return nil, fmt.Errorf("gguf: reading %s at offset %d: %w", what, r.pos, err)
	}
	r.pos += int64(n)
	return b, nil
}

func (r *reader) u8(what string) (uint8, error) {
	b, err := r.read(1, what)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) u16(what string) (uint16, error) {
	b, err := r.read(2, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.read(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.read(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 element count and checks that n elements of at
// least minSize bytes each fit in the rest of the input.
func (r *reader) count(what string, minSize int64) (int, error) {
	n, err := r.u64(what)
	if err != nil {
		return 0, err
	}
	if minSize > 0 && n > uint64(r.remaining()/minSize) {
		return 0, formatErr("%s %d does not fit in the remaining %d bytes", what, n, r.remaining())
	}
	if n > math.MaxInt {
		return 0, formatErr("%s %d too large", what, n)
	}
	return int(n), nil
}

func (r *reader) str(what string) (string, error) {
	n, err := r.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(r.remaining()) {
		return "", formatErr("%s length %d exceeds the remaining %d bytes", what, n, r.remaining())
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return "", fmt.Errorf("gguf: reading %s at offset %d: %w", what, r.pos, err)
	}
	r.pos += int64(n)
	return string(b), nil
}

// Read parses a GGUF file of the given size from r. It reads the header,
// metadata and tensor descriptors, and checks that the tensor data lies
// within size. Every count and length is bounded by size.
func Read(r io.ReaderAt, size int64) (*File, error) {
	f, rd, nTensors, err := readMetadata(r, size, 0)
	if err != nil {
		return nil, err
	}
	if err := rd.tensors(f, nTensors, size); err != nil {
		return nil, err
	}
	return f, nil
}

// ReadMetadata parses the header and the metadata of a GGUF file of the
// given size from r, as Read does, and stops before the tensor
// descriptors: File.Tensors is empty and File.DataOffset is zero.
func ReadMetadata(r io.ReaderAt, size int64) (*File, error) {
	f, _, _, err := readMetadata(r, size, 0)
	return f, err
}

// ReadMetadataLight is ReadMetadata for a quick look at the scalar
// metadata: arrays of more than maxArray elements (a vocabulary, its
// scores) are walked and bounds-checked as ReadMetadata does, but not
// kept; their value is a SkippedArray.
func ReadMetadataLight(r io.ReaderAt, size int64, maxArray int) (*File, error) {
	f, _, _, err := readMetadata(r, size, max(maxArray, 1))
	return f, err
}

func readMetadata(r io.ReaderAt, size int64, maxArray int) (*File, *reader, int, error) {
	if size < 0 {
		return nil, nil, 0, fmt.Errorf("gguf: negative size %d", size)
	}
	rd := &reader{br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10), size: size, maxArray: maxArray}

	magic, err := rd.read(4, "magic")
	if err != nil {
		return nil, nil, 0, err
	}
	if string(magic) != Magic {
		return nil, nil, 0, formatErr("bad magic %q, want %q", magic, Magic)
	}
	f := &File{Alignment: DefaultAlignment}
	if f.Version, err = rd.u32("version"); err != nil {
		return nil, nil, 0, err
	}
	switch {
	case f.Version == 1:
		return nil, nil, 0, formatErr("GGUF version 1 is not supported")
	case f.Version == 0 || f.Version > Version:
		return nil, nil, 0, formatErr("unsupported GGUF version %d (wrong endianness?)", f.Version)
	}
	// Minimum encoded sizes: a tensor descriptor is a name length (8),
	// n_dims (4), type (4) and offset (8); a KV is a key length (8), a type
	// (4) and at least one byte of value.
	nTensors, err := rd.count("tensor count", 24)
	if err != nil {
		return nil, nil, 0, err
	}
	nKV, err := rd.count("metadata count", 13)
	if err != nil {
		return nil, nil, 0, err
	}

	f.KV = make([]KV, 0, nKV)
	f.kvIndex = make(map[string]int, nKV)
	for i := 0; i < nKV; i++ {
		key, err := rd.str("key")
		if err != nil {
			return nil, nil, 0, fmt.Errorf("%w (metadata entry %d)", err, i)
		}
		if key == "" {
			return nil, nil, 0, formatErr("metadata entry %d has an empty key", i)
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, nil, 0, formatErr("duplicate metadata key %q", key)
		}
		v, err := rd.value(key)
		if err != nil {
			return nil, nil, 0, err
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}

	if v, ok := f.Get(KeyAlignment); ok {
		a, isU32 := v.(uint32)
		if !isU32 {
			return nil, nil, 0, formatErr("%s must be u32, got %T", KeyAlignment, v)
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, nil, 0, formatErr("%s %d is not a power of two", KeyAlignment, a)
		}
		f.Alignment = uint64(a)
	}

	return f, rd, nTensors, nil
}

// tensors reads the tensor descriptors that follow the metadata.
func (rd *reader) tensors(f *File, nTensors int, size int64) error {
	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tensorIndex = make(map[string]int, nTensors)
	for i := 0; i < nTensors; i++ {
		ti, err := rd.tensorInfo()
		if err != nil {
			return fmt.Errorf("%w (tensor %d)", err, i)
		}
		if _, dup := f.tensorIndex[ti.Name]; dup {
			return formatErr("duplicate tensor name %q", ti.Name)
		}
		f.tensorIndex[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}

	f.DataOffset = rd.pos
	if nTensors > 0 {
		f.DataOffset = int64(alignUp(uint64(rd.pos), f.Alignment))
	}
	// Tensors must be laid out back to back, each padded to the alignment,
	// and the data must lie inside the file.
	var expect uint64
	for _, ti := range f.Tensors {
		if ti.Offset != expect {
			return formatErr("tensor %q has offset %d, expected %d", ti.Name, ti.Offset, expect)
		}
		n, _ := ti.Size() // validated in tensorInfo
		if n > uint64(size) || uint64(f.DataOffset)+ti.Offset > uint64(size)-n {
			return formatErr("tensor %q data [%d, +%d) lies beyond the end of the file (%d bytes)", ti.Name, uint64(f.DataOffset)+ti.Offset, n, size)
		}
		expect += alignUp(n, f.Alignment)
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

func (rd *reader) tensorInfo() (TensorInfo, error) {
	var ti TensorInfo
	name, err := rd.str("tensor name")
	if err != nil {
		return ti, err
	}
	if name == "" {
		return ti, formatErr("empty tensor name")
	}
	if len(name) >= MaxNameLen {
		return ti, formatErr("tensor name %q is %d bytes long, must be shorter than %d", name, len(name), MaxNameLen)
	}
	ti.Name = name
	nDims, err := rd.u32("tensor dimension count")
	if err != nil {
		return ti, err
	}
	if nDims > MaxDims {
		return ti, formatErr("tensor %q has %d dimensions, at most %d allowed", name, nDims, MaxDims)
	}
	ti.Shape = make([]uint64, nDims)
	for j := range ti.Shape {
		if ti.Shape[j], err = rd.u64("tensor dimension"); err != nil {
			return ti, err
		}
		if ti.Shape[j] > math.MaxInt64 {
			return ti, formatErr("tensor %q dimension %d is negative", name, j)
		}
	}
	typ, err := rd.u32("tensor type")
	if err != nil {
		return ti, err
	}
	ti.Type = TensorType(typ)
	if _, err := TensorSize(ti.Type, ti.Shape); err != nil {
		return ti, fmt.Errorf("%w: tensor %q: %w", ErrFormat, name, err)
	}
	if ti.Offset, err = rd.u64("tensor offset"); err != nil {
		return ti, err
	}
	return ti, nil
}

func (rd *reader) value(key string) (any, error) {
	t, err := rd.u32("value type")
	if err != nil {
		return nil, err
	}
	typ := Type(t)
	if typ != Array {
		return rd.scalar(key, typ)
	}
	et, err := rd.u32("array element type")
	if err != nil {
		return nil, err
	}
	elem := Type(et)
	minSize := int64(elem.fixedSize())
	switch {
	case elem == String:
		minSize = 8
	case minSize == 0:
		return nil, formatErr("key %q: invalid array element type %d", key, et)
	}
	n, err := rd.count("array length", minSize)
	if err != nil {
		return nil, fmt.Errorf("%w (key %q)", err, key)
	}
	if rd.maxArray > 0 && n > rd.maxArray {
		if elem != String {
			return SkippedArray{Elem: elem, Len: n}, rd.skip(int64(n)*minSize, key)
		}
		for range n {
			l, err := rd.u64(key + " string length")
			if err != nil {
				return nil, err
			}
			if l > uint64(rd.remaining()) {
				return nil, formatErr("%s string length %d exceeds the remaining %d bytes", key, l, rd.remaining())
			}
			if err := rd.skip(int64(l), key); err != nil {
				return nil, err
			}
		}
		return SkippedArray{Elem: elem, Len: n}, nil
	}
	switch elem {
	case Uint8:
		return readArr(rd, n, func() (uint8, error) { return rd.u8(key) })
	case Int8:
		return readArr(rd, n, func() (int8, error) { v, err := rd.u8(key); return int8(v), err })
	case Uint16:
		return readArr(rd, n, func() (uint16, error) { return rd.u16(key) })
	case Int16:
		return readArr(rd, n, func() (int16, error) { v, err := rd.u16(key); return int16(v), err })
	case Uint32:
		return readArr(rd, n, func() (uint32, error) { return rd.u32(key) })
	case Int32:
		return readArr(rd, n, func() (int32, error) { v, err := rd.u32(key); return int32(v), err })
	case Float32:
		return readArr(rd, n, func() (float32, error) { v, err := rd.u32(key); return math.Float32frombits(v), err })
	case Bool:
		return readArr(rd, n, func() (bool, error) { return rd.boolean(key) })
	case String:
		return readArr(rd, n, func() (string, error) { return rd.str(key) })
	case Uint64:
		return readArr(rd, n, func() (uint64, error) { return rd.u64(key) })
	case Int64:
		return readArr(rd, n, func() (int64, error) { v, err := rd.u64(key); return int64(v), err })
	default: // Float64
		return readArr(rd, n, func() (float64, error) { v, err := rd.u64(key); return math.Float64frombits(v), err })
	}
}

func readArr[T any](rd *reader, n int, next func() (T, error)) (any, error) {
	out := make([]T, n)
	for i := range out {
		v, err := next()
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (rd *reader) boolean(key string) (bool, error) {
	v, err := rd.u8(key)
	if err != nil {
		return false, err
	}
	if v > 1 {
		return false, formatErr("key %q: invalid bool value %d", key, v)
	}
	return v == 1, nil
}

func (rd *reader) scalar(key string, typ Type) (any, error) {
	switch typ {
	case Uint8:
		return rd.u8(key)
	case Int8:
		v, err := rd.u8(key)
		return int8(v), err
	case Uint16:
		return rd.u16(key)
	case Int16:
		v, err := rd.u16(key)
		return int16(v), err
	case Uint32:
		return rd.u32(key)
	case Int32:
		v, err := rd.u32(key)
		return int32(v), err
	case Float32:
		v, err := rd.u32(key)
		return math.Float32frombits(v), err
	case Bool:
		return rd.boolean(key)
	case String:
		return rd.str(key)
	case Uint64:
		return rd.u64(key)
	case Int64:
		v, err := rd.u64(key)
		return int64(v), err
	case Float64:
		v, err := rd.u64(key)
		return math.Float64frombits(v), err
	}
	return nil, formatErr("key %q has invalid type %d", key, uint32(typ))
}
