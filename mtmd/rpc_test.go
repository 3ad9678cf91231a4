//go:build mtmd && rpc

package mtmd_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/gguf"
	"github.com/x/llama/internal/testenv"
	"github.com/x/llama/internal/testenv/modeltest"
	"github.com/x/llama/mtmd"
)

// TestEvalOnDeadRPCWorker evaluates an image prompt into a context of a
// model on an RPC worker killed before: Eval returns an error with Code
// CodeRPC instead of blocking for good (a minute is the hang guard), and
// a second Eval on the failed model refuses with it too.
func TestEvalOnDeadRPCWorker(t *testing.T) {
	testenv.MTMD(t)
	ctx := context.Background()
	w := testenv.StartRPCWorker(t)
	model := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{RPCServers: []string{w.Addr}})
	info, err := model.Info()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mmproj-tiny.gguf")
	require.NoError(t, gguf.WriteTinyProjector(path, gguf.TinyProjectorOptions{TextEmbd: info.EmbeddingSize, Seed: 7}))
	proj, err := mtmd.LoadProjector(ctx, model, path, mtmd.ProjectorOptions{CPUOnly: true, Threads: 1})
	require.NoError(t, err)
	defer proj.Close()
	lctx := modeltest.NewContext(t, model, llama.ContextOptions{ContextSize: 512, Threads: 1})
	img, err := proj.NewMedia(pngOf(t, "gradient", 33, 17), mtmd.MediaOptions{})
	require.NoError(t, err)
	defer img.Close()
	chunks, err := proj.Tokenize("Hello "+proj.Marker()+" world", []*mtmd.Media{img}, mtmd.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	defer chunks.Close()

	w.Kill()
	for _, what := range []string{"Eval after the worker died", "Eval on the failed model"} {
		done := make(chan error, 1)
		go func() {
			_, err := proj.Eval(ctx, lctx, chunks, mtmd.EvalOptions{Seq: 0, LogitsLast: true})
			done <- err
		}()
		select {
		case err := <-done:
			require.Error(t, err, what)
			var le *llama.Error
			require.ErrorAs(t, err, &le, "%s: %v", what, err)
			assert.Equal(t, llama.CodeRPC, le.Code, "%s: %v", what, err)
		case <-time.After(time.Minute):
			t.Fatalf("%s hangs", what)
		}
	}
	require.ErrorIs(t, model.RPCErr(), llama.ErrRPC)
}
