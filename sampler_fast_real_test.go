//go:build realmodel

package llama_test

import (
	"testing"

	"github.com/x/llama/internal/testenv"
)

// TestSampleFastPathGemma is TestSampleFastPath on Gemma 3 270M's
// 262,144-token rows: the fast path's top-k and llama.cpp's must agree on
// a vocabulary eight times larger, with a trained model's logits.
func TestSampleFastPathGemma(t *testing.T) {
	checkFastPath(t, []namedModel{{"gemma3-270m", loadModelPath(t, testenv.RealModel(t, "gemma3-270m"))}})
}
