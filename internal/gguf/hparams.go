package gguf

// Encoder is the shape of a transformer encoder as GGUF records it under
// a key prefix: the architecture's name ("bert"), or a projector's
// "clip.vision" or "clip.audio".
type Encoder struct {
	Embd    int     // <prefix>.embedding_length
	FF      int     // <prefix>.feed_forward_length
	Blocks  int     // <prefix>.block_count
	Proj    int     // <prefix>.projection_dim, when not 0 (a projector's output width)
	Heads   int     // <prefix>.attention.head_count
	NormEps float32 // <prefix>.attention.layer_norm_epsilon
}

// SetEncoder sets the keys of e under prefix, in the order above (the
// order is part of the file's bytes, which converted models pin).
func (w *Writer) SetEncoder(prefix string, e Encoder) {
	w.SetKV(prefix+".embedding_length", uint32(e.Embd))
	w.SetKV(prefix+".feed_forward_length", uint32(e.FF))
	w.SetKV(prefix+".block_count", uint32(e.Blocks))
	if e.Proj != 0 {
		w.SetKV(prefix+".projection_dim", uint32(e.Proj))
	}
	w.SetKV(prefix+".attention.head_count", uint32(e.Heads))
	w.SetKV(prefix+".attention.layer_norm_epsilon", e.NormEps)
}
