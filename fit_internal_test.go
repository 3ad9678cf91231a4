package llama

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/capi"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testsplit"
)

func TestFitSize(t *testing.T) {
	// A llama of 32 layers and 8 KV heads of 128: 128 KiB a cell in f16.
	dense := kvShape{fullK: 32 * 1024, fullV: 32 * 1024}
	perCell := uint64(128 << 10)
	// Gemma 3 270M: 3 full-context layers and 15 windowed ones (512).
	gemma := kvShape{fullK: 3 * 256, fullV: 3 * 256, swaK: 15 * 256, swaV: 15 * 256, nSwa: 512}
	one := newKVGeometry(ContextOptions{})
	four := newKVGeometry(ContextOptions{Sequences: 4})
	for _, tt := range []struct {
		name       string
		sh         kvShape
		g          kvGeometry
		train, min int
		share      float64
		host, gpu  uint64
		want       int
	}{
		{"fits on the host", dense, one, 131072, 4096, 0, 131072 * perCell, 0, 131072},
		{"one cell short", dense, one, 131072, 4096, 0, 131072*perCell - 1, 0, 130816},
		{"a quarter of the memory", dense, one, 131072, 4096, 0, 32768 * perCell, 0, 32768},
		{"nothing left: the minimum", dense, one, 131072, 4096, 0, 0, 0, 4096},
		{"a training context below the minimum", dense, one, 2048, 2048, 0, 0, 0, 2048},
		{"four streams share the memory", dense, four, 32768, 4096, 0, 4 * 8192 * perCell, 0, 4 * 8192},
		{"all on the GPU", dense, one, 131072, 4096, 1, 0, 16384 * perCell, 16384},
		{"the GPU's part is what is short", dense, one, 131072, 4096, 0.5, 1 << 40, 8192 * perCell / 2, 8192},
		{"the host's part is what is short", dense, one, 131072, 4096, 0.5, 8192 * perCell / 2, 1 << 40, 8192},
		{"a window does not grow", gemma, one, 32768, 4096, 0, 32768*3*1024 + 1024*15*1024, 0, 32768},
		{"the full layers set the size", gemma, one, 32768, 4096, 0, 16384*3*1024 + 1024*15*1024, 0, 16384},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fitSize(tt.sh, tt.g, tt.train, tt.min, tt.share, tt.host, tt.gpu))
		})
	}
}

func TestFitLower(t *testing.T) {
	f := ContextFit{Wanted: 131072}
	for _, tt := range []struct {
		name string
		n    int
		opts ContextOptions
		want int
		ok   bool
	}{
		{"halved", 131072, ContextOptions{}, 65536, true},
		{"to a multiple of 256", 10000, ContextOptions{}, 4864, true},
		{"not below the minimum", 6000, ContextOptions{}, 4096, true},
		{"at the minimum", 4096, ContextOptions{}, 4096, false},
		{"a minimum of its own", 4096, ContextOptions{Fit: FitOptions{MinContext: 1024}}, 2048, true},
		{"per sequence", 4 * 8192, ContextOptions{Sequences: 4}, 4 * 4096, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, ok := f.lower(tt.n, tt.opts)
			assert.Equal(t, tt.want, n)
			assert.Equal(t, tt.ok, ok)
		})
	}
}

func TestFitLayers(t *testing.T) {
	w := layerWeights{layers: []uint64{10, 10, 10, 10}, output: 5}
	kv := []uint64{1, 1, 1, 1}
	for _, tt := range []struct {
		name   string
		w      layerWeights
		kv     []uint64
		budget uint64
		want   int
	}{
		{"all fit", w, kv, 49, 5},
		{"the first layer is left out", w, kv, 48, 4},
		{"the output layer and the last layer", w, kv, 16, 2},
		{"the output layer alone", w, kv, 15, 1},
		{"nothing", w, kv, 4, 0},
		{"no KV cache", w, nil, 45, 5},
		{"a model with no layers", layerWeights{output: 5}, nil, 5, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fitLayers(tt.w, tt.kv, tt.budget, false))
		})
	}
}

func TestPlanFit(t *testing.T) {
	dense := layerWeights{layers: []uint64{10, 10, 10, 10}, output: 5}
	// Layers of 10, 8 of it experts; a KV cache of 1 each.
	moe := layerWeights{layers: []uint64{10, 10, 10, 10}, experts: []uint64{8, 8, 8, 8}, output: 5}
	kv := []uint64{1, 1, 1, 1}
	for _, tt := range []struct {
		name   string
		w      layerWeights
		budget uint64
		want   layerPlan
		ok     bool
	}{
		{"a dense model that fits", dense, 49, layerPlan{}, false},
		{"a dense model, two layers short", dense, 30, layerPlan{ngl: 3, cpuExperts: 4}, true},
		{"experts that fit", moe, 49, layerPlan{}, false},
		{"the last layer's experts on the CPU", moe, 48, layerPlan{ngl: 5, cpuExperts: 3}, true},
		{"every dense part, two layers' experts", moe, 5 + 4*3 + 16, layerPlan{ngl: 5, cpuExperts: 2}, true},
		{"every dense part, no experts", moe, 5 + 4*3 + 7, layerPlan{ngl: 5, cpuExperts: 0}, true},
		{"three dense parts: every expert on the CPU", moe, 5 + 3*3 + 2, layerPlan{ngl: 4, cpuExperts: 0}, true},
		{"not even the output layer", moe, 4, layerPlan{ngl: 0, cpuExperts: 0}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := planFit(tt.w, kv, tt.budget)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, p)
		})
	}
	assert.Equal(t, []TensorBufferOverride{
		{Pattern: `blk\.2\.ffn_(up|down|gate|gate_up)_(ch|)exps`, BufferType: "CPU"},
		{Pattern: `blk\.3\.ffn_(up|down|gate|gate_up)_(ch|)exps`, BufferType: "CPU"},
	}, layerPlan{ngl: 5, cpuExperts: 2}.overrides(4))
	assert.Empty(t, layerPlan{ngl: 3, cpuExperts: 4}.overrides(4))
}

// weightsOf places every tensor: the layers, the output layer (with a copy
// of the token embeddings where they are tied) and the input layer add up
// to llama.cpp's own size of the model, for a model in one file and split.
func TestWeightsOf(t *testing.T) {
	vocab := filepath.Join(testenv.ModelsDir(t), "vocab", "ggml-vocab-llama-spm.gguf")
	tied := filepath.Join(t.TempDir(), "gemma3.gguf")
	require.NoError(t, gguf.WriteTinyModel(tied, gguf.TinyModelOptions{Arch: "gemma3", VocabFrom: vocab, NLayer: 3}))
	moe := filepath.Join(t.TempDir(), "moe.gguf")
	require.NoError(t, gguf.WriteTinyModel(moe, gguf.TinyModelOptions{VocabFrom: vocab, NLayer: 3, Experts: 4}))
	gemma4 := filepath.Join(t.TempDir(), "gemma4.gguf")
	require.NoError(t, gguf.WriteTinyModel(gemma4, gguf.TinyModelOptions{Arch: "gemma4", VocabFrom: vocab, NLayer: 4,
		SlidingWindow: 32, SlidingWindowPattern: 2, SharedKVLayers: 2, PerLayerEmbd: 8}))
	split := testsplit.Stories(t, 3)
	for _, tt := range []struct {
		name  string
		paths []string
		tied  bool
	}{
		{"stories260K", []string{testenv.Model(t, "stories260K.gguf")}, false},
		{"llama-2-tiny-random", []string{testenv.Model(t, "llama-2-tiny-random.gguf")}, false},
		{"tied embeddings", []string{tied}, true},
		{"a mixture of experts", []string{moe}, false},
		{"per-layer embeddings (input) and their projection (layer 0)", []string{gemma4}, true},
		{"split, by the first file's name", split[:1], false},
		{"split, every file named", split, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := LoadModelSplits(context.Background(), tt.paths, ModelOptions{})
			require.NoError(t, err)
			defer m.Close()
			files, err := readSplits(tt.paths)
			require.NoError(t, err)
			n := int(capi.ModelNLayer(m.ptr))
			w, err := weightsOf(files, n)
			require.NoError(t, err)
			require.Len(t, w.layers, n)
			var total, embd uint64
			for i, l := range w.layers {
				assert.Positive(t, l)
				total += l
				if tt.name == "a mixture of experts" {
					// The three experts' matrices of 4 experts, 64×128 in F32.
					assert.Equal(t, uint64(3*4*64*128*4), w.experts[i], "layer %d", i)
				} else {
					assert.Zero(t, w.experts[i])
				}
			}
			hasOutput := false
			for _, f := range files {
				for _, ti := range f.Tensors {
					switch ti.Name {
					case "token_embd.weight":
						embd, _ = ti.Size()
					case "per_layer_token_embd.weight": // the input layer's, on the CPU
						n, _ := ti.Size()
						total += n
					case "output.weight":
						hasOutput = true
					}
				}
			}
			assert.Equal(t, !tt.tied, hasOutput)
			total += w.output + embd
			if !hasOutput {
				total -= embd // the copy exists only where the output layer is offloaded
			}
			assert.Equal(t, m.size, total)
		})
	}
}

func TestOffloadTargets(t *testing.T) {
	devs := []Device{{Name: "CPU", Type: "cpu"}, {Name: "CUDA0", Type: "gpu"}, {Name: "CUDA1", Type: "gpu"}, {Name: "Vulkan0", Type: "igpu"}}
	names := func(ds []Device) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Name)
		}
		return out
	}
	assert.Equal(t, []string{"CUDA0", "CUDA1"}, names(offloadTargets(devs, nil, false)), "the GPUs, not the integrated one")
	assert.Equal(t, []string{"Vulkan0"}, names(offloadTargets([]Device{devs[0], devs[3]}, nil, false)), "no GPU: the integrated one")
	assert.Equal(t, []string{"CUDA1"}, names(offloadTargets(devs, []string{"CUDA1"}, true)))
	assert.Empty(t, offloadTargets(devs, nil, true), "pinned to none: every device refused")
	assert.Empty(t, offloadTargets(devs[:1], nil, false))
}
