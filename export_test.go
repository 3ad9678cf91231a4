package llama

import "github.com/x/llama/internal/capi"

// SelectTopK is the fast path's top-k selection for the tests of package
// llama_test: the k candidates of greatest logit of logits biased by bias,
// in llama.cpp's order.
func SelectTopK(logits []float32, bias map[Token]float32, k int) []TokenData {
	return selectTopK(nil, logits, sortedBias(bias), k)
}

// FastPath reports whether c samples through the top-k fast path.
func FastPath(c *SamplerChain) bool { return c.fast != nil }

// grammarOf returns the grammar sampler of chain c, nil when it has none.
func grammarOf(c *SamplerChain) *grammarSampler {
	for i := int32(0); i < capi.SamplerChainN(c.ptr); i++ {
		if s := capi.SamplerChainGet(c.ptr, i); s != nil && isGoSampler(s) {
			if e := goSampler(s); e != nil {
				if g, ok := e.s.(*grammarSampler); ok {
					return g
				}
			}
		}
	}
	return nil
}

// GrammarVerdicts returns what llama.cpp's grammar engine and the Go stacks
// that follow it (gbnf.Stacks) say of token t next, for the grammar sampler
// of chain c; following reports whether the stacks still follow the engine.
func GrammarVerdicts(c *SamplerChain, t Token) (engine, stacks, following bool) {
	g := grammarOf(c)
	if g.stacks == nil {
		return g.allowed(t), false, false
	}
	return g.allowed(t), g.stacks.Clone().AcceptToken(int32(t), g.m.appendPiece(nil, t, true)), true
}
