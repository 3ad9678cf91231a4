package llama

import (
	"unsafe"

	"github.com/x/llama/internal/capi"
)

// Multi-token prediction (MTP): models such as GLM-4.5, Qwen3.5 and
// DeepSeek V3 carry blocks trained to predict the token after next from
// the trunk's last hidden state and the next token. A context made with
// ContextOptions.MTP on the same model runs those blocks; package draft's
// MTP drafts with it. The target context keeps the hidden rows
// (SetHidden), and each batch of the MTP context pairs a token with the
// hidden row of the position before it (Batch.SetHidden).

// SetHidden makes the following decodes keep the hidden rows an MTP head
// reads: of every entry of the batch with all set, else of the entries
// with an output only. Off (the default) keeps none. The target of an MTP
// drafter keeps all; an MTP context keeps its outputs', which feed its
// next draft step.
func (c *Context) SetHidden(on, all bool) error {
	if err := c.lock("set hidden"); err != nil {
		return err
	}
	defer c.unlock()
	if capi.SetEmbeddingsNextn == nil {
		return errorf(CodeUnsupported, "set hidden", "this llama.cpp library does not export the MTP calls")
	}
	if c.model.mtpLayers() == 0 {
		return errorf(CodeUnsupported, "set hidden", "the model has no MTP blocks")
	}
	capi.SetEmbeddingsNextn(c.ptr, on, !all)
	c.hidden, c.hiddenAll = on, all
	c.nOut = 0 // the last decode's rows are not of this kind
	return nil
}

// Hidden returns the hidden row of batch entry i of the last Decode, kept
// as SetHidden asked (with all, any entry; else one added with output).
// The slice views llama.cpp's memory: it is valid until the next Decode or
// Close; copy it to keep it.
func (c *Context) Hidden(i int) ([]float32, error) {
	if err := c.lock("hidden"); err != nil {
		return nil, err
	}
	defer c.unlock()
	return c.hiddenRow(i)
}

func (c *Context) hiddenRow(i int) ([]float32, error) {
	if !c.hidden {
		return nil, errorf(CodeInvalid, "hidden", "the context keeps no hidden rows (SetHidden)")
	}
	if i < 0 || i >= c.nOut || !c.hiddenAll && c.outputs[i] == 0 {
		return nil, errorf(CodeInvalid, "hidden", "batch index %d has no hidden row from the last decode", i)
	}
	p := capi.GetEmbeddingsNextnIth(c.ptr, int32(i))
	if p == nil {
		return nil, errorf(CodeInvalid, "hidden", "no hidden row for batch index %d", i)
	}
	return unsafe.Slice((*float32)(p), capi.ModelNEmbdOut(c.model.ptr)), nil
}

// HiddenSize is the width of the hidden rows (Hidden, Batch.SetHidden):
// the model's output embedding size.
func (c *Context) HiddenSize() int {
	return c.get(func() int { return int(capi.ModelNEmbdOut(c.model.ptr)) })
}
