package llama

import (
	"context"
	"iter"
	"strings"
	"unicode/utf8"
)

// GenerateOptions configures Generate. The zero value generates greedily
// until an end-of-generation token or the context is full.
type GenerateOptions struct {
	// MaxTokens stops after this many generated tokens; 0 means no limit
	// but the context size.
	MaxTokens int
	// Stop strings end generation; the text of a stop string and after it
	// is not yielded.
	Stop []string
	// Sampler picks tokens; nil means greedy. The caller keeps ownership.
	Sampler *SamplerChain
	// Seq is the sequence to generate in (default 0).
	Seq int
	// Keep continues from what seq already holds in memory instead of
	// clearing it first; the prompt is then appended after it.
	Keep bool
	// IgnoreEOG keeps generating past end-of-generation tokens.
	IgnoreEOG bool
	// RenderSpecial renders special tokens' text in pieces.
	RenderSpecial bool
}

// Piece is one step of a generation: the token sampled and the text it
// completes. Text holds only complete UTF-8 characters, so a character
// split over several tokens arrives with the last of them (and Text may be
// empty for the others).
type Piece struct {
	Token Token
	Text  string
}

// StopReason says why Generate stopped.
type StopReason int

// Stop reasons.
const (
	StopNone      StopReason = iota // not stopped yet
	StopEOG                         // an end-of-generation token
	StopMaxTokens                   // MaxTokens reached
	StopString                      // a stop string
	StopContext                     // the context is full
)

// Generation is one Generate call; range over Seq to run it.
type Generation struct {
	c         *Context
	ctx       context.Context
	prompt    []Token
	opts      GenerateOptions
	reason    StopReason
	generated int
	stopWord  string
	nPast     int
	from      int // with Keep, the prompt's first position; -1: after the sequence's last
}

// Reason returns why generation stopped (after the iteration ended).
func (g *Generation) Reason() StopReason { return g.reason }

// Generated returns how many tokens were generated.
func (g *Generation) Generated() int { return g.generated }

// StopWord returns the stop string that ended generation, if any.
func (g *Generation) StopWord() string { return g.stopWord }

// Position returns the next free position of the sequence.
func (g *Generation) Position() int { return g.nPast }

// Generate tokenizes prompt (with the model's special tokens, parsing
// special token text) and generates from it; see GenerateTokens.
func (c *Context) Generate(ctx context.Context, prompt string, opts GenerateOptions) iter.Seq2[Piece, error] {
	if prompt == "" {
		return func(yield func(Piece, error) bool) { yield(Piece{}, errorf(CodeInvalid, "generate", "empty prompt")) }
	}
	toks, err := c.model.Tokenize(prompt, TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err == nil && len(toks) == 0 {
		err = errorf(CodeInvalid, "generate", "empty prompt")
	}
	if err != nil {
		return func(yield func(Piece, error) bool) { yield(Piece{}, err) }
	}
	return c.GenerateTokens(ctx, toks, opts).Seq()
}

// GenerateTokens prepares a generation from prompt tokens. Ranging over its
// Seq decodes the prompt in batches, then samples, decodes and yields one
// Piece per generated token until an end-of-generation token, MaxTokens, a
// stop string, a full context or the end of ctx. An error is yielded once,
// last. Breaking out of the loop stops generation; the Context keeps the
// tokens decoded so far in memory.
func (c *Context) GenerateTokens(ctx context.Context, prompt []Token, opts GenerateOptions) *Generation {
	return &Generation{c: c, ctx: ctx, prompt: prompt, opts: opts, from: -1}
}

// generateFrom is GenerateTokens with Keep whose prompt starts at position
// pos of the sequence rather than after its largest position: package mtmd
// needs it for M-RoPE models, whose media take more positions than the
// memory's largest position shows.
func (c *Context) generateFrom(ctx context.Context, prompt []Token, opts GenerateOptions, pos int) *Generation {
	opts.Keep = true
	return &Generation{c: c, ctx: ctx, prompt: prompt, opts: opts, from: pos}
}

// Seq returns the iterator of pieces.
func (g *Generation) Seq() iter.Seq2[Piece, error] {
	return func(yield func(Piece, error) bool) {
		if err := g.run(yield); err != nil {
			yield(Piece{}, err)
		}
	}
}

func (g *Generation) run(yield func(Piece, error) bool) error {
	c, opts, ctx := g.c, g.opts, g.ctx
	if len(g.prompt) == 0 {
		return errorf(CodeInvalid, "generate", "empty prompt")
	}
	if opts.MaxTokens < 0 {
		return errorf(CodeInvalid, "generate", "negative MaxTokens %d", opts.MaxTokens)
	}
	if err := c.seqOK("generate", opts.Seq, false); err != nil {
		return err
	}
	m := c.model
	for _, t := range g.prompt {
		if err := m.CheckToken(t); err != nil {
			return err
		}
	}
	sampler := opts.Sampler
	if sampler == nil {
		s, err := NewSamplerChain(m, SamplerChainOptions{}, Greedy())
		if err != nil {
			return err
		}
		defer s.Close()
		sampler = s
	}
	seq := opts.Seq
	if opts.Keep {
		_, hi, err := c.PosRange(seq)
		if err != nil {
			return err
		}
		g.nPast = hi + 1
		if g.from >= 0 {
			if g.from < g.nPast {
				return errorf(CodeInvalid, "generate", "start position %d is before the sequence's end %d", g.from, g.nPast)
			}
			g.nPast = g.from
		}
	} else {
		if _, err := c.RemoveTokens(seq, 0, -1); err != nil {
			return err
		}
	}
	if g.nPast+len(g.prompt) >= c.nCtxSeq {
		return errorf(CodeNoKVSlot, "generate", "prompt of %d tokens (after %d in memory) does not fit the context of %d",
			len(g.prompt), g.nPast, c.nCtxSeq)
	}
	batch := NewBatch(c.nBatch, 1)
	for i := 0; i < len(g.prompt); i += c.nBatch {
		chunk := g.prompt[i:min(i+c.nBatch, len(g.prompt))]
		batch.Clear()
		last := i+len(chunk) == len(g.prompt)
		if err := batch.AddSequence(chunk, g.nPast, seq, last); err != nil {
			return err
		}
		if err := c.Decode(ctx, batch); err != nil {
			return err
		}
		g.nPast += len(chunk)
	}

	stops := opts.Stop
	maxStop := 0
	for _, s := range stops {
		maxStop = max(maxStop, len(s))
	}
	var pending []byte // generated bytes not yet yielded (incomplete UTF-8 or possible stop prefix)
	done, err := m.use("generate")
	if err != nil {
		return err
	}
	defer done()
	pieceBuf := make([]byte, 0, 64)
	for {
		if opts.MaxTokens > 0 && g.generated >= opts.MaxTokens {
			g.reason = StopMaxTokens
			break
		}
		if g.nPast >= c.nCtxSeq {
			g.reason = StopContext
			break
		}
		tok, err := sampler.Sample(c, batch.n-1)
		if err != nil {
			return err
		}
		g.generated++
		if !opts.IgnoreEOG && isEOG(m, tok) {
			g.reason = StopEOG
			break
		}
		pieceBuf = m.appendPiece(pieceBuf[:0], tok, opts.RenderSpecial)
		pending = append(pending, pieceBuf...)
		// Stop strings: search the pending text (which holds any prefix of
		// a stop string left over from earlier pieces).
		if len(stops) > 0 {
			if i, w := findStop(pending, stops); i >= 0 {
				if i > 0 {
					if !yield(Piece{Token: tok, Text: string(pending[:i])}, nil) {
						return nil
					}
				}
				g.reason, g.stopWord = StopString, w
				return nil
			}
		}
		n := validUTF8Prefix(pending)
		if len(stops) > 0 {
			n = min(n, safeStopPrefix(pending[:n], stops, maxStop))
		}
		out := ""
		if n > 0 {
			out = string(pending[:n])
			pending = append(pending[:0], pending[n:]...)
		}
		batch.Clear()
		_ = batch.Add(tok, g.nPast, seq, true)
		if !yield(Piece{Token: tok, Text: out}, nil) {
			return nil
		}
		if err := c.Decode(ctx, batch); err != nil {
			return err
		}
		g.nPast++
	}
	if len(pending) > 0 {
		yield(Piece{Token: NoToken, Text: strings.ToValidUTF8(string(pending), "\uFFFD")}, nil)
	}
	return nil
}

// findStop returns the index of the first stop string in b and which it is.
func findStop(b []byte, stops []string) (int, string) {
	best, word := -1, ""
	s := string(b)
	for _, w := range stops {
		if w == "" {
			continue
		}
		if i := strings.Index(s, w); i >= 0 && (best < 0 || i < best) {
			best, word = i, w
		}
	}
	return best, word
}

// safeStopPrefix returns how many bytes of b can be released: those that
// cannot be the start of a stop string completed by later text.
func safeStopPrefix(b []byte, stops []string, maxStop int) int {
	n := len(b)
	for k := min(maxStop-1, len(b)); k > 0; k-- {
		tail := string(b[len(b)-k:])
		for _, w := range stops {
			if len(w) > k && strings.HasPrefix(w, tail) {
				n = len(b) - k
				for n > 0 && !utf8.RuneStart(b[n]) {
					n--
				}
				return n
			}
		}
	}
	return n
}
