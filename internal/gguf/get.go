package gguf

import (
	"fmt"
	"io"
	"math"
)

func (f *File) index() map[string]int {
	if f.kvIndex == nil || len(f.kvIndex) != len(f.KV) {
		f.kvIndex = make(map[string]int, len(f.KV))
		for i, kv := range f.KV {
			f.kvIndex[kv.Key] = i
		}
	}
	return f.kvIndex
}

// Get returns the value of a metadata key.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.index()[key]
	if !ok || i >= len(f.KV) || f.KV[i].Key != key {
		// The KV slice was edited by the caller; fall back to a scan.
		for _, kv := range f.KV {
			if kv.Key == key {
				return kv.Value, true
			}
		}
		return nil, false
	}
	return f.KV[i].Value, true
}

// String returns a string metadata value. It reports false if the key is
// missing or not a string.
func (f *File) String(key string) (string, bool) {
	v, _ := f.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Bool returns a bool metadata value. It reports false if the key is missing
// or not a bool.
func (f *File) Bool(key string) (bool, bool) {
	v, _ := f.Get(key)
	b, ok := v.(bool)
	return b, ok
}

// Uint32 returns a u32 metadata value. It reports false if the key is
// missing or has another type.
func (f *File) Uint32(key string) (uint32, bool) {
	v, _ := f.Get(key)
	u, ok := v.(uint32)
	return u, ok
}

// Float32 returns an f32 metadata value. It reports false if the key is
// missing or has another type.
func (f *File) Float32(key string) (float32, bool) {
	v, _ := f.Get(key)
	x, ok := v.(float32)
	return x, ok
}

// Int returns an integer metadata value of any integer type as an int. It
// reports false if the key is missing, not an integer, or out of range.
func (f *File) Int(key string) (int, bool) {
	v, _ := f.Get(key)
	switch x := v.(type) {
	case uint8:
		return int(x), true
	case int8:
		return int(x), true
	case uint16:
		return int(x), true
	case int16:
		return int(x), true
	case uint32:
		return int(x), true
	case int32:
		return int(x), true
	case int64:
		return int(x), true
	case uint64:
		if x > math.MaxInt {
			return 0, false
		}
		return int(x), true
	}
	return 0, false
}

// Float returns a float metadata value (f32 or f64) as a float64. It reports
// false if the key is missing or not a float.
func (f *File) Float(key string) (float64, bool) {
	v, _ := f.Get(key)
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Strings returns a string-array metadata value. It reports false if the key
// is missing or not a string array.
func (f *File) Strings(key string) ([]string, bool) {
	v, _ := f.Get(key)
	s, ok := v.([]string)
	return s, ok
}

// Architecture returns general.architecture, or "" if it is not set.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// Tensor returns the descriptor of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	if f.tensorIndex == nil || len(f.tensorIndex) != len(f.Tensors) {
		f.tensorIndex = make(map[string]int, len(f.Tensors))
		for i, t := range f.Tensors {
			f.tensorIndex[t.Name] = i
		}
	}
	if i, ok := f.tensorIndex[name]; ok && i < len(f.Tensors) && f.Tensors[i].Name == name {
		return f.Tensors[i], true
	}
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// TensorData reads the raw bytes of the named tensor from r, which must be
// the file f was read from.
func (f *File) TensorData(r io.ReaderAt, name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	n, err := t.Size()
	if err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	off := uint64(f.DataOffset) + t.Offset
	if off > math.MaxInt64 || n > math.MaxInt {
		return nil, fmt.Errorf("gguf: tensor %q out of range", name)
	}
	buf := make([]byte, n)
	if k, err := r.ReadAt(buf, int64(off)); k < len(buf) {
		return nil, fmt.Errorf("gguf: reading tensor %q: %w", name, err)
	}
	return buf, nil
}

// TensorF32 reads an F32 tensor and decodes it.
func (f *File) TensorF32(r io.ReaderAt, name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	if t.Type != F32 {
		return nil, fmt.Errorf("gguf: tensor %q is %s, not f32", name, t.Type)
	}
	b, err := f.TensorData(r, name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return out, nil
}
