package gguf

import "fmt"

// TinyProjectorOptions describes a small random-weight multimodal projector
// (an "mmproj" GGUF) that libmtmd loads: a CLIP-style vision transformer
// over square images followed by LLaVA's two-layer MLP projector
// (clip.projector_type "mlp"). Zero fields take the defaults noted on each.
type TinyProjectorOptions struct {
	// TextEmbd is the embedding size of the text model the projector feeds
	// (64 for stories260K). Required.
	TextEmbd int
	// ImageSize is the side of the square images the encoder sees (images
	// are resized to it). Default 32.
	ImageSize int
	// PatchSize is the side of a patch; (ImageSize/PatchSize)^2 is the
	// number of tokens of an image. Default 8.
	PatchSize int
	// NEmbd is the vision encoder's width. Default 32.
	NEmbd int
	// NHead is its number of attention heads. Default 4.
	NHead int
	// NFF is its feed-forward width; it must differ from NEmbd (libmtmd
	// takes equal sizes as a sign of swapped legacy tensors). Default 2*NEmbd.
	NFF int
	// NLayer is its number of blocks; LLaVA runs all but the last. Default 2.
	NLayer int
	// NHidden is the width of the projector's hidden layer. Default 2*TextEmbd.
	NHidden int
	// Seed seeds the random weights.
	Seed int64
	// Audio adds an audio encoder beside the vision one: a Whisper-style
	// encoder (two 1-D convolutions over the log-mel spectrogram, one
	// transformer block) with Qwen2-Audio's projector (clip projector type
	// "qwen2a": average pooling and one linear layer). libmtmd cuts audio
	// into 30 s chunks of 750 tokens each.
	Audio bool
	// AudioEmbd is the audio encoder's width. Default 16.
	AudioEmbd int
	// AudioMel is the number of mel bins. Default 80.
	AudioMel int
}

func (o *TinyProjectorOptions) defaults() error {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.ImageSize, 32)
	def(&o.PatchSize, 8)
	def(&o.NEmbd, 32)
	def(&o.NHead, 4)
	def(&o.NFF, 2*o.NEmbd)
	def(&o.NLayer, 2)
	def(&o.NHidden, 2*o.TextEmbd)
	def(&o.AudioEmbd, 16)
	def(&o.AudioMel, 80)
	switch {
	case o.TextEmbd <= 0:
		return fmt.Errorf("gguf: tiny projector: TextEmbd is required")
	case o.ImageSize < 0 || o.PatchSize <= 0 || o.NEmbd < 0 || o.NHead <= 0 || o.NFF < 0 || o.NLayer < 1 || o.NHidden < 0:
		return fmt.Errorf("gguf: tiny projector: invalid size in options")
	case o.ImageSize%o.PatchSize != 0:
		return fmt.Errorf("gguf: tiny projector: ImageSize %d is not a multiple of PatchSize %d", o.ImageSize, o.PatchSize)
	case o.NEmbd%o.NHead != 0:
		return fmt.Errorf("gguf: tiny projector: NEmbd %d is not a multiple of NHead %d", o.NEmbd, o.NHead)
	case o.NFF == o.NEmbd:
		return fmt.Errorf("gguf: tiny projector: NFF must differ from NEmbd")
	}
	return nil
}

// WriteTinyProjector writes a tiny random-weight LLaVA-style projector to
// path: the clip.* keys libmtmd's loader requires for projector type
// "mlp", and the tensors its LLaVA graph uses, all F32.
func WriteTinyProjector(path string, o TinyProjectorOptions) error {
	if err := o.defaults(); err != nil {
		return err
	}
	w := NewWriter()
	u32 := func(v int) uint32 { return uint32(v) }
	w.SetKV("general.architecture", "clip")
	w.SetKV("general.type", "mmproj")
	w.SetKV("general.name", "tiny-random-llava-projector")
	w.SetKV("general.file_type", uint32(0))
	if o.Audio {
		// Mixed modalities: one projector type per encoder.
		w.SetKV("clip.vision.projector_type", "mlp")
		w.SetKV("clip.audio.projector_type", "qwen2a")
		w.SetKV("clip.has_audio_encoder", true)
		a := o.AudioEmbd
		w.SetEncoder("clip.audio", Encoder{Embd: a, FF: 2 * a, Blocks: 1, Proj: o.TextEmbd, Heads: 2, NormEps: 1e-5})
		w.SetKV("clip.audio.num_mel_bins", u32(o.AudioMel))
	} else {
		w.SetKV("clip.projector_type", "mlp")
	}
	w.SetKV("clip.has_vision_encoder", true)
	w.SetKV("clip.use_gelu", true)
	w.SetKV("clip.vision.image_size", u32(o.ImageSize))
	w.SetKV("clip.vision.patch_size", u32(o.PatchSize))
	w.SetEncoder("clip.vision", Encoder{Embd: o.NEmbd, FF: o.NFF, Blocks: o.NLayer, Proj: o.TextEmbd, Heads: o.NHead, NormEps: 1e-5})
	w.SetKV("clip.vision.image_mean", []float32{0.5, 0.5, 0.5})
	w.SetKV("clip.vision.image_std", []float32{0.5, 0.5, 0.5})

	r := &randTensors{w: w, rng: newRand(o.Seed)}
	n := o.NEmbd
	nPatches := (o.ImageSize / o.PatchSize) * (o.ImageSize / o.PatchSize)
	r.add("v.patch_embd.weight", 0, 0.2, o.PatchSize, o.PatchSize, 3, n)
	r.add("v.patch_embd.bias", 0, 0.1, n)
	r.add("v.position_embd.weight", 0, 0.1, n, nPatches)
	r.add("v.pre_ln.weight", 1, 0.1, n)
	r.add("v.pre_ln.bias", 0, 0.1, n)
	for il := range o.NLayer {
		blk := func(s string) string { return fmt.Sprintf("v.blk.%d.%s", il, s) }
		for _, t := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			r.weight(blk(t+".weight"), n, n)
			r.add(blk(t+".bias"), 0, 0.05, n)
		}
		r.add(blk("ln1.weight"), 1, 0.1, n)
		r.add(blk("ln1.bias"), 0, 0.1, n)
		r.add(blk("ln2.weight"), 1, 0.1, n)
		r.add(blk("ln2.bias"), 0, 0.1, n)
		r.weight(blk("ffn_up.weight"), n, o.NFF)
		r.add(blk("ffn_up.bias"), 0, 0.05, o.NFF)
		r.weight(blk("ffn_down.weight"), o.NFF, n)
		r.add(blk("ffn_down.bias"), 0, 0.05, n)
	}
	// LLaVA's projector: mm.0 (vision width to hidden), GELU, mm.2 (hidden
	// to the text model's embedding size). Larger weights than a trained
	// model's so that images move a tiny text model's greedy output.
	r.add("mm.0.weight", 0, 1, n, o.NHidden)
	r.add("mm.0.bias", 0, 0.1, o.NHidden)
	r.add("mm.2.weight", 0, 1, o.NHidden, o.TextEmbd)
	r.add("mm.2.bias", 0, 0.1, o.TextEmbd)
	if o.Audio {
		a := o.AudioEmbd
		// 30 s of audio is 3000 mel frames, 1500 positions after the
		// stride-2 convolution.
		r.add("a.conv1d.1.weight", 0, 0.3, 3, o.AudioMel, a)
		r.add("a.conv1d.1.bias", 0, 0.1, 1, a)
		r.add("a.conv1d.2.weight", 0, 0.3, 3, a, a)
		r.add("a.conv1d.2.bias", 0, 0.1, 1, a)
		r.add("a.position_embd.weight", 0, 0.1, a, 1500)
		blk := func(s string) string { return "a.blk.0." + s }
		for _, t := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			r.weight(blk(t+".weight"), a, a)
			if t != "attn_k" { // Whisper's key projection has no bias
				r.add(blk(t+".bias"), 0, 0.05, a)
			}
		}
		r.add(blk("ln1.weight"), 1, 0.1, a)
		r.add(blk("ln1.bias"), 0, 0.1, a)
		r.add(blk("ln2.weight"), 1, 0.1, a)
		r.add(blk("ln2.bias"), 0, 0.1, a)
		r.weight(blk("ffn_up.weight"), a, 2*a)
		r.add(blk("ffn_up.bias"), 0, 0.05, 2*a)
		r.weight(blk("ffn_down.weight"), 2*a, a)
		r.add(blk("ffn_down.bias"), 0, 0.05, a)
		r.add("a.post_ln.weight", 1, 0.1, a)
		r.add("a.post_ln.bias", 0, 0.1, a)
		r.add("mm.a.fc.weight", 0, 1, a, o.TextEmbd)
		r.add("mm.a.fc.bias", 0, 0.1, o.TextEmbd)
	}
	if r.err != nil {
		return r.err
	}
	return w.WriteFile(path)
}
