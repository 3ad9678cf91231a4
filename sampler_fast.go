package llama

import (
	"math"
	"runtime"
	"slices"
	"unsafe"

	"github.com/x/llama/internal/capi"
)

// The top-k fast path of SamplerChain.Sample.
//
// llama_sampler_sample copies the whole row of logits into a candidate
// array (32k entries for a 32k vocabulary) and hands it to the chain, whose
// top-k then heap-selects the k best of it. With a 32k vocabulary that is
// about a tenth of a continuous-batching step of 8 sequences on a 125M
// model, spent one slot after another between two decodes. A chain that
// begins with a top-k (after at most a logit bias) does the same selection
// here, in Go, straight from the logits: one pass that compares each logit
// with the heap's smallest and copies nothing, then the rest of the chain
// runs in C on the k candidates and the chain accepts the token, as
// llama_sampler_sample would.
//
// The result is the same token, not just the same distribution: the
// selection follows the algorithm of the C++ standard library's
// std::partial_sort that llama.cpp's top-k uses for k <= 128 (make a heap
// of the first k, replace its top by each later candidate that compares
// greater, then sort the heap), step for step, so that candidates of equal
// logits come out in the same order as in llama.cpp and a seeded dist
// sampler draws the same token. TestTopKMatchesLlama holds it against
// llama.cpp's top-k on tie-heavy rows.

// maxFastTopK is the largest k llama.cpp selects with std::partial_sort;
// above it llama.cpp buckets the logits, and the chain takes the C path.
const maxFastTopK = 128

// fastTopK is a chain's plan for the fast path: a top-k of k at chain
// index at, after a logit bias of sorted entries (or none).
type fastTopK struct {
	k    int
	at   int
	bias []capi.LogitBias // sorted by token, one entry per token
	rest []capi.Sampler   // the chain's samplers after the top-k
	heap []TokenData      // reused between calls
	// whole: the k candidates go through the whole chain in one call
	// rather than through each sampler after the top-k (one call across
	// purego rather than several). It gives the
	// same result when the bias is empty or bans only (-Inf): the top-k
	// keeps a sorted array of k as it is, and x-Inf-Inf is x-Inf for
	// every float x.
	whole bool
	arr   capi.TokenDataArray // reused between calls: passed to C, it would escape
}

// planFastTopK returns the fast plan of a chain built from specs, or nil
// when the chain does not begin with [logit bias] top-k of 0 < k <= 128
// and k below the vocabulary size.
func planFastTopK(m *Model, specs []Sampler) *fastTopK {
	p := &fastTopK{}
	i := 0
	if i < len(specs) {
		if lb, ok := specs[i].(logitBiasSpec); ok {
			p.bias = sortedBias(lb.bias)
			i++
		}
	}
	if i >= len(specs) {
		return nil
	}
	tk, ok := specs[i].(topKSpec)
	if !ok || tk.k <= 0 || tk.k > maxFastTopK || tk.k >= int(m.nVocb) {
		return nil
	}
	p.k, p.at = tk.k, i
	p.heap = make([]TokenData, 0, tk.k)
	p.whole = true
	for _, b := range p.bias {
		if !math.IsInf(float64(b.Bias), -1) {
			p.whole = false
		}
	}
	return p
}

// sortedBias lists a logit bias map by token.
func sortedBias(bias map[Token]float32) []capi.LogitBias {
	bs := make([]capi.LogitBias, 0, len(bias))
	for t, b := range bias {
		bs = append(bs, capi.LogitBias{Token: int32(t), Bias: b})
	}
	slices.SortFunc(bs, func(a, b capi.LogitBias) int { return int(a.Token - b.Token) })
	return bs
}

// bind resolves the samplers after the top-k in chain (a new chain after
// Clone).
func (p *fastTopK) bind(chain capi.Sampler) {
	n := int(capi.SamplerChainN(chain))
	p.rest = p.rest[:0]
	for j := p.at + 1; j < n; j++ {
		p.rest = append(p.rest, capi.Sampler(uintptr(unsafe.Pointer(capi.SamplerChainGet(chain, int32(j))))))
	}
}

// clone returns a plan for a clone of the chain.
func (p *fastTopK) clone(chain capi.Sampler) *fastTopK {
	if p == nil {
		return nil
	}
	q := &fastTopK{k: p.k, at: p.at, bias: p.bias, heap: make([]TokenData, 0, p.k), whole: p.whole}
	q.bind(chain)
	return q
}

// sample picks a token from logits through the chain's plan and, with
// accept, accepts it into chain; ok is false when no sampler after the
// top-k selected one.
func (p *fastTopK) sample(chain capi.Sampler, logits []float32, accept bool) (Token, bool) {
	h := selectTopK(p.heap[:0], logits, p.bias, p.k)
	p.heap = h
	p.arr = capi.TokenDataArray{Data: unsafe.Pointer(&h[0]), Size: uintptr(len(h)), Selected: -1, Sorted: true}
	arr := &p.arr
	if p.whole {
		capi.SamplerApply(chain, arr)
	} else {
		for _, s := range p.rest {
			capi.SamplerApply(s, arr)
		}
	}
	runtime.KeepAlive(h)
	if arr.Selected < 0 || uintptr(arr.Selected) >= arr.Size {
		return NoToken, false
	}
	t := unsafe.Slice((*TokenData)(arr.Data), arr.Size)[arr.Selected].ID
	if accept {
		capi.SamplerAccept(chain, int32(t))
	}
	return t, true
}

// selectTopK appends to h the k candidates of greatest logit (logits by
// token id, biased by bias: sorted by token, one entry each), ordered as
// llama.cpp's top-k orders them: greatest logit first, ties as
// std::partial_sort leaves them. k must be in (0, len(logits)).
func selectTopK(h []TokenData, logits []float32, bias []capi.LogitBias, k int) []TokenData {
	// The first k candidates make the heap (biased where they must be).
	bi := 0
	for i := range k {
		l := logits[i]
		for bi < len(bias) && int(bias[bi].Token) < i {
			bi++
		}
		if bi < len(bias) && int(bias[bi].Token) == i {
			l += bias[bi].Bias
		}
		h = append(h, TokenData{ID: Token(i), Logit: l})
	}
	makeHeap(h)
	// Each later candidate replaces the heap's top (its smallest logit)
	// when it compares greater. The logits between two biased tokens run
	// through a tight loop; each biased token is then offered on its own.
	from := k
	for ; bi <= len(bias); bi++ {
		to := len(logits)
		if bi < len(bias) {
			to = int(bias[bi].Token)
			if to < from {
				continue
			}
		}
		offerRun(h, logits[from:to], from)
		if to == len(logits) {
			break
		}
		if l := logits[to] + bias[bi].Bias; l > h[0].Logit {
			adjustHeap(h, 0, TokenData{ID: Token(to), Logit: l})
		}
		from = to + 1
	}
	// Sort the heap: move its top to the end, one place at a time.
	for last := len(h) - 1; last > 0; last-- {
		v := h[last]
		h[last] = h[0]
		adjustHeap(h[:last], 0, v)
	}
	return h
}

// offerRun offers the logits of seg (token ids from base on) to the heap h,
// in order: each that compares greater than the heap's top replaces it.
// The logits go by eights, and a group is looked at one by one only when
// one of them beats the top (rarely, once the heap holds good candidates):
// the eight comparisons of a group then cost about what one did, the
// branches being predicted, which takes a third off selecting from a 32k
// row (28.7 to 18.1 µs on the benchmark machine). The
// result is the sequential one, since the top only grows: a logit that did
// not beat it before a replacement does not beat it after.
func offerRun(h []TokenData, seg []float32, base int) {
	top := h[0].Logit
	i := 0
	for ; i+8 <= len(seg); i += 8 {
		s := seg[i : i+8 : i+8]
		if s[0] > top || s[1] > top || s[2] > top || s[3] > top ||
			s[4] > top || s[5] > top || s[6] > top || s[7] > top {
			for j, l := range s {
				if l > top {
					adjustHeap(h, 0, TokenData{ID: Token(base + i + j), Logit: l})
					top = h[0].Logit
				}
			}
		}
	}
	for j, l := range seg[i:] {
		if l > top {
			adjustHeap(h, 0, TokenData{ID: Token(base + i + j), Logit: l})
			top = h[0].Logit
		}
	}
}

// The heap of std::partial_sort under llama.cpp's comparison "a before b
// when a.logit > b.logit": its top is the candidate of smallest logit.
// These follow the C++ library's heap algorithms exactly (sift the hole
// down to a leaf, then push the value up), since the order of equal logits
// depends on them.

// before is the comparison.
func before(a, b *TokenData) bool { return a.Logit > b.Logit }

// makeHeap arranges h into a heap.
func makeHeap(h []TokenData) {
	n := len(h)
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		adjustHeap(h, parent, h[parent])
		if parent == 0 {
			return
		}
	}
}

// adjustHeap moves the hole at hole down to a leaf along the children
// that come first, then pushes v up from there.
func adjustHeap(h []TokenData, hole int, v TokenData) {
	n := len(h)
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if before(&h[child], &h[child-1]) {
			child--
		}
		h[hole] = h[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		h[hole] = h[child-1]
		hole = child - 1
	}
	// push v up from hole, no higher than top
	parent := (hole - 1) / 2
	for hole > top && before(&h[parent], &v) {
		h[hole] = h[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	h[hole] = v
}
