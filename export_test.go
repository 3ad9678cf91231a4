package llama

import (
	"slices"

	"github.com/x/llama/internal/capi"
)

// SelectTopK is the fast path's top-k selection for the tests of package
// llama_test: the k candidates of greatest logit of logits biased by bias,
// in llama.cpp's order.
func SelectTopK(logits []float32, bias map[Token]float32, k int) []TokenData {
	var bs []capi.LogitBias
	for t, b := range bias {
		bs = append(bs, capi.LogitBias{Token: int32(t), Bias: b})
	}
	slices.SortFunc(bs, func(a, b capi.LogitBias) int { return int(a.Token - b.Token) })
	return selectTopK(nil, logits, bs, k)
}

// FastPath reports whether c samples through the top-k fast path.
func FastPath(c *SamplerChain) bool { return c.fast != nil }
