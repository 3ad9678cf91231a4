package engine

import (
	"errors"
	"runtime"

	"github.com/x/llama"
	"github.com/x/llama/mtmd"
)

// Media are the media of a request's prompt (images, audio), tokenized
// with a projector: make them with NewMedia. The engine evaluates them
// with libmtmd when the request starts, then decodes the prompt's last
// text chunk as any prompt. A Media serves one request; the engine frees
// its chunks when the request starts or fails (or, for a request that
// never started, when the Media is garbage collected).
type Media struct {
	chunks  *mtmd.Chunks
	proj    *mtmd.Projector
	nPrefix int // positions of the chunks evaluated by libmtmd
}

// MediaPlaceholder fills a medium's positions in a request's Prompt: no
// vocabulary token, so that a later prompt's cached prefix stops there.
const MediaPlaceholder llama.Token = -1

// NewMedia takes ownership of chunks, tokenized by proj from a prompt with
// media, and returns the Prompt of the request (the text chunks' tokens
// and MediaPlaceholder for each position of a medium) and its Media. The
// prompt must end with a text chunk.
func NewMedia(proj *mtmd.Projector, chunks *mtmd.Chunks) ([]llama.Token, *Media, error) {
	n := chunks.Len()
	if n == 0 || chunks.Chunk(n-1).Type != mtmd.ChunkText || len(chunks.Chunk(n-1).Tokens) == 0 {
		chunks.Close()
		return nil, nil, &llama.Error{Code: llama.CodeInvalid, Op: "engine media", Msg: "the prompt must end with text after its last medium"}
	}
	var toks []llama.Token
	for _, c := range chunks.All()[:n-1] {
		if c.Type == mtmd.ChunkText {
			toks = append(toks, c.Tokens...)
			continue
		}
		for range c.NPos {
			toks = append(toks, MediaPlaceholder)
		}
	}
	m := &Media{chunks: chunks, proj: proj, nPrefix: len(toks)}
	runtime.AddCleanup(m, func(c *mtmd.Chunks) { c.Close() }, chunks)
	return append(toks, chunks.Chunk(n-1).Tokens...), m, nil
}

// startMedia evaluates a multimodal request's media (and the text around them)
// into its slot's empty sequence; the engine then decodes the last text
// chunk as any prompt. It reports false when the request failed.
func (e *Engine) startMedia(s *engSlot) bool {
	mp := s.tk.t.Media
	defer mp.chunks.Close()
	if mp.proj.Model() != e.model {
		e.fail(s, errors.New("engine: the prompt's media were tokenized for another model"))
		return false
	}
	_, err := mp.proj.Eval(s.tk.ctx, e.lctx, mp.chunks, mtmd.EvalOptions{Pos: 0, Seq: s.id, To: mp.chunks.Len() - 1})
	if err != nil {
		e.lctx.Memory().Remove(s.id, 0, -1)
		s.cache = s.cache[:0]
		e.fail(s, err)
		return false
	}
	s.cache = append(s.cache[:0], s.prompt[:mp.nPrefix]...)
	s.promptIdx = mp.nPrefix
	return true
}

// WithoutMedia returns toks without the media placeholders (toks itself
// when it has none), for showing a prompt as text.
func WithoutMedia(toks []llama.Token) []llama.Token {
	for i, t := range toks {
		if t == MediaPlaceholder {
			out := append([]llama.Token(nil), toks[:i]...)
			for _, t := range toks[i+1:] {
				if t != MediaPlaceholder {
					out = append(out, t)
				}
			}
			return out
		}
	}
	return toks
}
