package llama

import (
	"context"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/testenv"
)

const benchTokens = 256

func benchSetup(b *testing.B) (*Model, *Context, []Token) {
	m, err := LoadModel(context.Background(), filepath.Join(testenv.ModelsDir(b), "stories260K.gguf"), ModelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	c, err := m.NewContext(ContextOptions{ContextSize: 512, Threads: 1, ThreadsBatch: 1})
	if err != nil {
		b.Fatal(err)
	}
	prompt, err := m.Tokenize("Once upon a time", TokenizeOptions{AddSpecial: true})
	if err != nil {
		b.Fatal(err)
	}
	return m, c, prompt
}

// BenchmarkGenerate measures Context.Generate (greedy, one thread) on
// stories260K, in generated tokens per second, with the prompt decode
// included. Compare it with BenchmarkBareLoop, which makes the same
// llama.cpp calls straight through the bindings with nothing around them.
func BenchmarkGenerate(b *testing.B) {
	_, c, prompt := benchSetup(b)
	ctx := context.Background()
	b.ResetTimer()
	n := 0
	for range b.N {
		for _, err := range c.GenerateTokens(ctx, prompt, GenerateOptions{MaxTokens: benchTokens, IgnoreEOG: true}).Seq() {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkBareLoop is the floor: the decode/sample/piece loop written
// directly against the purego bindings, same model, context and sampler.
func BenchmarkBareLoop(b *testing.B) {
	m, c, prompt := benchSetup(b)
	chain := capi.SamplerChainInit(capi.SamplerChainParams{NoPerf: true})
	capi.SamplerChainAdd(chain, capi.SamplerInitGreedy())
	defer capi.SamplerFree(chain)
	toks := make([]int32, len(prompt))
	pos := make([]int32, len(prompt))
	nseq := make([]int32, len(prompt))
	seqs := make([]int32, len(prompt))
	seqPtr := make([]uintptr, len(prompt))
	logits := make([]int8, len(prompt))
	for i := range prompt {
		seqPtr[i] = uintptr(unsafe.Pointer(&seqs[i]))
		nseq[i] = 1
	}
	batch := func(n int) capi.Batch {
		return capi.Batch{NTokens: int32(n), Token: uintptr(unsafe.Pointer(&toks[0])), Pos: uintptr(unsafe.Pointer(&pos[0])),
			NSeqID: uintptr(unsafe.Pointer(&nseq[0])), SeqID: uintptr(unsafe.Pointer(&seqPtr[0])), Logits: uintptr(unsafe.Pointer(&logits[0]))}
	}
	piece := make([]byte, 64)
	b.ResetTimer()
	n := 0
	for range b.N {
		capi.MemorySeqRm(c.mem, 0, 0, -1)
		capi.SamplerReset(chain)
		for i, t := range prompt {
			toks[i], pos[i], logits[i] = int32(t), int32(i), 0
		}
		logits[len(prompt)-1] = 1
		if capi.Decode(c.ptr, batch(len(prompt))) != 0 {
			b.Fatal("decode")
		}
		p := len(prompt)
		for range benchTokens {
			t := capi.SamplerSample(chain, c.ptr, -1)
			capi.VocabIsEOG(m.vocab, t)
			capi.TokenToPiece(m.vocab, t, unsafe.Pointer(&piece[0]), int32(len(piece)), 0, false)
			n++
			toks[0], pos[0], logits[0] = t, int32(p), 1
			if capi.Decode(c.ptr, batch(1)) != 0 {
				b.Fatal("decode")
			}
			p++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tok/s")
}
