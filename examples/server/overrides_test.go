package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestFlagTensorOverrides checks -ot, --cpu-moe, --n-cpu-moe and
// --n-cpu-ffn: the patterns llama.cpp's common builds, in order, and a
// model served with them answers as without; an unknown buffer type stops
// the start with the known ones.
func TestFlagTensorOverrides(t *testing.T) {
	exps, dense := `\.ffn_(up|down|gate|gate_up)_(ch|)exps`, `\.ffn_(up|down|gate)\.`
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want []llama.TensorBufferOverride
	}{
		{args: []string{"-ot", `blk\.[0-3]\.attn=CPU,exps=CUDA0`}, want: []llama.TensorBufferOverride{{Pattern: `blk\.[0-3]\.attn`, BufferType: "CPU"}, {Pattern: "exps", BufferType: "CUDA0"}}},
		{args: []string{"--cpu-moe"}, want: []llama.TensorBufferOverride{{Pattern: exps, BufferType: "CPU"}}},
		{args: []string{"-ncmoe", "2"}, want: []llama.TensorBufferOverride{{Pattern: `blk\.0` + exps, BufferType: "CPU"}, {Pattern: `blk\.1` + exps, BufferType: "CPU"}}},
		{args: []string{"--n-cpu-ffn", "1", "-ot", "x=CPU"}, want: []llama.TensorBufferOverride{{Pattern: `blk\.0` + dense, BufferType: "CPU"}, {Pattern: "x", BufferType: "CPU"}}},
		{args: []string{"-ncmoe", "0"}},
		{env: map[string]string{"LLAMA_ARG_CPU_MOE": "1", "LLAMA_ARG_OVERRIDE_TENSOR": "a=CPU"}, want: []llama.TensorBufferOverride{{Pattern: "a", BufferType: "CPU"}, {Pattern: exps, BufferType: "CPU"}}},
	} {
		c, err := parseFlags(tc.args, envOf(tc.env), io.Discard)
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, c.opts.ModelOptions.TensorBufferOverrides, "%v %v", tc.args, tc.env)
	}
	for _, bad := range [][]string{{"-ot", "noequals"}, {"-ot", "a=CPU,"}, {"--n-cpu-ffn", "-1"}, {"-ncmoe", "x"}} {
		_, err := parseFlags(bad, noEnv, io.Discard)
		assert.ErrorContains(t, err, bad[0], "%v", bad)
	}

	model := testenv.Model(t, "stories260K.gguf")
	want, err := greedy(t, model, "-ngl", "0")
	require.NoError(t, err)
	for _, args := range [][]string{{"-ngl", "0", "-ncffn", "5"}, {"-ngl", "0", "-ot", `attn_(q|k)=CPU`, "--cpu-moe"}, {"-ot", `\.ffn_=CPU`}} {
		got, err := greedy(t, model, args...)
		require.NoError(t, err, "%v", args)
		assert.Equal(t, want, got, "%v", args)
	}
	_, err = greedy(t, model, "-ot", "exps=VRAM")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown buffer type "VRAM"`)
	assert.Contains(t, err.Error(), "available: CPU")
}
