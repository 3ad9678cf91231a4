package gguf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func half(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>10)&0x1f, float32(h&0x3ff)
	switch exp {
	case 0:
		return sign * man / 1024 * float32(math.Pow(2, -14))
	case 0x1f:
		return sign * float32(math.Inf(1))
	}
	return sign * (1 + man/1024) * float32(math.Pow(2, float64(exp-15)))
}

func TestFloat16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff}, {1e6, 0x7c00},
		{float32(math.Pow(2, -24)), 0x0001}, {1e-9, 0}, {0.1, 0x2e66}, {1.0009765625, 0x3c01},
	} {
		assert.Equal(t, tc.want, float16(tc.in), "%g", tc.in)
	}
}

// TestQuantize decodes what Quantize wrote (as ggml does) and checks each
// value against the original.
func TestQuantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float32, 32*64)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	for _, typ := range []TensorType{Q8_0, Q4_0} {
		b, err := Quantize(typ, data)
		require.NoError(t, err)
		require.Equal(t, uint64(len(data)/32)*typ.TypeSize(), uint64(len(b)))
		for blk := 0; blk < len(data)/32; blk++ {
			raw := b[uint64(blk)*typ.TypeSize():]
			d := half(binary.LittleEndian.Uint16(raw))
			for j := range 32 {
				var got float32
				if typ == Q8_0 {
					got = d * float32(int8(raw[2+j]))
				} else {
					nib := raw[2+j%16] & 0xf
					if j >= 16 {
						nib = raw[2+j%16] >> 4
					}
					got = d * (float32(nib) - 8)
				}
				// Half a step, but Q4_0 clips +8 steps to +7 (ggml's
				// reference rounding): values of the sign opposite to the
				// block's largest can be a whole step off.
				tol := 0.51
				if typ == Q4_0 {
					tol = 1.01
				}
				assert.InDelta(t, data[blk*32+j], got, math.Abs(float64(d))*tol+1e-3, "%s block %d value %d", typ, blk, j)
			}
		}
	}
	_, err := Quantize(Q8_0, data[:33])
	require.Error(t, err)
	_, err = Quantize(Q4_K, data)
	require.Error(t, err)
}
