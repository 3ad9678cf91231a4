package engine

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
)

// The engine reports its errors as the root does: a *llama.Error whose
// Code says what failed.
func TestEngineErrorCodes(t *testing.T) {
	m := engStoriesModel(t)
	wide := filepath.Join(t.TempDir(), "wide.gguf")
	w := gguf.NewWriter()
	w.SetKV("general.architecture", "controlvector")
	require.NoError(t, w.AddTensorF32("direction.1", []uint64{3}, []float32{1, 2, 3}))
	require.NoError(t, w.WriteFile(wide))
	small := Options{Context: llama.ContextOptions{ContextSize: 256, Threads: 1}, Parallel: 1}
	closed, err := New(m, small)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	withCV := small
	withCV.ControlVectors = []llama.ControlVectorFile{{Path: wide, Scale: 1}}

	cases := []struct {
		name string
		err  func() error
		code llama.ErrorCode
	}{
		{"nil model", func() error { _, err := New(nil, small); return err }, llama.CodeInvalid},
		{"control vector of another size", func() error {
			e, err := New(m, withCV)
			if err == nil {
				e.Close()
			}
			return err
		}, llama.CodeInvalid},
		{"nil request", func() error { _, err := closed.Submit(context.Background(), nil); return err }, llama.CodeInvalid},
		{"closed", func() error { _, err := closed.Submit(context.Background(), NewRequest([]llama.Token{1})); return err }, llama.CodeClosed},
		{"queue full", func() error { return ErrQueueFull }, llama.CodeBusy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			var le *llama.Error
			require.True(t, errors.As(err, &le), "%T %v", err, err)
			assert.Equal(t, tc.code, le.Code, "%v", err)
		})
	}
}
