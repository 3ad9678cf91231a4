package llama

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/x/llama/internal/capi"
)

// DefaultSeed asks a sampler for a random seed.
const DefaultSeed uint32 = 0xFFFFFFFF

// llama.cpp's value (a compile-time check, as for MaxGrammarNesting).
const _ = uint(DefaultSeed-capi.DefaultSeed) + uint(capi.DefaultSeed-DefaultSeed)

// Sampler is one stage of a SamplerChain: a built-in llama.cpp sampler made
// by Greedy, Dist, TopK, ... or a Go sampler made by Custom. A Sampler value
// is a description; NewSamplerChain builds it for a model.
//
// The constructors take their arguments in one order: the sampler's own
// parameters (in llama.cpp's order), then minKeep (the fewest candidates
// to keep) where the sampler has one, then the seed where it draws at
// random (DefaultSeed: random), always last.
type Sampler interface {
	build(m *Model) (capi.Sampler, error)
	String() string
}

type samplerFunc struct {
	name string
	fn   func(m *Model) (capi.Sampler, error)
}

func (s samplerFunc) String() string                       { return s.name }
func (s samplerFunc) build(m *Model) (capi.Sampler, error) { return s.fn(m) }
func simple(name string, f func() capi.Sampler) Sampler {
	return samplerFunc{name, func(*Model) (capi.Sampler, error) { return f(), nil }}
}
func invalid(name, format string, args ...any) Sampler {
	err := errorf(CodeInvalid, "sampler "+name, format, args...)
	return samplerFunc{name, func(*Model) (capi.Sampler, error) { return 0, err }}
}

func finite(fs ...float32) bool {
	for _, f := range fs {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return false
		}
	}
	return true
}

// Size-like parameters are clamped when a chain is built, so that no value
// makes llama.cpp allocate out of proportion to the model: token counts
// (TopK's k, the minKeep of TopP, MinP, Typical and XTC, Mirostat's m) to
// the vocabulary size, and token windows (the lastN of Penalties and DRY,
// DRY's allowedLength) to the larger of the model's training context size
// and minWindowBound (65,536 tokens, for contexts extended past training),
// and never beyond maxWindowBound (what NewContext accepts as ContextSize),
// whatever the model's metadata says. A chain is built for a model, before
// any Context, so the context size itself is not known: -1 means the
// training context size.
const (
	minWindowBound = 1 << 16
	maxWindowBound = 1 << 24
)

// window returns the token window for n: -1 (or any negative) gives the
// training context size, and values above the bound give the bound.
func (m *Model) window(n int) int32 {
	train := min(max(int(capi.ModelNCtxTrain(m.ptr)), 1), maxWindowBound)
	if n < 0 {
		return int32(train)
	}
	return int32(min(n, max(train, minWindowBound)))
}

// keep clamps a minKeep to [0, vocabulary size].
func (m *Model) keep(n int) uintptr { return uintptr(min(max(n, 0), int(m.nVocb))) }

// withModel makes a sampler whose parameters depend on the model.
func withModel(name string, f func(m *Model) capi.Sampler) Sampler {
	return samplerFunc{name, func(m *Model) (capi.Sampler, error) { return f(m), nil }}
}

// Greedy picks the most likely token.
func Greedy() Sampler {
	// capi.SamplerInitGreedy is read when the chain is built: a Sampler made
	// before the library is loaded works.
	return simple("greedy", func() capi.Sampler { return capi.SamplerInitGreedy() })
}

// Dist picks a token at random by probability; seed DefaultSeed is random.
//
// A seed repeats the chain's random draws, not always the text: the same
// seed, prompt and model give the same text when the tokens are decoded
// the same way, but the logits of a decode can differ in their last bits
// with what else is in its batch (other sequences, as an engine batches
// requests together; the batch size; the threads; the backend), and a
// draw that falls near a boundary between two tokens then takes the other
// one, and the texts part from there. For text that repeats whatever the
// neighbours, sample greedily (Greedy, or Temp(0) before Dist).
func Dist(seed uint32) Sampler {
	return simple("dist", func() capi.Sampler { return capi.SamplerInitDist(seed) })
}

// TopK keeps the k most likely tokens (k <= 0: all; k above the
// vocabulary size is the vocabulary size).
func TopK(k int) Sampler { return topKSpec{k} }

// topKSpec is TopK's description; the chain's fast path recognizes it.
type topKSpec struct{ k int }

func (s topKSpec) String() string { return "top-k" }
func (s topKSpec) build(m *Model) (capi.Sampler, error) {
	return capi.SamplerInitTopK(int32(min(s.k, int(m.nVocb)))), nil
}

// TopP keeps the most likely tokens whose probabilities add up to p.
func TopP(p float32, minKeep int) Sampler {
	if !finite(p) {
		return invalid("top-p", "p %v is not finite", p)
	}
	return withModel("top-p", func(m *Model) capi.Sampler { return capi.SamplerInitTopP(p, m.keep(minKeep)) })
}

// MinP keeps tokens at least p times as likely as the most likely one.
func MinP(p float32, minKeep int) Sampler {
	if !finite(p) {
		return invalid("min-p", "p %v is not finite", p)
	}
	return withModel("min-p", func(m *Model) capi.Sampler { return capi.SamplerInitMinP(p, m.keep(minKeep)) })
}

// Typical is locally typical sampling with parameter p.
func Typical(p float32, minKeep int) Sampler {
	if !finite(p) {
		return invalid("typical", "p %v is not finite", p)
	}
	return withModel("typical", func(m *Model) capi.Sampler { return capi.SamplerInitTypical(p, m.keep(minKeep)) })
}

// Temp scales logits by 1/t (t <= 0 keeps only the most likely token).
func Temp(t float32) Sampler {
	if !finite(t) {
		return invalid("temp", "temperature %v is not finite", t)
	}
	return simple("temp", func() capi.Sampler { return capi.SamplerInitTemp(t) })
}

// TempExt is dynamic temperature: t ± delta by entropy, with exponent.
func TempExt(t, delta, exponent float32) Sampler {
	if !finite(t, delta, exponent) {
		return invalid("temp-ext", "parameters must be finite")
	}
	return simple("temp-ext", func() capi.Sampler { return capi.SamplerInitTempExt(t, delta, exponent) })
}

// XTC removes the most likely tokens above threshold t with probability p.
func XTC(p, t float32, minKeep int, seed uint32) Sampler {
	if !finite(p, t) {
		return invalid("xtc", "parameters must be finite")
	}
	return withModel("xtc", func(m *Model) capi.Sampler { return capi.SamplerInitXTC(p, t, m.keep(minKeep), seed) })
}

// TopNSigma keeps tokens within n standard deviations of the top logit.
func TopNSigma(n float32) Sampler {
	if !finite(n) {
		return invalid("top-n-sigma", "n %v is not finite", n)
	}
	return simple("top-n-sigma", func() capi.Sampler { return capi.SamplerInitTopNSigma(n) })
}

// Mirostat is Mirostat 1.0 with target entropy tau, learning rate eta and
// m tokens for estimating s (100 in the paper). It selects the token.
func Mirostat(tau, eta float32, m int, seed uint32) Sampler {
	if !finite(tau, eta) || m < 1 {
		return invalid("mirostat", "tau and eta must be finite and m at least 1")
	}
	return samplerFunc{"mirostat", func(mod *Model) (capi.Sampler, error) {
		return capi.SamplerInitMirostat(mod.nVocb, seed, tau, eta, int32(min(m, int(mod.nVocb)))), nil
	}}
}

// MirostatV2 is Mirostat 2.0 with target entropy tau and learning rate
// eta. It selects the token.
func MirostatV2(tau, eta float32, seed uint32) Sampler {
	if !finite(tau, eta) {
		return invalid("mirostat-v2", "tau and eta must be finite")
	}
	return simple("mirostat-v2", func() capi.Sampler { return capi.SamplerInitMirostatV2(seed, tau, eta) })
}

// Penalties applies repetition (repeat > 0, 1 = off), frequency and presence
// (0 = off) penalties over the last lastN tokens (0 = off; -1 = the model's
// training context size). lastN is clamped to the larger of the training
// context size and 65,536, so that no value allocates out of proportion.
func Penalties(lastN int, repeat, freq, present float32) Sampler {
	if !finite(repeat, freq, present) || repeat <= 0 {
		return invalid("penalties", "repeat must be > 0 and all finite")
	}
	return samplerFunc{"penalties", func(m *Model) (capi.Sampler, error) {
		return capi.SamplerInitPenalties(m.nVocb, m.window(lastN), repeat, freq, present), nil
	}}
}

// DRY is the "don't repeat yourself" sampler (multiplier 0 = off); breakers
// are the sequence breakers (nil: llama.cpp's defaults "\n", ":", "\"", "*").
// lastN is the window of tokens it looks at (0 = off; -1 = the model's
// training context size); lastN and allowedLength are clamped to the larger
// of the training context size and 65,536.
func DRY(multiplier, base float32, allowedLength, lastN int, breakers []string) Sampler {
	if !finite(multiplier, base) {
		return invalid("dry", "multiplier and base must be finite")
	}
	if breakers == nil {
		breakers = []string{"\n", ":", "\"", "*"}
	}
	allowedLength = max(allowedLength, 0)
	return samplerFunc{"dry", func(m *Model) (capi.Sampler, error) {
		last := m.window(lastN)
		allowed := m.window(allowedLength)
		cs := make([][]byte, len(breakers))
		ptrs := make([]uintptr, len(breakers)+1)
		for i, b := range breakers {
			cs[i] = append([]byte(b), 0)
			ptrs[i] = uintptr(unsafe.Pointer(&cs[i][0]))
		}
		s := capi.SamplerInitDRY(m.vocab, multiplier, base, allowed, last,
			unsafe.Pointer(&ptrs[0]), uintptr(len(breakers)))
		runtime.KeepAlive(cs)
		return s, nil
	}}
}

// AdaptiveP is the adaptive-p sampler with a target probability and decay.
// It selects the token.
func AdaptiveP(target, decay float32, seed uint32) Sampler {
	if !finite(target, decay) {
		return invalid("adaptive-p", "target and decay must be finite")
	}
	return simple("adaptive-p", func() capi.Sampler { return capi.SamplerInitAdaptiveP(target, decay, seed) })
}

// LogitBias adds a bias to the logits of tokens (-Inf bans a token).
func LogitBias(bias map[Token]float32) Sampler { return logitBiasSpec{bias} }

// logitBiasSpec is LogitBias's description; the chain's fast path
// recognizes it.
type logitBiasSpec struct{ bias map[Token]float32 }

func (s logitBiasSpec) String() string { return "logit-bias" }
func (s logitBiasSpec) build(m *Model) (capi.Sampler, error) {
	bs := make([]capi.LogitBias, 0, len(s.bias)+1)
	for t, b := range s.bias {
		if err := m.CheckToken(t); err != nil {
			return 0, err
		}
		if math.IsNaN(float64(b)) {
			return 0, errorf(CodeInvalid, "sampler logit-bias", "bias of token %d is NaN", t)
		}
		bs = append(bs, capi.LogitBias{Token: int32(t), Bias: b})
	}
	bs = append(bs, capi.LogitBias{})
	return capi.SamplerInitLogitBias(m.nVocb, int32(len(bs)-1), unsafe.Pointer(&bs[0])), nil
}

// Infill is the sampler for fill-in-the-middle models. It needs a model
// with an end-of-text or end-of-sequence token (which it falls back to):
// for another, the chain is an error matching ErrUnsupported.
func Infill() Sampler {
	return samplerFunc{"infill", func(m *Model) (capi.Sampler, error) {
		if st := m.SpecialTokens(); st.EOT == NoToken && st.EOS == NoToken {
			// llama.cpp asserts that one of them exists.
			return 0, errorf(CodeUnsupported, "sampler infill", "the model has no end-of-text nor end-of-sequence token")
		}
		return capi.SamplerInitInfill(m.vocab), nil
	}}
}

// SamplerChainOptions configures a chain; the zero value collects no
// timings and asks for a chain that picks tokens.
type SamplerChainOptions struct {
	Perf bool // collect sampling timings
	// Filter allows a chain that does not end with a sampler that selects
	// the token (see NewSamplerChain): a grammar or a top-k on its own,
	// to narrow candidates with Apply and follow tokens with Accept. Such
	// a chain picks no token: Sample, Propose, Generate and
	// Context.SetSampler refuse it.
	Filter bool
}

// SamplerChain runs samplers in order to pick the next token.
//
// A SamplerChain is not safe for concurrent use, except Close, which may be
// called from any goroutine. Close is idempotent; closing the Model closes
// its chains. Calls after Close return ErrClosed.
type SamplerChain struct {
	model *Model
	mu    sync.Mutex
	ptr   capi.Sampler
	names []string
	seed  uint32
	hasGo bool // holds Go samplers (grammars among them)
	// noClone names a Custom sampler that is not a CloneableSampler: Clone
	// refuses the chain rather than share the sampler's state.
	noClone string
	// fast is the top-k fast path of Sample (sampler_fast.go), nil when
	// the chain does not begin with a top-k or collects timings.
	fast *fastTopK
	perf bool // collects timings: not offloadable
	// selects: the chain ends with a sampler that selects the token; a
	// chain that does not (SamplerChainOptions.Filter) cannot sample.
	selects bool
	// Propose's candidates off the fast path, reused between calls.
	row    []TokenData
	rowArr capi.TokenDataArray
	// The context and sequence the chain samples on the backend
	// (Context.SetSampler); guarded by attachMu.
	attached    *Context
	attachedSeq int
	// wasAttached: the chain went to the backend (Context.SetSampler).
	// llama.cpp prepares a chain for the graph once, and from then on its
	// own apply skips the samplers that ran there: it can no longer
	// sample on the CPU.
	wasAttached atomic.Bool
}

// NewSamplerChain builds samplers into a chain for a model.
//
// The last sampler of the chain must select the token: Greedy, Dist,
// Mirostat, MirostatV2, AdaptiveP, or a Custom sampler that is a
// SelectingSampler. The others (TopK, Temp, a grammar, ...) only narrow
// or reweigh the candidates, and a chain of them alone picks nothing
// (llama.cpp would abort the process at the first sample), so such a
// chain is an error matching ErrInvalid, unless opts.Filter asks for a
// chain that only filters (for Apply). It is the last sampler's choice
// that counts: a filter after a selecting sampler could reorder or cut the
// candidates under its choice.
func NewSamplerChain(m *Model, opts SamplerChainOptions, samplers ...Sampler) (*SamplerChain, error) {
	if m == nil {
		return nil, errorf(CodeInvalid, "sampler chain", "nil *Model")
	}
	done, err := m.use("sampler chain")
	if err != nil {
		return nil, err
	}
	defer done()
	for _, s := range samplers {
		if s == nil {
			return nil, errorf(CodeInvalid, "sampler chain", "nil sampler")
		}
	}
	selecting := len(samplers) > 0 && selects(samplers[len(samplers)-1])
	if !selecting && !opts.Filter {
		return nil, errorf(CodeInvalid, "sampler chain",
			"the chain %v selects no token: end the chain with llama.Dist(seed) or llama.Greedy() (or set SamplerChainOptions.Filter for a chain used only with Apply)",
			samplerNames(samplers))
	}
	chain := capi.SamplerChainInit(capi.SamplerChainParams{NoPerf: !opts.Perf})
	if chain == 0 {
		return nil, errorf(CodeUnknown, "sampler chain", "llama.cpp could not make a chain")
	}
	c := &SamplerChain{model: m, ptr: chain, perf: opts.Perf, selects: selecting}
	for _, s := range samplers {
		p, err := s.build(m)
		if err != nil {
			capi.SamplerFree(chain)
			return nil, err
		}
		if p == 0 {
			capi.SamplerFree(chain)
			return nil, errorf(CodeInvalid, "sampler chain", "llama.cpp could not make the %s sampler", s)
		}
		capi.SamplerChainAdd(chain, p)
		c.names = append(c.names, s.String())
		switch s := s.(type) {
		case grammarSpec:
			c.hasGo = true
		case samplerFunc:
			c.hasGo = c.hasGo || strings.HasPrefix(s.String(), "custom:")
		case customSpec:
			c.hasGo = true
			if _, ok := s.s.(CloneableSampler); !ok && c.noClone == "" {
				c.noClone = s.s.Name()
			}
		}
	}
	if selecting {
		// A Go sampler that closes the chain must select: its callback
		// checks that it did (goEntry.final).
		if s := capi.SamplerChainGet(chain, int32(len(samplers)-1)); s != nil && isGoSampler(s) {
			if e := goSampler(s); e != nil {
				e.final = true
			}
		}
	}
	c.seed = capi.SamplerGetSeed(chain)
	if !opts.Perf {
		if c.fast = planFastTopK(m, samplers); c.fast != nil {
			c.fast.bind(chain)
		}
	}
	if !m.addChild(c) {
		capi.SamplerFree(chain)
		return nil, closedErr("sampler chain", "model")
	}
	return c, nil
}

// selectingSamplers are llama.cpp's samplers that set the selected
// candidate: the others only narrow or reweigh the candidates.
var selectingSamplers = map[string]bool{
	"greedy": true, "dist": true, "mirostat": true, "mirostat-v2": true, "adaptive-p": true,
}

// selects reports whether s selects the token.
func selects(s Sampler) bool {
	switch s := s.(type) {
	case samplerFunc:
		return selectingSamplers[s.name]
	case customSpec:
		sel, ok := s.s.(SelectingSampler)
		return ok && callSelects(sel)
	}
	return false
}

// callSelects calls s.Selects; a panic there counts as false.
func callSelects(s SelectingSampler) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return s.Selects()
}

func samplerNames(ss []Sampler) []string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	return names
}

// Selects reports whether the chain ends with a sampler that selects the
// token, so that it can Sample (false for nil and for the chains that
// SamplerChainOptions.Filter allows).
func (c *SamplerChain) Selects() bool { return c != nil && c.selects }

func errNoSelect(op string, c *SamplerChain) error {
	return errorf(CodeInvalid, op, "the chain %v selects no token (SamplerChainOptions.Filter): end the chain with llama.Dist(seed) or llama.Greedy() to sample with it", c.names)
}

func (c *SamplerChain) closeFromParent() { c.close() }

func (c *SamplerChain) close() {
	c.detach()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != 0 {
		capi.SamplerFree(c.ptr)
		c.ptr = 0
	}
}

// Close frees the chain. Closing a nil *SamplerChain returns an error
// matching ErrInvalid.
func (c *SamplerChain) Close() error {
	if c == nil {
		return errorf(CodeInvalid, "close", "nil *SamplerChain")
	}
	c.close()
	c.model.removeChild(c)
	return nil
}

func (c *SamplerChain) lock(op string) error {
	if c == nil {
		return errorf(CodeInvalid, op, "nil *SamplerChain")
	}
	c.mu.Lock()
	if c.ptr == 0 {
		c.mu.Unlock()
		return closedErr(op, "sampler chain")
	}
	return nil
}

// String lists the chain's samplers.
func (c *SamplerChain) String() string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprint(c.names)
}

// Seed returns the seed the chain's random samplers use (0 for nil). The
// same seed repeats the draws, and the text only for the same decodes: see
// Dist.
func (c *SamplerChain) Seed() uint32 {
	if c == nil {
		return 0
	}
	return c.seed
}

// Sample picks a token from the logits of batch entry idx of ctx's last
// Decode (-1: the last entry) and accepts it into the chain's state.
func (c *SamplerChain) Sample(ctx *Context, idx int) (Token, error) {
	if err := ctx.acquire("sample"); err != nil {
		return NoToken, err
	}
	defer ctx.release()
	return c.sample(ctx, idx)
}

// sample is Sample for a caller that holds ctx (acquire).
func (c *SamplerChain) sample(ctx *Context, idx int) (Token, error) {
	return c.lockAndSample(ctx, "sample", idx, true)
}

// lockAndSample takes ctx.mu and c.mu for op and samples (with or without
// the accept) for a caller that holds ctx (acquire).
func (c *SamplerChain) lockAndSample(ctx *Context, op string, idx int, accept bool) (Token, error) {
	if err := ctx.lockMu(op); err != nil {
		return NoToken, err
	}
	defer ctx.mu.Unlock()
	if err := c.lock(op); err != nil {
		return NoToken, err
	}
	defer c.mu.Unlock()
	return c.sampleLocked(ctx, idx, accept)
}

// Propose is Sample without the accept: it picks a token from the logits
// of batch entry idx (-1: the last entry) as Sample would, the chain's
// random state advancing as in Sample, but the chain does not take the
// token into its history. The caller checks the token and then Accepts it,
// or samples again: a grammar's rejection sampling, as llama.cpp's common
// sampler does it (sample without the grammar, keep the token if the
// grammar allows it, else sample again from what the grammar allows),
// costs one Propose for most tokens instead of a pass of the grammar over
// the whole vocabulary. A chain that begins with a top-k takes Sample's
// fast path; another copies the row into candidates it keeps for the next
// call. An entry sampled on the backend (Context.SetSampler) has no
// proposal: ErrInvalid.
func (c *SamplerChain) Propose(ctx *Context, idx int) (Token, error) {
	if err := ctx.acquire("propose"); err != nil {
		return NoToken, err
	}
	defer ctx.release()
	return c.lockAndSample(ctx, "propose", idx, false)
}

// sampleLocked is sample (or, without accept, Propose) for a caller that
// holds ctx.mu and c.mu.
func (c *SamplerChain) sampleLocked(ctx *Context, idx int, accept bool) (Token, error) {
	if ctx.model != c.model {
		return NoToken, errorf(CodeInvalid, "sample", "chain and context belong to different models")
	}
	if !c.selects {
		op := "sample"
		if !accept {
			op = "propose"
		}
		return NoToken, errNoSelect(op, c)
	}
	if idx == -1 {
		idx = ctx.nOut - 1
	}
	if err := ctx.checkOutput("sample", idx); err != nil {
		return NoToken, err
	}
	bt, onBackend, err := ctx.backendToken(c, idx)
	if err != nil {
		return NoToken, err
	}
	var t int32
	switch {
	case onBackend && !accept:
		return NoToken, errorf(CodeInvalid, "propose", "batch index %d was sampled on the backend (SetSampler)", idx)
	case onBackend:
		// Sampled in the decode: accepted here, as the CPU paths do.
		t = int32(bt)
		if t < c.model.nVocb {
			capi.SamplerAccept(c.ptr, bt)
		}
	case c.wasAttached.Load():
		return NoToken, errBackendOnly("sample")
	case c.fast != nil:
		p := capi.GetLogitsIth(ctx.ptr, int32(idx))
		if p == nil {
			return NoToken, errorf(CodeInvalid, "sample", "no logits for batch index %d", idx)
		}
		tok, ok := c.fast.sample(c.ptr, unsafe.Slice((*float32)(p), c.model.nVocb), accept)
		if !ok {
			if err := c.goPanic("sample"); err != nil {
				return NoToken, err
			}
			return NoToken, errorf(CodeInvalid, "sample", "no sampler of the chain selected a token")
		}
		t = int32(tok)
	case !accept:
		p := capi.GetLogitsIth(ctx.ptr, int32(idx))
		if p == nil {
			return NoToken, errorf(CodeInvalid, "propose", "no logits for batch index %d", idx)
		}
		t = int32(c.applyRow(unsafe.Slice((*float32)(p), c.model.nVocb)))
	default:
		t = capi.SamplerSample(c.ptr, ctx.ptr, int32(idx))
	}
	if c.hasGo {
		if err := c.goFailure("sample"); err != nil {
			if e, ok := err.(*Error); !ok || e.Code != CodeGrammar {
				return NoToken, err // a panic, or a Go sampler's misuse
			}
			if t >= 0 && t < c.model.nVocb {
				return Token(t), err
			}
		}
	}
	if t < 0 || t >= c.model.nVocb {
		return NoToken, errorf(CodeInvalid, "sample", "no token could be sampled (did a grammar reject every token?)")
	}
	return Token(t), nil
}

// applyRow runs the chain over the whole row of logits, as
// llama_sampler_sample does but without its accept, and returns the
// selected token (NoToken: none). The candidates are kept for the next
// call.
func (c *SamplerChain) applyRow(logits []float32) Token {
	c.row = c.row[:0]
	for i, l := range logits {
		c.row = append(c.row, TokenData{ID: Token(i), Logit: l})
	}
	c.rowArr = capi.TokenDataArray{Data: unsafe.Pointer(&c.row[0]), Size: uintptr(len(c.row)), Selected: -1}
	capi.SamplerApply(c.ptr, &c.rowArr)
	runtime.KeepAlive(c.row)
	if c.rowArr.Selected < 0 || uintptr(c.rowArr.Selected) >= c.rowArr.Size {
		return NoToken
	}
	return unsafe.Slice((*TokenData)(c.rowArr.Data), c.rowArr.Size)[c.rowArr.Selected].ID
}

// errBackendOnly is the error of a chain that went to the backend used
// on the CPU.
func errBackendOnly(op string) error {
	return errorf(CodeInvalid, op, "the chain was attached to a sequence (Context.SetSampler): it samples only there, on the backend")
}

func errGrammarFailed(op string) error {
	return errorf(CodeGrammar, op, "a token the grammar does not allow was chosen; the grammar now allows only end of generation")
}

// goFailure returns the error the chain's Go samplers left in the last
// call into llama.cpp: the first panic one of them recovered (each is
// reported once), else a failed grammar's error for op, else nil.
func (c *SamplerChain) goFailure(op string) error {
	if goIface.Load() == nil {
		return nil
	}
	var perr *PanicError
	var misuse, failed error
	n := capi.SamplerChainN(c.ptr)
	for i := int32(0); i < n; i++ {
		s := capi.SamplerChainGet(c.ptr, i)
		if s == nil || !isGoSampler(s) {
			continue
		}
		e := goSampler(s)
		if e == nil {
			continue
		}
		if e.panicked != nil {
			if perr == nil {
				perr = e.panicked
			}
			e.panicked = nil
		}
		if e.misuse != "" {
			if misuse == nil {
				misuse = errorf(CodeInvalid, op, "custom sampler %s: %s", e.name, e.misuse)
			}
			e.misuse = ""
		}
		if g, ok := e.s.(*grammarSampler); ok && g.failed && failed == nil {
			failed = g.why
			if failed == nil {
				failed = errGrammarFailed(op)
			}
		}
	}
	switch {
	case perr != nil:
		return perr
	case misuse != nil:
		return misuse
	case failed != nil:
		return failed
	}
	return nil
}

// Accept tells the chain a token was chosen (for penalties, grammars,
// mirostat) without sampling; use it for prompt tokens.
func (c *SamplerChain) Accept(t Token) error {
	if err := c.lock("accept"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := c.model.CheckToken(t); err != nil {
		return err
	}
	capi.SamplerAccept(c.ptr, int32(t))
	if c.hasGo {
		return c.goFailure("accept")
	}
	return nil
}

// Reset clears the chain's state (penalty history, grammar, RNG state).
func (c *SamplerChain) Reset() error {
	if err := c.lock("reset"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	capi.SamplerReset(c.ptr)
	return c.goPanic("reset")
}

// goPanic returns the panic a Go sampler of the chain recovered in the
// last call into llama.cpp, or the candidates a Custom sampler left that
// llama.cpp could not take (see goFailure), or the error of a grammar
// failed for the work its engine would do (see Grammar.Sampler), or nil.
func (c *SamplerChain) goPanic(op string) error {
	if !c.hasGo {
		return nil
	}
	err := c.goFailure(op)
	if e, ok := err.(*Error); ok && e.Code == CodeGrammar && !e.work {
		return nil
	}
	return err
}

// Clone returns an independent copy of the chain with its current state.
// A chain holding a Custom sampler that is not a CloneableSampler cannot be
// cloned (the copy would share its state): that is an error matching
// ErrUnsupported.
func (c *SamplerChain) Clone() (*SamplerChain, error) {
	if err := c.lock("clone"); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if c.noClone != "" {
		return nil, errorf(CodeUnsupported, "clone", "custom sampler %q is not a CloneableSampler", c.noClone)
	}
	if c.wasAttached.Load() {
		return nil, errBackendOnly("clone")
	}
	p := capi.SamplerClone(c.ptr)
	if err := c.goPanic("clone"); err != nil {
		capi.SamplerFree(p) // the chain holds no sampler where Clone panicked
		return nil, err
	}
	if p == 0 {
		return nil, errorf(CodeUnsupported, "clone", "a sampler of the chain cannot be cloned")
	}
	n := &SamplerChain{model: c.model, ptr: p, names: append([]string(nil), c.names...), seed: c.seed, hasGo: c.hasGo, noClone: c.noClone,
		selects: c.selects, perf: c.perf, fast: c.fast.clone(p)}
	if !c.model.addChild(n) {
		capi.SamplerFree(p)
		return nil, closedErr("clone", "model")
	}
	return n, nil
}

// TokenData is a candidate token with its logit and probability.
type TokenData struct {
	ID    Token
	Logit float32
	P     float32
}

// Apply runs the chain over candidates (no accept) and returns the
// surviving candidates, in the chain's order, and the index of the
// selected one (-1 if no sampler selected). It does not touch a Context,
// and works on a chain that selects nothing (SamplerChainOptions.Filter).
// candidates is left as it was; ApplyInPlace works in its memory instead.
func (c *SamplerChain) Apply(candidates []TokenData) ([]TokenData, int, error) {
	return c.ApplyInPlace(append([]TokenData(nil), candidates...))
}

// ApplyInPlace is Apply working in candidates' memory: the chain edits,
// sorts and shrinks them there, and the survivors it returns are a prefix
// of candidates. It allocates nothing, which counts on a row of a large
// vocabulary (a 262,144-token row is 3 MB).
func (c *SamplerChain) ApplyInPlace(candidates []TokenData) ([]TokenData, int, error) {
	if err := c.lock("apply"); err != nil {
		return nil, -1, err
	}
	defer c.mu.Unlock()
	if len(candidates) == 0 {
		return nil, -1, errorf(CodeInvalid, "apply", "no candidates")
	}
	if c.wasAttached.Load() {
		return nil, -1, errBackendOnly("apply")
	}
	for _, td := range candidates {
		if err := c.model.CheckToken(td.ID); err != nil {
			return nil, -1, err
		}
	}
	arr := capi.TokenDataArray{Data: unsafe.Pointer(&candidates[0]), Size: uintptr(len(candidates)), Selected: -1}
	capi.SamplerApply(c.ptr, &arr)
	runtime.KeepAlive(candidates)
	if err := c.goPanic("apply"); err != nil {
		return nil, -1, err
	}
	n := min(int(arr.Size), len(candidates))
	if arr.Data != unsafe.Pointer(&candidates[0]) {
		// No sampler of llama.cpp's or this package's moves the array, but
		// a result elsewhere is still copied back rather than trusted.
		n = copy(candidates, unsafe.Slice((*TokenData)(arr.Data), n))
	}
	sel := int(arr.Selected)
	if sel >= n {
		sel = -1 // a filter after the selecting sampler cut the list
	}
	return candidates[:n], sel, nil
}

// Custom samplers.

// CustomSampler is a sampler written in Go. Apply edits the candidates in
// place: change logits or probabilities, shrink the list, sort it, or set
// the selected index. The methods run on the goroutine that samples.
//
// What Apply leaves is checked before llama.cpp sees it: a candidate whose
// ID is not a token of the model, or a SelectingSampler at the end of its
// chain that selected nothing, makes the chain's call (Sample, Apply, ...)
// fail with an error matching ErrInvalid rather than reach llama.cpp's
// assertions. A sampler that only filters is not the last of a chain
// (see NewSamplerChain).
type CustomSampler interface {
	// Name names the sampler.
	Name() string
	// Apply transforms the candidates.
	Apply(c *Candidates)
	// Accept is told each chosen token.
	Accept(t Token)
	// Reset clears the sampler's state.
	Reset()
}

// SelectingSampler is a CustomSampler that selects the token: when
// Selects reports true (it is asked once, when a chain is built), its
// Apply calls Candidates.Select every time, and the sampler may end a
// chain. A chain's last sampler must select.
type SelectingSampler interface {
	CustomSampler
	Selects() bool
}

// CloneableSampler is a CustomSampler that can copy itself (for Clone).
type CloneableSampler interface {
	CustomSampler
	Clone() CustomSampler
}

// Candidates is the list a CustomSampler works on; it is valid only during Apply.
type Candidates struct {
	arr *capi.TokenDataArray
}

// Data returns the candidates as a slice that edits them in place.
func (c *Candidates) Data() []TokenData {
	if c.arr.Size == 0 {
		return nil
	}
	return unsafe.Slice((*TokenData)(c.arr.Data), c.arr.Size)
}

// Truncate keeps the first n candidates, at least one: the list is never
// left empty (llama.cpp's samplers need a candidate), so n < 1 keeps the
// first. A selected index past the new end is cleared.
func (c *Candidates) Truncate(n int) {
	n = max(n, 1)
	if uintptr(n) < c.arr.Size {
		c.arr.Size = uintptr(n)
		if c.arr.Selected >= int64(n) {
			c.arr.Selected = -1
		}
	}
}

// Select marks candidate i as the chosen one.
func (c *Candidates) Select(i int) {
	if i >= 0 && uintptr(i) < c.arr.Size {
		c.arr.Selected = int64(i)
	}
}

// Selected returns the selected index, or -1.
func (c *Candidates) Selected() int { return int(c.arr.Selected) }

// Sorted reports whether the candidates are sorted by logit, descending.
func (c *Candidates) Sorted() bool { return c.arr.Sorted }

// SetSorted records whether the candidates are sorted by logit, descending.
func (c *Candidates) SetSorted(s bool) { c.arr.Sorted = s }

// Custom wraps a Go sampler for use in a chain.
func Custom(s CustomSampler) Sampler {
	if s == nil {
		return invalid("custom", "nil sampler")
	}
	return customSpec{s}
}

type customSpec struct{ s CustomSampler }

func (c customSpec) String() string { return "custom:" + c.s.Name() }
func (c customSpec) build(m *Model) (capi.Sampler, error) {
	return newGoSampler(c.s, m.nVocb), nil
}

var (
	goSamplers  sync.Map // uintptr id → *goEntry
	goSamplerID atomic.Uintptr
	goIfaceOnce sync.Once
	// goIface is the interface of every Go sampler, in C memory (C keeps
	// it), made once; read with Load, since chains are built on any
	// goroutine.
	goIface atomic.Pointer[capi.SamplerI]
	goNames sync.Map // id → *byte, the name as a C string in C memory
)

// goEntry is a Go sampler as llama.cpp holds it. Its methods run on the
// goroutine that called into llama.cpp, which holds the chain's lock; so
// does the check of panicked after the call (goFailure).
type goEntry struct {
	s    CustomSampler
	name string
	// panicked is the first panic of a method since the chain last
	// looked: the callback recovers it, so that it never unwinds through
	// llama.cpp's frames, and the chain's call returns it as its error.
	panicked *PanicError
	// nVocab > 0: a Custom sampler, whose candidates are checked after
	// Apply (token ids below nVocab); 0 for the package's own samplers.
	nVocab int32
	// final: the sampler ends its chain and must select (llama.cpp
	// asserts that the chain selected a candidate).
	final bool
	// misuse says what was wrong with the candidates the sampler left,
	// since the chain last looked (repaired so that llama.cpp goes on).
	misuse string
}

// check repairs what a Custom sampler's Apply left that llama.cpp would
// fail on, and records it: a candidate whose id is not a token (it gets
// token 0 at -Inf), and, for the chain's last sampler, no selection (the
// first candidate is selected). The chain's call then fails.
func (e *goEntry) check(arr *capi.TokenDataArray) {
	if arr.Size == 0 || arr.Data == nil {
		return // Truncate never empties the list
	}
	d := unsafe.Slice((*TokenData)(arr.Data), arr.Size)
	for i := range d {
		if id := d[i].ID; id < 0 || int32(id) >= e.nVocab {
			if e.misuse == "" {
				e.misuse = fmt.Sprintf("candidate %d has token id %d, outside the vocabulary of %d", i, id, e.nVocab)
			}
			d[i] = TokenData{ID: 0, Logit: float32(math.Inf(-1))}
		}
	}
	if arr.Selected >= int64(arr.Size) {
		arr.Selected = -1
	}
	if e.final && arr.Selected < 0 {
		if e.misuse == "" {
			e.misuse = "it ends the chain as a SelectingSampler but selected no candidate"
		}
		arr.Selected = 0
	}
}

// recover records a panic of the method op; it must be deferred by the
// callback itself.
func (e *goEntry) recover(op string) {
	if v := recover(); v != nil && e.panicked == nil {
		e.panicked = NewPanicError("custom sampler "+e.name+": "+op, v)
	}
}

// newGoSampler makes s a llama.cpp sampler; nVocab > 0 checks its
// candidates after Apply (goEntry.check).
func newGoSampler(s CustomSampler, nVocab int32) capi.Sampler {
	return newGoEntry(&goEntry{s: s, nVocab: nVocab})
}

// isGoSampler reports whether s is a Go sampler (newGoEntry's).
func isGoSampler(s *capi.SamplerStruct) bool {
	iface := goIface.Load()
	return iface != nil && s.Iface == uintptr(unsafe.Pointer(iface))
}

// newGoEntry makes e (its s, nVocab and final set) a llama.cpp sampler.
func newGoEntry(e *goEntry) capi.Sampler {
	goIfaceOnce.Do(func() {
		p := (*capi.SamplerI)(capi.Calloc(1, unsafe.Sizeof(capi.SamplerI{})))
		*p = capi.SamplerI{
			Name:   purego.NewCallback(goSamplerName),
			Accept: purego.NewCallback(goSamplerAccept),
			Apply:  purego.NewCallback(goSamplerApply),
			Reset:  purego.NewCallback(goSamplerReset),
			Clone:  purego.NewCallback(goSamplerClone),
			Free:   purego.NewCallback(goSamplerFree),
		}
		goIface.Store(p)
	})
	iface := goIface.Load()
	if iface == nil {
		return 0
	}
	id := goSamplerID.Add(1)
	name := e.s.Name()
	e.name = name
	goSamplers.Store(id, e)
	if name := capi.CString(name); name != nil {
		goNames.Store(id, name)
	}
	return capi.SamplerInit(unsafe.Pointer(iface), id)
}

func goSampler(sm *capi.SamplerStruct) *goEntry {
	v, ok := goSamplers.Load(sm.Ctx)
	if !ok {
		return nil
	}
	return v.(*goEntry)
}

func goSamplerName(sm *capi.SamplerStruct) *byte {
	if v, ok := goNames.Load(sm.Ctx); ok {
		return v.(*byte)
	}
	return nil
}

func goSamplerAccept(sm *capi.SamplerStruct, t int32) {
	if e := goSampler(sm); e != nil {
		defer e.recover("accept")
		e.s.Accept(Token(t))
	}
}

func goSamplerApply(sm *capi.SamplerStruct, arr *capi.TokenDataArray) {
	if e := goSampler(sm); e != nil {
		if e.nVocab > 0 {
			defer e.check(arr) // after the recover: a panic leaves candidates too
		}
		defer e.recover("apply")
		e.s.Apply(&Candidates{arr: arr})
	}
}

func goSamplerReset(sm *capi.SamplerStruct) {
	if e := goSampler(sm); e != nil {
		defer e.recover("reset")
		e.s.Reset()
	}
}

// goSamplerClone returns 0 when the sampler cannot be cloned or its Clone
// panicked; llama.cpp's chain then holds no sampler there, which Clone
// sees.
func goSamplerClone(sm *capi.SamplerStruct) (p uintptr) {
	e := goSampler(sm)
	if e == nil {
		return 0
	}
	cs, ok := e.s.(CloneableSampler)
	if !ok {
		return 0 // SamplerChain.Clone refuses such chains before C gets here
	}
	defer e.recover("clone")
	return uintptr(newGoEntry(&goEntry{s: cs.Clone(), nVocab: e.nVocab, final: e.final}))
}

// freeGo frees what a Go sampler holds in C; a panic there is dropped,
// since the chain is going away and nothing is left to tell.
func freeGo(f interface{ free() }) {
	defer func() { _ = recover() }()
	f.free()
}

func goSamplerFree(sm *capi.SamplerStruct) {
	if e := goSampler(sm); e != nil {
		if f, ok := e.s.(interface{ free() }); ok {
			freeGo(f)
		}
	}
	goSamplers.Delete(sm.Ctx)
	if v, ok := goNames.LoadAndDelete(sm.Ctx); ok {
		capi.CFree(unsafe.Pointer(v.(*byte)))
	}
}
