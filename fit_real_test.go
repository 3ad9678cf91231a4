//go:build realmodel

package llama_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// Gemma 3's sliding-window layers (five in six, a window of 512) keep a
// window-sized cache unless SWAFull: the estimate follows both.
func TestRealModelFitContextEstimate(t *testing.T) {
	m, err := llama.LoadModel(context.Background(), testenv.RealModel(t, "gemma3-270m"), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	checkKVEstimate(t, m, []llama.ContextOptions{
		{},
		{SWAFull: true},
		{Sequences: 4},
		{Sequences: 4, KVUnified: true},
		{Sequences: 2, UBatchSize: 128, TypeK: "q8_0", TypeV: "q8_0", FlashAttention: llama.FlashAttentionOn},
	})
}
