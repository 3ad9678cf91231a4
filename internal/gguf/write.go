package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Writer builds a GGUF version 3 file in memory and writes it out. Metadata
// keeps insertion order; tensors are written in the order they were added.
// The zero value is not ready to use; call [NewWriter].
type Writer struct {
	kv      []KV
	kvIndex map[string]int
	tensors []writerTensor
	names   map[string]bool
}

type writerTensor struct {
	info TensorInfo
	data []byte
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{kvIndex: map[string]int{}, names: map[string]bool{}}
}

// SetKV sets a metadata value. Setting an existing key replaces its value in
// place, keeping its original position. Value must be one of the types listed
// on [KV]; an unsupported value makes [Writer.WriteTo] fail.
func (w *Writer) SetKV(key string, value any) {
	if i, ok := w.kvIndex[key]; ok {
		w.kv[i].Value = value
		return
	}
	w.kvIndex[key] = len(w.kv)
	w.kv = append(w.kv, KV{Key: key, Value: value})
}

// DeleteKV removes a metadata key if present.
func (w *Writer) DeleteKV(key string) {
	i, ok := w.kvIndex[key]
	if !ok {
		return
	}
	w.kv = append(w.kv[:i], w.kv[i+1:]...)
	delete(w.kvIndex, key)
	for j := i; j < len(w.kv); j++ {
		w.kvIndex[w.kv[j].Key] = j
	}
}

// KV returns the metadata set so far, in order. The slice must not be
// modified.
func (w *Writer) KV() []KV { return w.kv }

// CopyKV copies all metadata of f into the writer, in f's order, except the
// keys for which skip returns true (skip may be nil to copy everything).
// Keys already set are replaced in place. Note that a copied
// general.alignment also sets the alignment of the written file.
func (w *Writer) CopyKV(f *File, skip func(key string) bool) {
	for _, kv := range f.KV {
		if skip != nil && skip(kv.Key) {
			continue
		}
		w.SetKV(kv.Key, kv.Value)
	}
}

// AddTensor adds a tensor with the given shape (ne[0] first), type and raw
// data. It fails if the name is empty, too long or already used, or if
// len(data) does not match the shape and type.
func (w *Writer) AddTensor(name string, shape []uint64, typ TensorType, data []byte) error {
	if name == "" {
		return fmt.Errorf("gguf: empty tensor name")
	}
	if len(name) >= MaxNameLen {
		return fmt.Errorf("gguf: tensor name %q is %d bytes long, must be shorter than %d", name, len(name), MaxNameLen)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if len(shape) == 0 {
		return fmt.Errorf("gguf: tensor %q has no dimensions", name)
	}
	n, err := TensorSize(typ, shape)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if uint64(len(data)) != n {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, shape %v of %s needs %d", name, len(data), shape, typ, n)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writerTensor{
		info: TensorInfo{Name: name, Shape: append([]uint64(nil), shape...), Type: typ},
		data: data,
	})
	return nil
}

// AddTensorF32 adds an F32 tensor from float32 values.
func (w *Writer) AddTensorF32(name string, shape []uint64, data []float32) error {
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return w.AddTensor(name, shape, F32, b)
}

// alignment returns the data alignment selected by general.alignment.
func (w *Writer) alignment() (uint64, error) {
	i, ok := w.kvIndex[KeyAlignment]
	if !ok {
		return DefaultAlignment, nil
	}
	a, ok := w.kv[i].Value.(uint32)
	if !ok {
		return 0, fmt.Errorf("gguf: %s must be a uint32, got %T", KeyAlignment, w.kv[i].Value)
	}
	if a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("gguf: %s %d is not a power of two", KeyAlignment, a)
	}
	return uint64(a), nil
}

type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
	buf [8]byte
}

func (c *countingWriter) bytes(b []byte) {
	if c.err != nil {
		return
	}
	k, err := c.w.Write(b)
	c.n += int64(k)
	c.err = err
}

func (c *countingWriter) u8(v uint8) { c.buf[0] = v; c.bytes(c.buf[:1]) }
func (c *countingWriter) u16(v uint16) {
	binary.LittleEndian.PutUint16(c.buf[:], v)
	c.bytes(c.buf[:2])
}
func (c *countingWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(c.buf[:], v)
	c.bytes(c.buf[:4])
}
func (c *countingWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(c.buf[:], v)
	c.bytes(c.buf[:8])
}
func (c *countingWriter) str(s string) {
	c.u64(uint64(len(s)))
	if c.err == nil {
		k, err := c.w.WriteString(s)
		c.n += int64(k)
		c.err = err
	}
}
func (c *countingWriter) boolean(b bool) {
	if b {
		c.u8(1)
	} else {
		c.u8(0)
	}
}
func (c *countingWriter) pad(a uint64) {
	for c.err == nil && uint64(c.n)%a != 0 {
		c.u8(0)
	}
}

func writeArr[T any](c *countingWriter, elem Type, vs []T, put func(T)) {
	c.u32(uint32(Array))
	c.u32(uint32(elem))
	c.u64(uint64(len(vs)))
	for _, v := range vs {
		put(v)
	}
}

func (c *countingWriter) value(v any) {
	t, isArr, _ := typeOf(v)
	if !isArr {
		c.u32(uint32(t))
	}
	switch x := v.(type) {
	case uint8:
		c.u8(x)
	case int8:
		c.u8(uint8(x))
	case uint16:
		c.u16(x)
	case int16:
		c.u16(uint16(x))
	case uint32:
		c.u32(x)
	case int32:
		c.u32(uint32(x))
	case float32:
		c.u32(math.Float32bits(x))
	case bool:
		c.boolean(x)
	case string:
		c.str(x)
	case uint64:
		c.u64(x)
	case int64:
		c.u64(uint64(x))
	case float64:
		c.u64(math.Float64bits(x))
	case []uint8:
		writeArr(c, t, x, c.u8)
	case []int8:
		writeArr(c, t, x, func(v int8) { c.u8(uint8(v)) })
	case []uint16:
		writeArr(c, t, x, c.u16)
	case []int16:
		writeArr(c, t, x, func(v int16) { c.u16(uint16(v)) })
	case []uint32:
		writeArr(c, t, x, c.u32)
	case []int32:
		writeArr(c, t, x, func(v int32) { c.u32(uint32(v)) })
	case []float32:
		writeArr(c, t, x, func(v float32) { c.u32(math.Float32bits(v)) })
	case []bool:
		writeArr(c, t, x, c.boolean)
	case []string:
		writeArr(c, t, x, c.str)
	case []uint64:
		writeArr(c, t, x, c.u64)
	case []int64:
		writeArr(c, t, x, func(v int64) { c.u64(uint64(v)) })
	case []float64:
		writeArr(c, t, x, func(v float64) { c.u64(math.Float64bits(v)) })
	}
}

// WriteTo writes the GGUF file to out and returns the number of bytes
// written. The data section is aligned to general.alignment if set (it must
// be a power-of-two uint32), otherwise to [DefaultAlignment].
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	for _, kv := range w.kv {
		if kv.Key == "" {
			return 0, fmt.Errorf("gguf: empty metadata key")
		}
		if _, _, ok := typeOf(kv.Value); !ok {
			return 0, fmt.Errorf("gguf: key %q: unsupported value type %T", kv.Key, kv.Value)
		}
	}
	align, err := w.alignment()
	if err != nil {
		return 0, err
	}
	c := &countingWriter{w: bufio.NewWriterSize(out, 256<<10)}
	c.bytes([]byte(Magic))
	c.u32(Version)
	c.u64(uint64(len(w.tensors)))
	c.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		c.str(kv.Key)
		c.value(kv.Value)
	}
	var off uint64
	for _, t := range w.tensors {
		c.str(t.info.Name)
		c.u32(uint32(len(t.info.Shape)))
		for _, d := range t.info.Shape {
			c.u64(d)
		}
		c.u32(uint32(t.info.Type))
		c.u64(off)
		off += alignUp(uint64(len(t.data)), align)
	}
	if len(w.tensors) > 0 {
		c.pad(align)
	}
	for _, t := range w.tensors {
		c.bytes(t.data)
		c.pad(align)
	}
	if c.err == nil {
		c.err = c.w.Flush()
	}
	if c.err != nil {
		return c.n, fmt.Errorf("gguf: write: %w", c.err)
	}
	return c.n, nil
}

// WriteFile writes the GGUF file to path, replacing it atomically.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, err = w.WriteTo(tmp); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}
