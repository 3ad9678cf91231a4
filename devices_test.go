package llama_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// greedyText loads the model with opts and returns its greedy
// continuation of a prompt, with llama.cpp's log of the load.
func greedyText(t *testing.T, path string, opts llama.ModelOptions) (string, string, error) {
	t.Helper()
	var buf testenv.Buffer
	llama.SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	m, err := llama.LoadModel(context.Background(), path, opts)
	llama.SetLogger(nil)
	if err != nil {
		return "", buf.String(), err
	}
	defer m.Close()
	lctx, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
	require.NoError(t, err)
	defer lctx.Close()
	var sb strings.Builder
	for piece, err := range lctx.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: 24}).Seq() {
		require.NoError(t, err)
		sb.WriteString(piece.Text)
	}
	return sb.String(), buf.String(), nil
}

// TestTensorBufferOverrides loads stories260K with weights moved to the
// CPU buffer type by pattern: llama.cpp reports each override at load,
// the output is unchanged, and unknown buffer types (even behind a
// pattern that matches first) and devices are errors naming the known
// ones.
func TestTensorBufferOverrides(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	names, err := llama.BufferTypes()
	require.NoError(t, err)
	require.Contains(t, names, "CPU", "the CPU buffer type exists without a GPU")
	overridden := regexp.MustCompile(`tensor (\S+) \([^)]*\) buffer type overridden to (\S+)`)

	want, _, err := greedyText(t, path, llama.ModelOptions{CPUOnly: true})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		ovs  []llama.TensorBufferOverride
		re   string // the tensors overridden
		n    int    // how many (stories260K has 5 layers)
	}{
		{"all FFN weights", []llama.TensorBufferOverride{{Pattern: `\.ffn_(up|down|gate)\.`, BufferType: "CPU"}}, `^blk\.\d\.ffn_(up|down|gate)\.weight$`, 15},
		{"first two layers' FFN (as --n-cpu-ffn 2)", []llama.TensorBufferOverride{{Pattern: `blk\.0\.ffn_(up|down|gate)\.`, BufferType: "CPU"}, {Pattern: `blk\.1\.ffn_(up|down|gate)\.`, BufferType: "CPU"}}, `^blk\.[01]\.ffn_`, 6},
		{"attention of layer 4", []llama.TensorBufferOverride{{Pattern: `blk\.4\.attn_`, BufferType: "CPU"}}, `^blk\.4\.attn_`, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, logs, err := greedyText(t, path, llama.ModelOptions{CPUOnly: true, TensorBufferOverrides: tc.ovs})
			require.NoError(t, err)
			assert.Equal(t, want, got, "the weights' place does not change the output")
			ms := overridden.FindAllStringSubmatch(logs, -1)
			assert.Len(t, ms, tc.n, "%s", logs)
			for _, m := range ms {
				assert.Regexp(t, tc.re, m[1])
				assert.Equal(t, "CPU", strings.Trim(m[2], `"\`))
			}
		})
	}

	for _, tc := range []struct {
		name string
		opts llama.ModelOptions
		want []string
	}{
		{"unknown buffer type", llama.ModelOptions{TensorBufferOverrides: []llama.TensorBufferOverride{{Pattern: "exps", BufferType: "VRAM"}}}, []string{`unknown buffer type "VRAM"`, "CPU"}},
		{"unknown buffer type behind a match", llama.ModelOptions{TensorBufferOverrides: []llama.TensorBufferOverride{{Pattern: "attn_q", BufferType: "CPU"}, {Pattern: "attn_q", BufferType: "VRAM"}}}, []string{`unknown buffer type "VRAM"`}},
		{"empty pattern", llama.ModelOptions{TensorBufferOverrides: []llama.TensorBufferOverride{{Pattern: "", BufferType: "CPU"}}}, []string{"invalid tensor pattern"}},
		{"unknown device", llama.ModelOptions{Devices: []string{"NOPE0"}}, []string{`invalid device "NOPE0"`}},
		{"the CPU is not a device", llama.ModelOptions{Devices: []string{"CPU"}}, []string{`invalid device "CPU"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := greedyText(t, path, tc.opts)
			require.Error(t, err)
			var le *llama.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, llama.CodeInvalid, le.Code)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestCheckDevices lists the devices with their verdicts: on this
// machine's build every device is usable (the CUDA verdicts are tested
// in gpucheck_internal_test.go and, against the npm CUDA library, in
// internal/cudafatbin behind the cudalib tag).
func TestCheckDevices(t *testing.T) {
	devs, err := llama.Devices()
	require.NoError(t, err)
	checks, err := llama.CheckDevices()
	require.NoError(t, err)
	require.Len(t, checks, len(devs))
	for i, c := range checks {
		assert.Equal(t, devs[i].Name, c.Name)
		if !strings.HasPrefix(c.Name, "CUDA") {
			assert.NoError(t, c.Err, c.Name)
			assert.Empty(t, c.How, c.Name)
		}
	}
}
