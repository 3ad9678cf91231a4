package session

import (
	"context"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/sampling"
)

// genOptions are one step's settings.
type genOptions struct {
	params    sampling.Params
	maxTokens int
	stop      []string
	special   bool // render special tokens (a format's markers)
}

// runner runs a step on a llama.Context or an engine.
type runner interface {
	// nCtx is the context a conversation has.
	nCtx() int
	// generate runs prompt and yields the text generated; limited says
	// that it stopped at maxTokens or the end of the context.
	generate(ctx context.Context, prompt []llama.Token, o genOptions, yield func(string) bool) (limited bool, err error)
}

// ctxRunner runs steps in one sequence of a llama.Context. It keeps the
// last prompt in the sequence's memory, so that the next step decodes only
// what follows the prefix they share.
type ctxRunner struct {
	lctx   *llama.Context
	seq    int
	cached []llama.Token // the tokens at positions 0.. of seq, as the last step left them
}

// reuse returns how many leading tokens of prompt the sequence holds, and
// removes the rest of its memory; 0 when it holds nothing of use, or not
// what the last step left.
func (r *ctxRunner) reuse(prompt []llama.Token) int {
	n := 0
	for n < len(r.cached) && n < len(prompt)-1 && r.cached[n] == prompt[n] {
		n++
	}
	r.cached = nil
	if n == 0 {
		return 0
	}
	mem := r.lctx.Memory()
	if _, err := mem.Remove(r.seq, n, -1); err != nil {
		return 0
	}
	if _, hi, err := mem.PosRange(r.seq); err != nil || hi != n-1 {
		return 0
	}
	return n
}

func (r *ctxRunner) nCtx() int { return r.lctx.SeqSize() }

func (r *ctxRunner) generate(ctx context.Context, prompt []llama.Token, o genOptions, yield func(string) bool) (bool, error) {
	m := r.lctx.Model()
	env := sampling.Env{NCtx: r.nCtx()}
	if o.params.IgnoreEOS {
		for t := range m.VocabSize() {
			if m.IsEOG(llama.Token(t)) {
				env.EOG = append(env.EOG, llama.Token(t))
			}
		}
	}
	ss, _ := o.params.Chain(env)
	g, err := o.params.GrammarSampler(ctx)
	if err != nil {
		return false, err
	}
	if g != nil {
		ss = append([]llama.Sampler{g}, ss...)
	}
	chain, err := llama.NewSamplerChain(m, llama.SamplerChainOptions{}, ss...)
	if err != nil {
		return false, err
	}
	defer chain.Close()
	n := r.reuse(prompt)
	gen := r.lctx.GenerateTokens(ctx, prompt[n:], llama.GenerateOptions{MaxTokens: o.maxTokens, Stop: o.stop, Sampler: chain,
		Seq: r.seq, RenderSpecial: o.special, Keep: n > 0})
	for p, err := range gen.Seq() {
		if err != nil {
			return false, err
		}
		if !yield(p.Text) {
			r.cached = prompt
			return false, nil
		}
	}
	r.cached = prompt
	return gen.Reason() == llama.StopMaxTokens || gen.Reason() == llama.StopContext, nil
}

// engRunner runs steps as engine requests.
type engRunner struct{ eng *engine.Engine }

func (r *engRunner) nCtx() int { return r.eng.SlotContext() }

func (r *engRunner) generate(ctx context.Context, prompt []llama.Token, o genOptions, yield func(string) bool) (bool, error) {
	req := engine.NewRequest(prompt)
	req.Params, req.NPredict, req.Stop = o.params, o.maxTokens, o.stop
	for ev, err := range r.eng.Generate(ctx, req) {
		if err != nil {
			return false, err
		}
		if ev.Text != "" && !yield(ev.Text) {
			return false, nil
		}
		if ev.Done {
			return ev.Stop == engine.StopTypeLimit, nil
		}
	}
	return false, nil
}
