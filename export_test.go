package llama

import (
	"unsafe"

	"github.com/x/llama/internal/capi"
)

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

// GrammarMasks returns, for the grammar sampler of chain c, which tokens of
// the whole vocabulary llama.cpp's grammar engine allows next (its filter)
// and which the Go filter that replaces it allows.
func GrammarMasks(c *SamplerChain) (engine, filter []bool) {
	engine, filter, err := GrammarMasksErr(c)
	if err != nil {
		panic(err)
	}
	return engine, filter
}

// GrammarMasksErr is GrammarMasks, with the Go filter's error (too much
// work) returned.
func GrammarMasksErr(c *SamplerChain) (engine, filter []bool, err error) {
	g := grammarOf(c)
	d := GrammarRow(c)
	GrammarFilterEngine(c, d)
	engine = make([]bool, len(d))
	for i := range d {
		engine[i] = !isNegInf(d[i].Logit)
		d[i].Logit = 0
	}
	if err := g.filter(d); err != nil {
		return nil, nil, err
	}
	filter = make([]bool, len(d))
	for i := range d {
		filter[i] = !isNegInf(d[i].Logit)
	}
	return engine, filter, nil
}

// GrammarRow returns a row of every token of chain c's model, logits 0.
func GrammarRow(c *SamplerChain) []TokenData {
	d := make([]TokenData, grammarOf(c).m.nVocb)
	for i := range d {
		d[i] = TokenData{ID: Token(i)}
	}
	return d
}

// GrammarFilterEngine filters d with llama.cpp's grammar engine, as chain
// c's grammar stands.
func GrammarFilterEngine(c *SamplerChain, d []TokenData) {
	arr := capi.TokenDataArray{Data: unsafe.Pointer(&d[0]), Size: uintptr(len(d)), Selected: -1}
	capi.SamplerApply(grammarOf(c).inner, &arr)
}

// GrammarFilterGo filters d with the Go filter, as chain c's grammar
// stands.
func GrammarFilterGo(c *SamplerChain, d []TokenData) error {
	return grammarOf(c).filter(d)
}

// GrammarEngineWork bounds the work of llama.cpp's filter over the whole
// vocabulary for chain c's grammar as it stands (gbnf.Stacks.FilterPaths
// summed over the tokens, each at most limit), for tests that call it.
func GrammarEngineWork(c *SamplerChain, limit int64) int64 {
	g := grammarOf(c)
	var sum int64
	for t := range int(g.m.nVocb) {
		sum += g.stacks.FilterPaths(g.vocab.v.Piece(t), limit)
		if sum > limit {
			return sum
		}
	}
	return sum
}

// GrammarTakes reports whether the Go stacks of chain c's grammar take
// token t next: where llama.cpp's filter allows a token that they do not
// take, its accept would throw (a token element inside a token's text).
func GrammarTakes(c *SamplerChain, t Token) bool {
	g := grammarOf(c)
	return g.stacks.Clone().AcceptToken(int32(t), g.m.appendPiece(nil, t, true))
}
