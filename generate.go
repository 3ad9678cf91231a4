package llama

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/x/llama/internal/bridge"
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
	// Speculative, when set, drafts tokens and checks each draft in one
	// batched decode (see Drafter), drafting less from drafters whose drafts
	// do not pay (see DraftAdapt). The pieces are the same as without it.
	Speculative *Speculative
}

// Piece is one step of a generation: the token sampled and the text it
// completes. Text is always valid UTF-8 and holds only complete
// characters, so a character split over several tokens arrives with the
// last of them (and Text may be empty for the others). Bytes that cannot
// form UTF-8 (a model's pieces may hold any bytes) are replaced by U+FFFD,
// one per invalid run, as strings.ToValidUTF8 does.
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

// String names the reason: "none", "eog", "max-tokens", "stop-string" or
// "context-full".
func (r StopReason) String() string {
	switch r {
	case StopNone:
		return "none"
	case StopEOG:
		return "eog"
	case StopMaxTokens:
		return "max-tokens"
	case StopString:
		return "stop-string"
	case StopContext:
		return "context-full"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// GenerationStats counts the tokens of a generation and times its work,
// as llama.cpp's timings do: the time spent in the loop body (the
// caller's code between two pieces) is not counted.
type GenerationStats struct {
	// PromptTokens is how many prompt tokens were decoded (after what
	// GenerateOptions.Keep kept in memory).
	PromptTokens int
	// Generated is how many tokens were sampled (an end-of-generation
	// token that stopped the generation included), as Generation.Generated.
	Generated int
	// PromptTime is the time decoding the prompt took.
	PromptTime time.Duration
	// GenerateTime is the time sampling and decoding the generated tokens
	// took (drafting and checking drafts included).
	GenerateTime time.Duration
}

// PromptPerSecond is the prompt's decoding speed in tokens a second (0
// when nothing was timed).
func (s GenerationStats) PromptPerSecond() float64 { return perSecond(s.PromptTokens, s.PromptTime) }

// GeneratedPerSecond is the generation's speed in tokens a second (0 when
// nothing was timed).
func (s GenerationStats) GeneratedPerSecond() float64 { return perSecond(s.Generated, s.GenerateTime) }

func perSecond(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generation is one generation (Generate, GenerateTokens): range over Seq
// to run it, then read how it went.
type Generation struct {
	generationLink // package mtmd may set where the prompt starts (bridge.go)
	c              *Context
	ctx            context.Context
	prompt         []Token
	text           *string // Generate's prompt, tokenized when the generation runs
	stats          GenerationStats
	inYield        time.Duration // time spent in the loop body
	opts           GenerateOptions
	reason         StopReason
	generated      int
	stopWord       string
	nPast          int
	spec           SpeculativeStats
}

// Reason returns why generation stopped (after the iteration ended).
func (g *Generation) Reason() StopReason { return g.reason }

// Generated returns how many tokens were generated.
func (g *Generation) Generated() int { return g.generated }

// Stats returns the generation's token counts and timings (after the
// iteration ended; so far, during it).
func (g *Generation) Stats() GenerationStats {
	s := g.stats
	s.Generated = g.generated
	return s
}

// StopWord returns the stop string that ended generation, if any.
func (g *Generation) StopWord() string { return g.stopWord }

// Position returns the next free position of the sequence.
func (g *Generation) Position() int { return g.nPast }

// Speculative returns the counts of drafts (with GenerateOptions.Speculative).
func (g *Generation) Speculative() SpeculativeStats { return g.spec }

// Generate prepares the generation of prompt, tokenized with the model's
// special tokens (special token text parsed), when its Seq is ranged
// over; see GenerateTokens, whose Generation it returns. After the loop,
// the Generation's Reason, Generated and Stats (token counts, speed) say
// how it went:
//
//	gen := lctx.Generate(ctx, "Once upon a time", llama.GenerateOptions{MaxTokens: 64})
//	for piece, err := range gen.Seq() { ... }
//	st := gen.Stats() // st.PromptTokens, st.Generated, st.GeneratedPerSecond()
//
// The prompt is tokenized when the generation runs; its errors come from
// Seq, as the generation's do.
//
// A Context runs one generation at a time: from the first iteration to the
// last, any other call on the Context but Close (another generation, a
// Decode, from this goroutine or another) fails with an error matching
// ErrBusy. Close (or the Model's Close), from the loop body or another
// goroutine, ends the generation with an error matching ErrClosed. The
// loop body may call the Model's methods.
func (c *Context) Generate(ctx context.Context, prompt string, opts GenerateOptions) *Generation {
	return &Generation{c: c, ctx: ctx, text: &prompt, opts: opts}
}

// tokenizePrompt tokenizes a Generate prompt.
func (c *Context) tokenizePrompt(prompt string) ([]Token, error) {
	if prompt == "" {
		return nil, errorf(CodeInvalid, "generate", "empty prompt")
	}
	toks, err := c.model.Tokenize(prompt, TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err == nil && len(toks) == 0 {
		err = errorf(CodeInvalid, "generate", "empty prompt")
	}
	return toks, err
}

// GenerateTokens prepares a generation from prompt tokens, as Generate
// does from text. Ranging over its Seq decodes the prompt in batches, then
// samples, decodes and yields one Piece per generated token until an
// end-of-generation token, MaxTokens, a stop string, a full context or the
// end of ctx. An error is yielded once, last. Breaking out of the loop
// stops generation; the Context keeps the tokens decoded so far in memory.
func (c *Context) GenerateTokens(ctx context.Context, prompt []Token, opts GenerateOptions) *Generation {
	// A nil c is reported when the generation runs.
	return &Generation{c: c, ctx: ctx, prompt: prompt, opts: opts}
}

// Seq returns the iterator of pieces: ranging over it runs the
// generation. Range over it once.
func (g *Generation) Seq() iter.Seq2[Piece, error] {
	return func(yield func(Piece, error) bool) {
		if err := g.run(yield); err != nil {
			yield(Piece{}, err)
		}
	}
}

func (g *Generation) run(yield func(Piece, error) bool) error {
	if g == nil || g.c == nil {
		return errorf(CodeInvalid, "generate", "nil *Context")
	}
	c, opts, ctx := g.c, g.opts, g.ctx
	if ctx == nil {
		return errorf(CodeInvalid, "generate", "nil context.Context")
	}
	if g.text != nil {
		toks, err := c.tokenizePrompt(*g.text)
		if err != nil {
			return err
		}
		g.prompt, g.text = toks, nil
	}
	if err := c.acquire("generate"); err != nil {
		return err
	}
	defer c.release()
	// A closed Context is reported as this call's, not as the first
	// C call's it would reach.
	if err := c.lockMu("generate"); err != nil {
		return err
	}
	c.mu.Unlock()
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
		_, hi, err := c.posRange(seq)
		if err != nil {
			return err
		}
		g.nPast = hi + 1
		if from, ok := bridge.Start(&g.generationLink); ok {
			if from < g.nPast {
				return errorf(CodeInvalid, "generate", "start position %d is before the sequence's end %d", from, g.nPast)
			}
			g.nPast = from
		}
	} else {
		if _, err := c.removeTokens(seq, 0, -1); err != nil {
			return err
		}
	}
	if g.nPast+len(g.prompt) >= c.nCtxSeq {
		return errorf(CodeNoKVSlot, "generate", "prompt of %d tokens (after %d in memory) does not fit the context of %d",
			len(g.prompt), g.nPast, c.nCtxSeq)
	}
	batch := NewBatch(c.nBatch, 1)
	start := time.Now()
	for i := 0; i < len(g.prompt); i += c.nBatch {
		chunk := g.prompt[i:min(i+c.nBatch, len(g.prompt))]
		batch.Clear()
		last := i+len(chunk) == len(g.prompt)
		if err := batch.AddSequence(chunk, g.nPast, seq, last); err != nil {
			return err
		}
		if err := c.decode(ctx, batch); err != nil {
			return err
		}
		if opts.Speculative != nil {
			if err := c.watchDecode(ctx, opts.Speculative.Drafters, batch); err != nil {
				return err
			}
		}
		g.nPast += len(chunk)
		g.stats.PromptTokens += len(chunk)
	}
	g.stats.PromptTime = time.Since(start)

	var err error
	e := newEmitter(g, yield)
	start = time.Now()
	defer func() { g.stats.GenerateTime = time.Since(start) - g.inYield }()
	if opts.Speculative != nil {
		err = g.speculate(e, sampler, batch)
	} else {
		err = g.loop(e, sampler, batch)
	}
	if err != nil || e.quit || g.reason == StopString {
		return err
	}
	e.flush()
	return nil
}

// loop samples, yields and decodes one token at a time.
func (g *Generation) loop(e *emitter, sampler *SamplerChain, batch *Batch) error {
	c, opts := g.c, g.opts
	for {
		if opts.MaxTokens > 0 && g.generated >= opts.MaxTokens {
			g.reason = StopMaxTokens
			return nil
		}
		if g.nPast >= c.nCtxSeq {
			g.reason = StopContext
			return nil
		}
		tok, err := e.sample(sampler, batch.n-1)
		if err != nil {
			return err
		}
		if !e.emit(tok) {
			return nil
		}
		batch.Clear()
		_ = batch.Add(tok, g.nPast, opts.Seq, true)
		if err := c.decode(g.ctx, batch); err != nil {
			return err
		}
		g.nPast++
	}
}

// emitter turns sampled tokens into pieces: it ends generation at an
// end-of-generation token or a stop string, and yields only complete UTF-8
// characters that cannot begin a stop string.
type emitter struct {
	g       *Generation
	m       *Model
	yield   func(Piece, error) bool
	stops   []string
	maxStop int
	pending []byte // generated bytes not yet yielded (incomplete UTF-8 or possible stop prefix)
	buf     []byte // the piece of the token last sampled
	eog     bool   // the token last sampled ends generation
	quit    bool   // the consumer stopped the iteration
}

func newEmitter(g *Generation, yield func(Piece, error) bool) *emitter {
	timed := func(p Piece, err error) bool {
		t := time.Now()
		defer func() { g.inYield += time.Since(t) }()
		return yield(p, err)
	}
	e := &emitter{g: g, m: g.c.model, yield: timed, stops: g.opts.Stop, buf: make([]byte, 0, 64)}
	for _, s := range e.stops {
		e.maxStop = max(e.maxStop, len(s))
	}
	return e
}

// sample samples at batch index idx and renders the token's piece, under
// the context's lock (which also keeps the model alive: Model.Close closes
// its contexts first). No lock is held while the loop body runs.
func (e *emitter) sample(sampler *SamplerChain, idx int) (Token, error) {
	c, opts := e.g.c, e.g.opts
	tok, err := sampler.sample(c, idx)
	if err != nil {
		return NoToken, err
	}
	if err := c.lockMu("generate"); err != nil {
		return NoToken, err
	}
	defer c.mu.Unlock()
	e.eog = isEOG(e.m, tok)
	e.buf = e.buf[:0]
	if opts.IgnoreEOG || !e.eog {
		e.buf = e.m.appendPiece(e.buf, tok, opts.RenderSpecial)
	}
	return tok, nil
}

// emit counts the token last sampled and yields its text; it returns false
// when generation ends there (g.reason says why, or quit is set).
func (e *emitter) emit(tok Token) bool {
	g := e.g
	g.generated++
	if !g.opts.IgnoreEOG && e.eog {
		g.reason = StopEOG
		return false
	}
	e.pending = append(e.pending, e.buf...)
	// Stop strings: search the pending text (which holds any prefix of a
	// stop string left over from earlier pieces).
	if len(e.stops) > 0 {
		if i, w := findStop(e.pending, e.stops); i >= 0 {
			if i > 0 && !e.yield(Piece{Token: tok, Text: validText(e.pending[:i])}, nil) {
				e.quit = true
				return false
			}
			g.reason, g.stopWord = StopString, w
			return false
		}
	}
	n := validUTF8Prefix(e.pending)
	if len(e.stops) > 0 {
		n = min(n, safeStopPrefix(e.pending[:n], e.stops, e.maxStop))
	}
	out := ""
	if n > 0 {
		out = validText(e.pending[:n])
		e.pending = append(e.pending[:0], e.pending[n:]...)
	}
	if !e.yield(Piece{Token: tok, Text: out}, nil) {
		e.quit = true
		return false
	}
	return true
}

// flush yields what is pending at the end of generation.
func (e *emitter) flush() {
	if len(e.pending) > 0 {
		e.yield(Piece{Token: NoToken, Text: validText(e.pending)}, nil)
	}
}

// validText returns b as a string, each run of bytes that is not UTF-8
// replaced by U+FFFD.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
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
