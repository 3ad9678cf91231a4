package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Quantize encodes F32 values (a whole number of 32-value blocks) as t:
// F32, F16, Q8_0 or Q4_0, with ggml's reference rounding.
func Quantize(t TensorType, data []float32) ([]byte, error) {
	switch t {
	case F32:
		b := make([]byte, 4*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b, nil
	case F16:
		b := make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(b[2*i:], float16(v))
		}
		return b, nil
	case Q8_0, Q4_0:
	default:
		return nil, fmt.Errorf("gguf: quantize: unsupported type %s", t)
	}
	const qk = 32
	if len(data)%qk != 0 {
		return nil, fmt.Errorf("gguf: quantize %s: %d values are not whole blocks of %d", t, len(data), qk)
	}
	out := make([]byte, 0, uint64(len(data)/qk)*t.TypeSize())
	for blk := 0; blk < len(data); blk += qk {
		x := data[blk : blk+qk]
		if t == Q8_0 {
			// d = max|x| / 127, q = round(x / d).
			var amax float32
			for _, v := range x {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			id := float32(0)
			if d != 0 {
				id = 1 / d
			}
			out = binary.LittleEndian.AppendUint16(out, float16(d))
			for _, v := range x {
				out = append(out, byte(int8(math.Round(float64(v*id)))))
			}
			continue
		}
		// Q4_0: d = (the value of largest magnitude) / -8, nibbles of
		// x/d + 8.5 truncated to [0, 15]; the first half of the block in
		// the low nibbles, the second half in the high ones.
		var amax, mx float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		d := mx / -8
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		out = binary.LittleEndian.AppendUint16(out, float16(d))
		for j := range qk / 2 {
			lo := min(15, int8(x[j]*id+8.5))
			hi := min(15, int8(x[j+qk/2]*id+8.5))
			out = append(out, byte(lo)|byte(hi)<<4)
		}
	}
	return out, nil
}

// float16 converts to IEEE half precision, rounding to nearest even.
func float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case (b>>23)&0xff == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - exp)
		h := man >> shift
		if rem := man & (1<<shift - 1); rem > 1<<(shift-1) || (rem == 1<<(shift-1) && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | man>>13
	if rem := man & 0x1fff; rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}
