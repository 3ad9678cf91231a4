package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
)

// greedy is prompt's greedy continuation of n tokens on a context of its own.
func greedy(t *testing.T, model, prompt string, n int) string {
	t.Helper()
	m := modeltest.LoadPath(t, model, llama.ModelOptions{})
	c := modeltest.NewContext(t, m, llama.ContextOptions{ContextSize: 512, Threads: 1})
	var sb strings.Builder
	for p, err := range c.Generate(context.Background(), prompt, llama.GenerateOptions{MaxTokens: n}).Seq() {
		require.NoError(t, err)
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// Six prompts on two slots: each completion, printed in the prompts'
// order, is the greedy continuation a context of its own gives.
func TestBatch(t *testing.T) {
	model := testenv.Model(t, "stories260K.gguf")
	prompts := []string{"Once upon a time", "The cat", "Lily and Tom", "One day", "The sun", "Tim had a ball"}
	file := filepath.Join(t.TempDir(), "prompts.txt")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(prompts[2:], "\n")+"\n\n"), 0o644))
	cfg, err := parseFlags([]string{"-m", model, "-np", "2", "-n", "16", "-t", "1", "-f", file, prompts[0], prompts[1]}, os.Stderr)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), cfg, &out))
	for i, p := range prompts {
		want := "--- " + string(rune('1'+i)) + "\n" + p + greedy(t, model, p, 16) + "\n"
		assert.Contains(t, out.String(), want)
	}
	assert.Contains(t, out.String(), "--- 6 prompts, 96 tokens generated")
}

func TestBatchFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"hi"}, "no model"},
		{"no prompts", []string{"-m", "x.gguf"}, "no prompts"},
		{"bad slots", []string{"-m", "x.gguf", "-np", "0", "hi"}, "-np"},
		{"missing file", []string{"-m", "x.gguf", "-f", "/nonexistent/prompts.txt"}, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
