package gguf

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSetEncoder(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Encoder
		want []KV
	}{
		{"no projection", Encoder{Embd: 384, FF: 1536, Blocks: 6, Heads: 12, NormEps: 1e-12}, []KV{
			{"p.embedding_length", uint32(384)}, {"p.feed_forward_length", uint32(1536)}, {"p.block_count", uint32(6)},
			{"p.attention.head_count", uint32(12)}, {"p.attention.layer_norm_epsilon", float32(1e-12)}}},
		{"projection", Encoder{Embd: 32, FF: 64, Blocks: 2, Proj: 64, Heads: 4, NormEps: 1e-5}, []KV{
			{"p.embedding_length", uint32(32)}, {"p.feed_forward_length", uint32(64)}, {"p.block_count", uint32(2)},
			{"p.projection_dim", uint32(64)}, {"p.attention.head_count", uint32(4)}, {"p.attention.layer_norm_epsilon", float32(1e-5)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter()
			w.SetEncoder("p", tc.e)
			assert.Equal(t, tc.want, w.KV())
		})
	}
}
