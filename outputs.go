package llama

import (
	"math"
	"unsafe"

	"github.com/x/llama/internal/capi"
)

func (c *Context) checkOutput(op string, i int) error {
	if i < 0 || i >= c.nOut || c.outputs[i] == 0 {
		return errorf(CodeInvalid, op, "batch index %d had no output in the last decode", i)
	}
	return nil
}

// Logits returns the logits of batch entry i of the last Decode (an entry
// added with output set). The slice views llama.cpp's memory: it is valid
// until the next Decode or Close; copy it to keep it.
func (c *Context) Logits(i int) ([]float32, error) {
	if err := c.lock("logits"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if err := c.checkOutput("logits", i); err != nil {
		return nil, err
	}
	if c.outputs[i] == outputBackend {
		return nil, errorf(CodeInvalid, "logits", "batch index %d was sampled on the backend (SetSampler): llama.cpp made no logits for it", i)
	}
	p := capi.GetLogitsIth(c.ptr, int32(i))
	if p == nil {
		return nil, errorf(CodeInvalid, "logits", "no logits for batch index %d", i)
	}
	return unsafe.Slice((*float32)(p), c.model.nVocb), nil
}

// Embeddings returns the embedding of batch entry i of the last Decode or
// Encode (needs Embeddings in the options). The slice views llama.cpp's
// memory, valid until the next call; copy it to keep it.
func (c *Context) Embeddings(i int) ([]float32, error) {
	if err := c.lock("embeddings"); err != nil {
		return nil, err
	}
	defer c.unlock()
	if !c.embeddings {
		return nil, errorf(CodeUnsupported, "embeddings", "context made without Embeddings")
	}
	if err := c.checkOutput("embeddings", i); err != nil {
		return nil, err
	}
	p := capi.GetEmbeddingsIth(c.ptr, int32(i))
	if p == nil {
		return nil, errorf(CodeInvalid, "embeddings", "no embeddings for batch index %d", i)
	}
	return unsafe.Slice((*float32)(p), capi.ModelNEmbdOut(c.model.ptr)), nil
}

// SeqEmbeddings returns the pooled embedding of a sequence after the last
// Decode or Encode (needs Embeddings and a pooling type other than none).
// With PoolingRank it holds the classifier's scores. The slice views
// llama.cpp's memory, valid until the next call.
func (c *Context) SeqEmbeddings(seq int) ([]float32, error) {
	if err := c.acquire("embeddings"); err != nil {
		return nil, err
	}
	defer c.release()
	return c.seqEmbeddings(seq)
}

func (c *Context) seqEmbeddings(seq int) ([]float32, error) {
	if err := c.lockMu("embeddings"); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if !c.embeddings {
		return nil, errorf(CodeUnsupported, "embeddings", "context made without Embeddings")
	}
	if c.pooling == PoolingNone || c.pooling == PoolingDefault {
		return nil, errorf(CodeUnsupported, "embeddings", "context has no pooling; use Embeddings(i)")
	}
	if seq < 0 || seq >= c.nSeqMax {
		return nil, errorf(CodeInvalid, "embeddings", "sequence %d out of range [0, %d)", seq, c.nSeqMax)
	}
	p := capi.GetEmbeddingsSeq(c.ptr, int32(seq))
	if p == nil {
		return nil, errorf(CodeInvalid, "embeddings", "no embeddings for sequence %d", seq)
	}
	n := int(capi.ModelNEmbdOut(c.model.ptr))
	if c.pooling == PoolingRank {
		n = max(int(capi.ModelNClsOut(c.model.ptr)), 1)
	}
	return unsafe.Slice((*float32)(p), n), nil
}

// Normalize scales v in place by its p-norm, as llama.cpp's embd_normalize:
// p = 2 Euclidean (the usual), 1 taxicab, 0 max-absolute scaled to int16
// range, negative: leave as is, > 2: p-norm. It returns v.
func Normalize(v []float32, p int) []float32 {
	var sum float64
	switch {
	case p < 0:
		return v
	case p == 0:
		for _, x := range v {
			sum = math.Max(sum, math.Abs(float64(x)))
		}
		sum /= 32760
	case p == 2:
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		sum = math.Sqrt(sum)
	default:
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), float64(p))
		}
		sum = math.Pow(sum, 1/float64(p))
	}
	if sum > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / sum)
		}
	}
	return v
}
