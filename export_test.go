package llama

// SelectTopK is the fast path's top-k selection for the tests of package
// llama_test: the k candidates of greatest logit of logits biased by bias,
// in llama.cpp's order.
func SelectTopK(logits []float32, bias map[Token]float32, k int) []TokenData {
	return selectTopK(nil, logits, sortedBias(bias), k)
}

// FastPath reports whether c samples through the top-k fast path.
func FastPath(c *SamplerChain) bool { return c.fast != nil }
