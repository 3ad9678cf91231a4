//go:build gpu

package llama_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// TestGPUDeviceVerdicts runs on a machine with an NVIDIA GPU and a CUDA
// build of the library (LLAMA_LIB_DIR=the folder llama-install -flavor
// cuda installed). Every CUDA device is checked; with the default
// devices a model loads and generates whatever the verdicts (a refused
// device is left out with a warning: never the abort ggml gives on a
// device it has no code for); a refused device named explicitly fails
// the load with ErrUnsupported, a usable one generates.
func TestGPUDeviceVerdicts(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	checks, err := llama.CheckDevices()
	require.NoError(t, err)
	errs, err := llama.GPUBackendErrors()
	require.NoError(t, err)
	require.Empty(t, errs, "the CUDA backend must load (libcudart and libcublas of CUDA 13)")
	var refused, usable []string
	for _, c := range checks {
		if !strings.HasPrefix(c.Name, "CUDA") {
			continue
		}
		t.Logf("%s (%s): how=%q err=%v", c.Name, c.Description, c.How, c.Err)
		require.False(t, strings.HasPrefix(c.How, "not checked"), "%s: %s", c.Name, c.How)
		if c.Err != nil {
			assert.ErrorIs(t, c.Err, llama.ErrUnsupported)
			assert.Contains(t, c.Err.Error(), "llama-install -flavor vulkan")
			refused = append(refused, c.Name)
		} else {
			usable = append(usable, c.Name)
		}
	}
	require.NotEmpty(t, append(refused, usable...), "no CUDA device")

	generate := func(opts llama.ModelOptions) (string, string, error) {
		var logs testenv.Buffer
		llama.SetLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
		defer llama.SetLogger(nil)
		m, err := llama.LoadModel(context.Background(), path, opts)
		if err != nil {
			return "", logs.String(), err
		}
		defer m.Close()
		lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 2})
		require.NoError(t, err)
		defer lctx.Close()
		var sb strings.Builder
		for piece, err := range lctx.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 16}).Seq() {
			require.NoError(t, err)
			sb.WriteString(piece.Text)
		}
		return sb.String(), logs.String(), nil
	}

	text, logs, err := generate(llama.ModelOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, text)
	for _, name := range refused {
		assert.Contains(t, logs, "skipping a device this build cannot run on", name)
		assert.Contains(t, logs, name)
	}
	for _, name := range refused {
		_, _, err := generate(llama.ModelOptions{Devices: []string{name}})
		require.ErrorIs(t, err, llama.ErrUnsupported, name)
		t.Logf("named %s: %v", name, err)
	}
	for _, name := range usable {
		text, _, err := generate(llama.ModelOptions{Devices: []string{name}})
		require.NoError(t, err, name)
		assert.NotEmpty(t, text, name)
	}
}

// TestGPUFit checks the layer fit (ModelOptions.Fit, llama-server's --fit)
// on a GPU, on random models of 8 layers: with a margin that leaves room
// for the output layer and three and a half layers (their weights and a
// 256-token KV cache each), three layers and the output layer are
// offloaded, llama.cpp agrees, and the model generates; with room for
// less than the output layer, nothing is offloaded. A mixture of experts
// with room for every layer's dense part and two and a half layers'
// experts gets every layer and the experts of layers 0 and 1. Where no
// CUDA device is usable (a build this GPU has no code in), the model
// loads on the CPU, with nothing to fit.
func TestGPUFit(t *testing.T) {
	vocab := testenv.Model(t, "stories260K.gguf")
	write := func(name string, o gguf.TinyModelOptions) (path string, layer, experts, output uint64) {
		path = filepath.Join(t.TempDir(), name)
		o.VocabFrom, o.NEmbd, o.NLayer, o.NHead, o.Type, o.NCtx = vocab, 1024, 8, 8, gguf.F16, 4096
		require.NoError(t, gguf.WriteTinyModel(path, o))
		f, err := gguf.Open(path)
		require.NoError(t, err)
		for _, ti := range f.Tensors {
			n, err := ti.Size()
			require.NoError(t, err)
			switch {
			case strings.HasPrefix(ti.Name, "blk.0."):
				layer += n
				if strings.Contains(ti.Name, "_exps") {
					experts += n
				}
			case strings.HasPrefix(ti.Name, "output"):
				output += n
			}
		}
		return path, layer, experts, output
	}
	dense, layer, _, output := write("dense.gguf", gguf.TinyModelOptions{NFF: 4096})
	moe, moeLayer, moeExperts, moeOutput := write("moe.gguf", gguf.TinyModelOptions{NFF: 1024, Experts: 8})
	kv := uint64(256 * 2 * 1024 * 2) // 256 cells of K and V, 1024 wide, f16

	checks, err := llama.CheckDevices()
	require.NoError(t, err)
	var dev string
	for _, c := range checks {
		if strings.HasPrefix(c.Name, "CUDA") && c.Err == nil {
			dev = c.Name
			break
		}
	}
	load := func(path string, opts llama.ModelOptions) (*llama.Model, string) {
		var logs testenv.Buffer
		llama.SetLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		defer llama.SetLogger(nil)
		m, err := llama.LoadModel(context.Background(), path, opts)
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		return m, logs.String()
	}
	if dev == "" {
		m, logs := load(dense, llama.ModelOptions{Fit: llama.FitOptions{Margin: 1 << 62}})
		assert.False(t, m.OnGPU())
		assert.NotContains(t, logs, "to fit the GPUs")
		return
	}
	free := func() uint64 {
		devs, err := llama.Devices()
		require.NoError(t, err)
		for _, d := range devs {
			if d.Name == dev {
				return d.FreeMemory
			}
		}
		t.Fatalf("%s is gone", dev)
		return 0
	}
	denseAll := moeOutput + 8*(moeLayer-moeExperts+kv)
	for _, tt := range []struct {
		name, path string
		budget     uint64
		ngl        int
		plan       string
		onCPU      []string // tensors whose buffer type becomes the CPU's
		onGPU      []string
	}{
		{"the output layer and three", dense, output + 7*(layer+kv)/2, 4, "offloading 4 of 9 layers to fit", nil, nil},
		{"less than the output layer", dense, output / 2, 0, "offloading 0 of 9 layers to fit", nil, nil},
		{"every dense part and two layers' experts", moe, denseAll + 5*moeExperts/2, 9,
			"offloading 9 of 9 layers, the MoE experts of layers 2 to 7 on the CPU, to fit",
			[]string{"blk.2.ffn_up_exps.weight", "blk.7.ffn_down_exps.weight"}, []string{"blk.1.ffn_up_exps.weight"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, logs := load(tt.path, llama.ModelOptions{Devices: []string{dev}, Fit: llama.FitOptions{Margin: free() - tt.budget, MinContext: 256}})
			assert.Contains(t, logs, tt.plan)
			assert.Contains(t, logs, fmt.Sprintf("offloaded %d/9 layers to GPU", tt.ngl), "llama.cpp's count")
			for _, name := range tt.onCPU {
				assert.Regexp(t, "tensor "+regexp.QuoteMeta(name)+" .*buffer type overridden to CPU", logs)
			}
			for _, name := range tt.onGPU {
				assert.NotRegexp(t, "tensor "+regexp.QuoteMeta(name)+" .*buffer type overridden", logs)
			}
			assert.Equal(t, tt.ngl > 0, m.OnGPU())
			lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 2})
			require.NoError(t, err)
			defer lctx.Close()
			assert.Positive(t, generated(t, lctx, 8))
		})
	}
	m, logs := load(dense, llama.ModelOptions{Devices: []string{dev}, Fit: llama.FitOptions{Off: true}})
	assert.True(t, m.OnGPU())
	assert.Contains(t, logs, "offloaded 9/9 layers to GPU", "fit off: every layer")
}
