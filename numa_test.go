package llama_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestNUMAInit: LibraryOptions.NUMA applies when the library loads, once
// per process, so it runs in a process of its own: an unknown strategy is
// refused, and with NUMADistribute a model loads and generates. (This
// machine has one NUMA node, where ggml places nothing; a machine of
// several is not at hand.)
func TestNUMAInit(t *testing.T) {
	if os.Getenv("LLAMA_TEST_NUMA_CHILD") == "1" {
		err := llama.Init(llama.LibraryOptions{NUMA: 9})
		require.ErrorIs(t, err, llama.ErrInvalid)
		require.NoError(t, llama.Init(llama.LibraryOptions{NUMA: llama.NUMADistribute}))
		m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
		require.NoError(t, err)
		defer m.Close()
		c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 2})
		require.NoError(t, err)
		defer c.Close()
		fmt.Printf("generated %d tokens\n", generated(t, c, 8))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNUMAInit$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LLAMA_TEST_NUMA_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "generated 8 tokens")
}

// generated runs a generation of at most n tokens from "Once
// upon a time" on c and returns how many came, failing t on an error.
func generated(t *testing.T, c *llama.Context, n int) int {
	t.Helper()
	got := 0
	for _, err := range c.Generate(context.Background(), "Once upon a time", llama.GenerateOptions{MaxTokens: n}).Seq() {
		require.NoError(t, err)
		got++
	}
	return got
}
