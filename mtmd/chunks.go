package mtmd

import (
	"context"
	"iter"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/x/llama"
	"github.com/x/llama/internal/bridge"
	"github.com/x/llama/internal/mtmdcapi"
	"github.com/x/llama/internal/pretok"
)

// ChunkType says what a chunk holds.
type ChunkType int

// Chunk types.
const (
	ChunkText ChunkType = iota
	ChunkImage
	ChunkAudio
)

// String names the chunk type.
func (t ChunkType) String() string {
	switch t {
	case ChunkText:
		return "text"
	case ChunkImage:
		return "image"
	case ChunkAudio:
		return "audio"
	}
	return "unknown"
}

// Chunk describes one chunk of a tokenized prompt.
type Chunk struct {
	Type ChunkType
	// Tokens are a text chunk's tokens (nil for media).
	Tokens []llama.Token
	// NTokens is how many embeddings the chunk adds to the context.
	NTokens int
	// NPos is how many positions it takes (fewer than NTokens for models
	// with M-RoPE).
	NPos int
	// ID is a media chunk's id (its medium's).
	ID string
}

// TokenizeOptions configures Tokenize, with the meanings of
// llama.TokenizeOptions.
type TokenizeOptions struct {
	// AddSpecial adds the model's BOS (and EOS where it does) tokens.
	AddSpecial bool
	// ParseSpecial turns special-token text in the prompt into special tokens.
	ParseSpecial bool
}

// Chunks is a prompt split into text and media chunks, the media already
// preprocessed for the projector (not yet encoded: Eval encodes them). It
// owns C memory: Close frees it (idempotent). It is safe for concurrent
// use; Close waits for an Eval in progress.
type Chunks struct {
	mu     sync.RWMutex
	ptr    mtmdcapi.Chunks
	chunks []Chunk
	nPos   int
	nTok   int
}

// Tokenize splits prompt at the projector's markers and tokenizes it: the
// i-th marker is replaced by media[i]. The number of markers must equal
// len(media).
func (p *Projector) Tokenize(prompt string, media []*Media, opts TokenizeOptions) (*Chunks, error) {
	const op = "tokenize"
	if n := strings.Count(prompt, p.marker); n != len(media) {
		return nil, errorf(llama.CodeInvalid, op, "the prompt has %d media markers (%q) for %d media", n, p.marker, len(media))
	}
	for i, m := range media {
		if m == nil {
			return nil, errorf(llama.CodeInvalid, op, "media %d is nil", i)
		}
		if m.kind == KindImage && !p.vision || m.kind == KindAudio && !p.audio {
			return nil, errorf(llama.CodeUnsupported, op, "this projector does not encode %s (media %d)", m.kind, i)
		}
		m.mu.RLock()
		defer m.mu.RUnlock()
		if m.ptr == 0 {
			return nil, &llama.Error{Code: llama.CodeClosed, Op: op, Msg: "media is closed"}
		}
	}
	if err := p.lock(op); err != nil {
		return nil, err
	}
	defer p.mu.Unlock()
	// The prompt goes to libmtmd as parts, the text between markers and
	// the media, as mtmd_tokenize splits it: a BPE vocabulary's text is
	// cut further inside runs longer than pretok.MaxRun, which would
	// overflow its pre-tokenizer's stack (adjacent text parts make one
	// chunk, their tokens one after the other).
	var texts []string
	var kinds []int // per part: the index in texts, or -1-i for media[i]
	nm := 0
	for seg := range strings.SplitSeq(prompt, p.marker) {
		if seg != "" {
			pieces := []string{seg}
			if p.bpe && len(seg) > pretok.MaxRun {
				pieces = pretok.CutLongRuns(seg, pretok.MaxRun)
			}
			for _, piece := range pieces {
				kinds = append(kinds, len(texts))
				texts = append(texts, piece)
			}
		}
		if nm < len(media) {
			kinds = append(kinds, -1-nm)
			nm++
		}
	}
	// Until here a call takes little memory; the tokenizer takes 40 to
	// 70 bytes a byte of text, within the model's tokenizing budget.
	defer bridge.ModelOf(p.model).Tokenizing(len(prompt))()
	buf := []byte(strings.Join(texts, ""))
	in := make([]mtmdcapi.InputText, len(texts))
	parts := make([]mtmdcapi.InputPart, len(kinds))
	ptrs := make([]uintptr, len(kinds)+1)
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(buf) > 0 {
		pin.Pin(&buf[0])
	}
	if len(in) > 0 {
		pin.Pin(&in[0])
	}
	if len(parts) > 0 {
		pin.Pin(&parts[0])
	}
	off := 0
	for i, t := range texts {
		in[i] = mtmdcapi.InputText{TextLen: uintptr(len(t)), ParseSpecial: opts.ParseSpecial}
		if len(t) > 0 {
			in[i].Text = uintptr(unsafe.Pointer(&buf[off]))
		}
		off += len(t)
	}
	for i, k := range kinds {
		if k >= 0 {
			parts[i].Text = uintptr(unsafe.Pointer(&in[k]))
		} else {
			parts[i].Bitmap = media[-1-k].ptr
		}
		ptrs[i] = uintptr(unsafe.Pointer(&parts[i]))
	}
	out := mtmdcapi.ChunksInit()
	rc := mtmdcapi.TokenizeFromParts(p.ptr, out, &ptrs[0], uintptr(len(kinds)), opts.AddSpecial)
	runtime.KeepAlive(buf)
	runtime.KeepAlive(in)
	runtime.KeepAlive(parts)
	runtime.KeepAlive(ptrs)
	switch rc {
	case 0:
	case 1:
		mtmdcapi.ChunksFree(out)
		return nil, errorf(llama.CodeInvalid, op, "the number of media markers does not match the number of media")
	case 2:
		mtmdcapi.ChunksFree(out)
		return nil, errorf(llama.CodeInvalid, op, "libmtmd could not preprocess the media")
	default:
		mtmdcapi.ChunksFree(out)
		return nil, errorf(llama.CodeUnknown, op, "libmtmd failed with code %d", rc)
	}
	c := &Chunks{ptr: out}
	n := int(mtmdcapi.ChunksSize(out))
	for i := range n {
		ch := mtmdcapi.ChunksGet(out, uintptr(i))
		info := Chunk{Type: ChunkType(mtmdcapi.ChunkGetType(ch)), NTokens: int(mtmdcapi.ChunkGetNTokens(ch)),
			NPos: int(mtmdcapi.ChunkGetNPos(ch))}
		if info.Type == ChunkText {
			var nt uintptr
			tp := mtmdcapi.ChunkGetTokensText(ch, &nt)
			if nt > 0 && tp != nil {
				src := unsafe.Slice(tp, nt)
				info.Tokens = make([]llama.Token, nt)
				for k, t := range src {
					info.Tokens[k] = llama.Token(t)
				}
			}
		} else {
			info.ID = mtmdcapi.ChunkGetID(ch)
		}
		c.nPos += info.NPos
		c.nTok += info.NTokens
		c.chunks = append(c.chunks, info)
	}
	return c, nil
}

// Len returns the number of chunks.
func (c *Chunks) Len() int { return len(c.chunks) }

// Chunk returns chunk i (0 <= i < Len).
func (c *Chunks) Chunk(i int) Chunk { return c.chunks[i] }

// All returns every chunk.
func (c *Chunks) All() []Chunk { return append([]Chunk(nil), c.chunks...) }

// Tokens returns how many embeddings the chunks add to a context.
func (c *Chunks) Tokens() int { return c.nTok }

// Positions returns how many positions the chunks take.
func (c *Chunks) Positions() int { return c.nPos }

// Close frees the chunks. It is idempotent.
func (c *Chunks) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != 0 {
		mtmdcapi.ChunksFree(c.ptr)
		c.ptr = 0
	}
	return nil
}

// EvalOptions configures Eval.
type EvalOptions struct {
	// Pos is the position of the first chunk in the sequence (normally the
	// sequence's next free position).
	Pos int
	// Seq is the sequence to decode into.
	Seq int
	// Batch is the most tokens one decode takes; 0 means the context's
	// BatchSize.
	Batch int
	// LogitsLast asks for the logits of the last token (when the last chunk
	// is text), to sample from next.
	LogitsLast bool
	// From and To select chunks [From, To); To 0 means to the end.
	From, To int
}

// Eval encodes the media chunks with the projector and decodes every
// chunk into lctx's sequence opts.Seq from position opts.Pos, returning the
// next free position. A done ctx interrupts it between batches: the
// positions it added are removed again and the error matches
// llama.ErrCanceled (the encoding of one medium is not interruptible).
// lctx must be a context of the projector's model.
func (p *Projector) Eval(ctx context.Context, lctx *llama.Context, chunks *Chunks, opts EvalOptions) (int, error) {
	const op = "eval chunks"
	if lctx == nil || chunks == nil {
		return 0, errorf(llama.CodeInvalid, op, "nil context or chunks")
	}
	if lctx.Model() != p.model {
		return 0, errorf(llama.CodeInvalid, op, "the context is not of the projector's model")
	}
	to := opts.To
	if to == 0 {
		to = len(chunks.chunks)
	}
	if opts.From < 0 || to > len(chunks.chunks) || opts.From > to {
		return 0, errorf(llama.CodeInvalid, op, "chunk range [%d, %d) out of [0, %d]", opts.From, to, len(chunks.chunks))
	}
	batch := opts.Batch
	if batch <= 0 || batch > lctx.BatchSize() {
		batch = lctx.BatchSize()
	}
	if opts.Pos < 0 {
		return 0, errorf(llama.CodeInvalid, op, "negative position %d", opts.Pos)
	}
	nPos := 0
	for _, ch := range chunks.chunks[opts.From:to] {
		nPos += ch.NPos
	}
	if opts.Pos+nPos > lctx.SeqSize() {
		return 0, errorf(llama.CodeNoKVSlot, op, "%d positions from %d do not fit the context of %d", nPos, opts.Pos, lctx.SeqSize())
	}
	chunks.mu.RLock()
	defer chunks.mu.RUnlock()
	if chunks.ptr == 0 {
		return 0, &llama.Error{Code: llama.CodeClosed, Op: op, Msg: "chunks are closed"}
	}
	if err := p.lock(op); err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	cops := bridge.ContextOf(lctx)
	if cops == nil {
		return 0, errorf(llama.CodeInvalid, op, "no context")
	}
	pos := int32(opts.Pos)
	for i := opts.From; i < to; i++ {
		ch := mtmdcapi.ChunksGet(chunks.ptr, uintptr(i))
		last := i == to-1
		from := int(pos)
		next := pos // libmtmd adds to it
		err := cops.Run(ctx, op, opts.Seq, from, func(lp uintptr) int32 {
			return mtmdcapi.HelperEvalChunkSingle(p.ptr, lp, ch, pos, int32(opts.Seq), int32(batch), last && opts.LogitsLast, &next)
		})
		if err != nil {
			if i > opts.From {
				_, _ = lctx.Memory().Remove(opts.Seq, opts.Pos, -1)
			}
			return opts.Pos, err
		}
		pos = next
	}
	return int(pos), nil
}

// Prepare tokenizes a prompt with media (adding the model's special tokens
// and parsing special-token text, as llama.Context.Generate does), decodes
// all but its last chunk into lctx with Eval, and returns the generation of
// the last chunk's text tokens with opts.Keep set: ranging over its Seq
// decodes them and generates. Without opts.Keep the sequence is cleared
// first. The prompt must end with text after its last marker.
func Prepare(ctx context.Context, lctx *llama.Context, p *Projector, prompt string, media []*Media,
	opts llama.GenerateOptions) (*llama.Generation, error) {
	const op = "generate"
	if p == nil || lctx == nil {
		return nil, errorf(llama.CodeInvalid, op, "nil projector or context")
	}
	if prompt == "" {
		return nil, errorf(llama.CodeInvalid, op, "empty prompt")
	}
	chunks, err := p.Tokenize(prompt, media, TokenizeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return nil, err
	}
	defer chunks.Close()
	n := chunks.Len()
	if n == 0 || chunks.chunks[n-1].Type != ChunkText || len(chunks.chunks[n-1].Tokens) == 0 {
		return nil, errorf(llama.CodeInvalid, op, "the prompt must end with text after its last media marker")
	}
	pos := 0
	if opts.Keep {
		_, hi, err := lctx.Memory().PosRange(opts.Seq)
		if err != nil {
			return nil, err
		}
		pos = hi + 1
	} else if _, err := lctx.Memory().Remove(opts.Seq, 0, -1); err != nil {
		return nil, err
	}
	if pos+chunks.Positions() >= lctx.SeqSize() {
		return nil, errorf(llama.CodeNoKVSlot, op, "prompt of %d positions (after %d in memory) does not fit the context of %d",
			chunks.Positions(), pos, lctx.SeqSize())
	}
	if n > 1 {
		// The text after the media starts where libmtmd says: for M-RoPE
		// models that is past the largest position in memory.
		if pos, err = p.Eval(ctx, lctx, chunks, EvalOptions{Pos: pos, Seq: opts.Seq, To: n - 1}); err != nil {
			return nil, err
		}
	}
	opts.Keep = true
	g := lctx.GenerateTokens(ctx, chunks.chunks[n-1].Tokens, opts)
	bridge.StartAt(g, pos)
	return g, nil
}

// Generate is Prepare followed by ranging over the generation: it yields
// the pieces generated after a prompt with media, and an error once, last.
func Generate(ctx context.Context, lctx *llama.Context, p *Projector, prompt string, media []*Media,
	opts llama.GenerateOptions) iter.Seq2[llama.Piece, error] {
	return func(yield func(llama.Piece, error) bool) {
		g, err := Prepare(ctx, lctx, p, prompt, media, opts)
		if err != nil {
			yield(llama.Piece{}, err)
			return
		}
		for piece, err := range g.Seq() {
			if !yield(piece, err) {
				return
			}
		}
	}
}
