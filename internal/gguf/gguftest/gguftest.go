// Package gguftest writes the GGUF files tests need beside the shared test
// models (it imports testenv, which package gguf's own tests also use, so
// it cannot live in gguf).
package gguftest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// StoriesLoRA writes a random LoRA adapter for stories260K's attention q
// and v weights into a temporary folder and returns its path.
func StoriesLoRA(t testing.TB) string {
	t.Helper()
	base, err := gguf.Open(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(path, base, nil, 4, 4, 1, 0.5))
	return path
}
