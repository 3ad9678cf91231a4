//go:build realmodel

package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/gguf/gguftest"
	"github.com/x/llama/internal/testenv"
)

// TestRouterCorruptRealModels serves a folder of damaged copies of Gemma 3
// 270M (truncated at offsets over every section, bytes changed in the
// header and metadata) beside the intact file: a request routed to a
// damaged one is an error naming why the load failed, the server stays up,
// and the intact model still answers afterwards. Only one damaged copy is
// on disk at a time.
func TestRouterCorruptRealModels(t *testing.T) {
	src := testenv.RealModel(t, "gemma3-270m")
	dir := t.TempDir()
	require.NoError(t, os.Symlink(src, filepath.Join(dir, "gemma.gguf")))
	cases := gguftest.Corruptions(t, src)
	// The router lists the folder once, at start; each damaged copy is
	// written into its (empty) file only for its own case and emptied
	// after, so the test holds one copy on disk at a time, not forty.
	for i := range cases {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("bad%02d.gguf", i)), nil, 0o644))
	}
	_, ts := newTestServer(t, Options{ModelsDir: dir, ModelsMax: 1, ChatTemplate: "chatml",
		Engine: engine.Options{Context: llama.ContextOptions{ContextSize: 512, Threads: 1, ThreadsBatch: 1}, Parallel: 1}})
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			model := fmt.Sprintf("bad%02d", i)
			p := gguftest.WriteCorrupt(t, src, dir, model+".gguf", c)
			t.Cleanup(func() { assert.NoError(t, os.Truncate(p, 0)) })
			code, data := call(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "hi", "model": model}, nil)
			require.GreaterOrEqual(t, code, 400, "%s", data)
			msg, _ := errOf(t, data)["message"].(string)
			assert.Contains(t, msg, model, "the error names the model")
			t.Log(msg)
			code, _ = call(t, "GET", ts.URL+"/health", nil, nil)
			require.Equal(t, 200, code)
		})
	}
	code, out := callJSON(t, "POST", ts.URL+"/tokenize", map[string]any{"content": "Hello world", "model": "gemma"})
	require.Equal(t, 200, code, "%v", out)
	assert.Equal(t, []any{9259.0, 1902.0}, out["tokens"])
}
