package engine

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
)

// writeStoriesLoRA writes a random LoRA adapter for stories260K's
// attention q and v weights.
func writeStoriesLoRA(t *testing.T) string {
	t.Helper()
	base, err := gguf.Open(testenv.Model(t, "stories260K.gguf"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "lora.gguf")
	require.NoError(t, gguf.WriteLoRA(path, base, nil, 4, 4, 1, 0.5))
	return path
}
