package llama

import "context"

// EmbedOptions configures Embed. The zero value L2-normalizes.
type EmbedOptions struct {
	// Normalize is the norm each vector is scaled by; the zero value is
	// NormL2.
	Normalize Norm
}

// Norm names the normalization Embed applies to each vector. The zero
// value is NormL2. For a p-norm with p > 2, ask for NormNone and call
// Normalize with p.
type Norm int

const (
	NormL2     Norm = iota // Euclidean: unit length, llama.cpp's default
	NormNone               // the vectors as the model gives them
	NormMaxAbs             // the largest magnitude scaled to 32760 (int16 range)
	NormL1                 // taxicab
)

// EmbdNormalize returns n as llama.cpp's embd_normalize number, the p
// that Normalize takes: 2, -1, 0 or 1.
func (n Norm) EmbdNormalize() int {
	switch n {
	case NormNone:
		return -1
	case NormMaxAbs:
		return 0
	case NormL1:
		return 1
	default:
		return 2
	}
}

// Embed returns one pooled embedding per text. The context must have been
// made with Embeddings and a pooling type other than none (the model's own
// pooling counts). Texts are tokenized with the model's special tokens and
// decoded together, as many per batch as the context's sequences and
// physical batch size allow (one per decode unless the context has
// KVUnified, see below); the memory of the sequences used is cleared afterwards. With
// PoolingRank each vector holds the classifier's scores.
func (c *Context) Embed(ctx context.Context, texts []string, opts EmbedOptions) ([][]float32, error) {
	if err := c.acquire("embed"); err != nil {
		return nil, err
	}
	defer c.release()
	if !c.embeddings {
		return nil, errorf(CodeUnsupported, "embed", "context made without Embeddings")
	}
	if c.pooling == PoolingNone {
		return nil, errorf(CodeUnsupported, "embed", "context has no pooling; decode and read Embeddings(i) per token")
	}
	if opts.Normalize < NormL2 || opts.Normalize > NormL1 {
		return nil, errorf(CodeInvalid, "embed", "unknown normalization %d", opts.Normalize)
	}
	norm := opts.Normalize.EmbdNormalize()
	encoder := c.model.encoderOnly
	var err error
	// A pooled sequence must be computed in one physical batch: llama.cpp
	// pools per micro-batch. Without a unified KV buffer it also splits a
	// batch of several sequences into equal-length pieces, so then each
	// text gets a decode of its own.
	limit := c.nUBatch
	perBatch := c.nSeqMax
	if !c.kvUnified {
		perBatch = 1
	}
	toks := make([][]Token, len(texts))
	for i, t := range texts {
		if t == "" {
			return nil, errorf(CodeInvalid, "embed", "text %d is empty", i)
		}
		if toks[i], err = c.model.Tokenize(t, TokenizeOptions{AddSpecial: true, ParseSpecial: true}); err != nil {
			return nil, err
		}
		if len(toks[i]) > limit || len(toks[i]) >= c.nCtxSeq {
			return nil, errorf(CodeNoKVSlot, "embed", "text %d has %d tokens, more than a batch of %d or the context of %d", i, len(toks[i]), limit, c.nCtxSeq)
		}
	}
	out := make([][]float32, len(texts))
	b := NewBatch(limit, 1)
	defer c.removeTokens(-1, 0, -1) //nolint:errcheck // best effort
	for start := 0; start < len(texts); {
		b.Clear()
		end := start
		for end < len(texts) && end-start < perBatch && b.Len()+len(toks[end]) <= limit {
			if err := b.AddSequence(toks[end], 0, end-start, true); err != nil {
				return nil, err
			}
			end++
		}
		if encoder {
			err = c.encode(ctx, b)
		} else {
			if _, err = c.removeTokens(-1, 0, -1); err == nil {
				err = c.decode(ctx, b)
			}
		}
		if err != nil {
			return nil, err
		}
		for i := start; i < end; i++ {
			v, err := c.seqEmbeddings(i - start)
			if err != nil {
				return nil, err
			}
			out[i] = Normalize(append([]float32(nil), v...), norm)
		}
		start = end
	}
	return out, nil
}
