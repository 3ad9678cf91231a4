package llama_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// kvLog collects the KV cache sizes llama.cpp logs as it creates a
// context ("llama_kv_cache: CPU KV buffer size = 1.25 MiB").
type kvLog struct {
	mu  sync.Mutex
	mib float64
	n   int
}

var kvLine = regexp.MustCompile(`KV buffer size = +([0-9.]+) MiB`)

func (k *kvLog) Enabled(context.Context, slog.Level) bool { return true }
func (k *kvLog) Handle(_ context.Context, r slog.Record) error {
	if m := kvLine.FindStringSubmatch(r.Message); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		k.mu.Lock()
		k.mib, k.n = k.mib+v, k.n+1
		k.mu.Unlock()
	}
	return nil
}
func (k *kvLog) WithAttrs([]slog.Attr) slog.Handler { return k }
func (k *kvLog) WithGroup(string) slog.Handler      { return k }

// checkKVEstimate creates contexts of m under each of opts and checks
// FitContext's estimate of their KV cache against the buffers llama.cpp
// logs, to their 0.01 MiB.
func checkKVEstimate(t *testing.T, m *llama.Model, cases []llama.ContextOptions) {
	t.Helper()
	for _, opts := range cases {
		opts.Fit.Off = true // the training context: the size the estimate is for
		f, err := m.FitContext(opts)
		require.NoError(t, err)
		k := &kvLog{}
		llama.SetLogger(slog.New(k))
		c, err := m.NewContext(opts)
		llama.SetLogger(nil)
		require.NoError(t, err)
		assert.Equal(t, f.ContextSize, c.Size())
		c.Close()
		if f.KVBytes == 0 {
			assert.Zero(t, k.n, "llama.cpp logged a KV buffer where none was estimated")
			continue
		}
		require.Positive(t, k.n, "llama.cpp logged no KV buffer")
		got := float64(f.KVBytes) / (1 << 20)
		assert.InDelta(t, k.mib, got, 0.01*float64(k.n)+1e-9, "%d sequences (unified %v, SWAFull %v), n_ctx %d: estimated %.3f MiB, llama.cpp allocated %.3f MiB",
			opts.Sequences, opts.KVUnified, opts.SWAFull, f.ContextSize, got, k.mib)
	}
}

func TestFitContextEstimate(t *testing.T) {
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		t.Run(name, func(t *testing.T) {
			m, err := llama.LoadModel(context.Background(), testenv.Model(t, name), llama.ModelOptions{})
			require.NoError(t, err)
			defer m.Close()
			checkKVEstimate(t, m, []llama.ContextOptions{
				{},
				{Sequences: 4},
				{Sequences: 4, KVUnified: true},
				{Sequences: 3, UBatchSize: 64},
				{TypeK: "f32", TypeV: "bf16"},
			})
		})
	}
}

// Random-weight models of the shapes the estimate tells apart: grouped KV
// heads, sliding-window layers by the file's pattern, a hybrid whose
// recurrent layers keep no KV cache, and a recurrent model with none.
func TestFitContextEstimateShapes(t *testing.T) {
	vocab := filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")
	for _, tt := range []struct {
		name string
		o    gguf.TinyModelOptions
	}{
		{"grouped KV heads", gguf.TinyModelOptions{NEmbd: 128, NLayer: 3, NHead: 8, NHeadKV: 2, NCtx: 2048}},
		{"sliding window, one layer in three full", gguf.TinyModelOptions{Arch: "gemma3", NEmbd: 64, NLayer: 6, NHead: 4, NHeadKV: 1,
			NCtx: 4096, SlidingWindow: 128, SlidingWindowPattern: 3}},
		{"wider full-context heads, shared KV layers", gguf.TinyModelOptions{Arch: "gemma4", NEmbd: 64, NLayer: 9, NHead: 4, NHeadKV: 2,
			NCtx: 4096, SlidingWindow: 128, SlidingWindowPattern: 3, SharedKVLayers: 3, PerLayerEmbd: 16}},
		{"Gemma 4 E2B's layers: 35, one in five full, the last 20 shared", gguf.TinyModelOptions{Arch: "gemma4", NEmbd: 64, NLayer: 35,
			NHead: 4, NHeadKV: 1, NCtx: 8192, SlidingWindow: 512, SlidingWindowPattern: 5, SharedKVLayers: 20}},
		{"hybrid", gguf.TinyModelOptions{Arch: "jamba", NEmbd: 64, NLayer: 4, NHead: 4, NHeadKV: 2, NCtx: 1024}},
		{"recurrent", gguf.TinyModelOptions{Arch: "mamba", NEmbd: 64, NLayer: 2, NCtx: 1024}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			tt.o.VocabFrom = vocab
			require.NoError(t, gguf.WriteTinyModel(path, tt.o))
			m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
			require.NoError(t, err)
			defer m.Close()
			checkKVEstimate(t, m, []llama.ContextOptions{
				{},
				{Sequences: 2},
				{Sequences: 3, KVUnified: true, UBatchSize: 32},
				{SWAFull: true, TypeK: "f32"},
			})
		})
	}
}

func TestFitContextLowers(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "llama-2-tiny-random.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	const noMemory = 1 << 62 // a margin no machine has: the fit finds no memory left
	for _, tt := range []struct {
		name    string
		opts    llama.ContextOptions
		want    int
		lowered bool
	}{
		{"the training context fits", llama.ContextOptions{}, 4096, false},
		{"off", llama.ContextOptions{Fit: llama.FitOptions{Off: true, Margin: noMemory}}, 4096, false},
		{"no memory: the minimum", llama.ContextOptions{Fit: llama.FitOptions{Margin: noMemory, MinContext: 1024}}, 1024, true},
		{"a minimum above the training context", llama.ContextOptions{Fit: llama.FitOptions{Margin: noMemory, MinContext: 8192}}, 4096, false},
		{"per sequence", llama.ContextOptions{Sequences: 4, Fit: llama.FitOptions{Margin: noMemory, MinContext: 512}}, 2048, true},
		{"one buffer for the sequences", llama.ContextOptions{Sequences: 4, KVUnified: true, Fit: llama.FitOptions{Margin: noMemory, MinContext: 512}}, 512, true},
		{"a size given is kept", llama.ContextOptions{ContextSize: 8192, Fit: llama.FitOptions{Margin: noMemory}}, 8192, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := m.FitContext(tt.opts)
			require.NoError(t, err)
			assert.Equal(t, tt.want, f.ContextSize)
			assert.Equal(t, tt.lowered, f.Lowered)
			c, err := m.NewContext(tt.opts)
			require.NoError(t, err)
			defer c.Close()
			assert.Equal(t, tt.want, c.Size())
		})
	}
}

// A context whose compute buffers do not allocate (which the fit leaves to
// its margin) is halved until they do: llama-2-tiny-random told it was
// trained on 16M tokens, without flash attention, whose attention scores
// for 16M cells and 2048-token micro-batches need hundreds of GB.
func TestFitContextHalvesOnFailure(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "llama-2-tiny-random.gguf"),
		llama.ModelOptions{KVOverrides: map[string]any{"llama.context_length": int64(1 << 24)}})
	require.NoError(t, err)
	defer m.Close()
	opts := llama.ContextOptions{FlashAttention: llama.FlashAttentionOff, BatchSize: 2048, UBatchSize: 2048,
		Fit: llama.FitOptions{MinContext: 1 << 14}}
	f, err := m.FitContext(opts)
	require.NoError(t, err)
	require.Equal(t, 1<<24, f.ContextSize, "the KV cache itself (512 MiB) fits")
	c, err := m.NewContext(opts)
	require.NoError(t, err)
	defer c.Close()
	n := c.Size()
	assert.Less(t, n, 1<<24)
	assert.GreaterOrEqual(t, n, 1<<14)
	assert.Zero(t, n&(n-1), "halved from 16M: %d", n)
}
