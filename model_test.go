package llama_test

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

func TestLoadProgressAndCancel(t *testing.T) {
	path := testenv.Model(t, "stories260K.gguf")
	var seen []float32
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{Progress: func(p float32) { seen = append(seen, p) }})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.NotEmpty(t, seen)
	assert.True(t, sort.SliceIsSorted(seen, func(i, j int) bool { return seen[i] < seen[j] }))
	assert.InDelta(t, 1, seen[len(seen)-1], 1e-6)

	ctx, cancel := context.WithCancel(context.Background())
	_, err = llama.LoadModel(ctx, path, llama.ModelOptions{Progress: func(float32) { cancel() }})
	assert.ErrorIs(t, err, llama.ErrCanceled)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestKVOverride(t *testing.T) {
	m := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{
		KVOverrides: map[string]any{"llama.context_length": 1000, "general.name": "renamed"}})
	assert.Equal(t, 1000, m.TrainContext())
}

func TestPerfAndDevices(t *testing.T) {
	m := stories(t)
	c := newCtx(t, m, llama.ContextOptions{ContextSize: 256, Perf: true})
	generate(t, c, "Once upon a time", llama.GenerateOptions{MaxTokens: 8})
	p, err := c.Perf()
	require.NoError(t, err)
	assert.Equal(t, 7, p.EvalTokens, "8 sampled, 7 decoded one at a time")
	assert.Greater(t, p.PromptTokens, 0)
	devs, err := llama.Devices()
	require.NoError(t, err)
	require.NotEmpty(t, devs)
	// A GPU build lists its GPUs first; every build has the CPU device.
	types := make([]string, len(devs))
	for i, d := range devs {
		types[i] = d.Type
		assert.NotEmpty(t, d.Name)
		assert.Contains(t, []string{"cpu", "gpu", "igpu", "accel"}, d.Type, "device %s", d.Name)
	}
	assert.Contains(t, types, "cpu")
	info, err := llama.SystemInfo()
	require.NoError(t, err)
	assert.Contains(t, info, "CPU")
}
