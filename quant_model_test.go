package llama_test

import (
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// TestQuantizedTinyModels: the random models internal/gguf writes in F16,
// Q8_0 and Q4_0 load in llama.cpp and compute what the F32 model with the
// same weights computes, within each type's precision.
func TestQuantizedTinyModels(t *testing.T) {
	vocab := filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")
	logits := map[gguf.TensorType][]float32{}
	for _, typ := range []gguf.TensorType{gguf.F32, gguf.F16, gguf.Q8_0, gguf.Q4_0} {
		path := filepath.Join(t.TempDir(), typ.String()+".gguf")
		require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{
			VocabFrom: vocab, NEmbd: 128, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 256, Seed: 7, Type: typ}))
		m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
		require.NoError(t, err)
		info, err := m.Info()
		require.NoError(t, err)
		assert.Contains(t, info.FileType, map[gguf.TensorType]string{gguf.F32: "all F32", gguf.F16: "F16", gguf.Q8_0: "Q8_0", gguf.Q4_0: "Q4_0"}[typ])
		c := newCtx(t, m, llama.ContextOptions{ContextSize: 128})
		toks, err := m.Tokenize("The quick brown fox", llama.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		b := llama.NewBatch(64, 1)
		require.NoError(t, b.AddSequence(toks, 0, 0, true))
		require.NoError(t, c.Decode(context.Background(), b))
		l, err := c.Logits(b.Len() - 1)
		require.NoError(t, err)
		logits[typ] = append([]float32(nil), l...)
		require.NoError(t, m.Close())
	}
	cos := func(a, b []float32) float64 {
		var ab, aa, bb float64
		for i := range a {
			ab += float64(a[i]) * float64(b[i])
			aa += float64(a[i]) * float64(a[i])
			bb += float64(b[i]) * float64(b[i])
		}
		return ab / math.Sqrt(aa*bb)
	}
	ref := logits[gguf.F32]
	assert.Greater(t, cos(ref, logits[gguf.F16]), 0.9999)
	assert.Greater(t, cos(ref, logits[gguf.Q8_0]), 0.999)
	assert.Greater(t, cos(ref, logits[gguf.Q4_0]), 0.95)
	assert.Less(t, cos(ref, logits[gguf.Q4_0]), 0.99999, "Q4_0 is lossy: the weights really were quantized")
}

// The CPU repacks Q4_0 weights for its kernels into a buffer of their own
// unless NoRepack, which keeps them in the mapped file's. Which buffer
// depends on the CPU: AMX where it has AMX tiles, else CPU_REPACK (AVX2).
func TestNoRepack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q4_0.gguf")
	require.NoError(t, gguf.WriteTinyModel(path, gguf.TinyModelOptions{
		VocabFrom: filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf"), NEmbd: 128, NFF: 256, Type: gguf.Q4_0}))
	for _, noRepack := range []bool{false, true} {
		var logs testenv.Buffer
		llama.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
		m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{NoRepack: noRepack})
		llama.SetLogger(nil)
		require.NoError(t, err)
		m.Close()
		assert.Contains(t, logs.String(), "CPU_Mapped model buffer size")
		extra := regexp.MustCompile(`(CPU_REPACK|AMX) model buffer size`)
		if noRepack {
			assert.NotRegexp(t, extra, logs.String())
		} else {
			assert.Regexp(t, extra, logs.String(), "this CPU repacks Q4_0 (AVX2 or AMX)")
		}
	}
}
