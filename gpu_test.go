//go:build gpu

package llama_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
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
