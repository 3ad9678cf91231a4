package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/internal/testenv"
)

// TestEmbeddingKeepsCompletions checks llama-server v0.4.0's --embedding
// on a generative model: completions are still served, beside embeddings
// equal to a direct computation's.
func TestEmbeddingKeepsCompletions(t *testing.T) {
	model := testenv.Model(t, "stories260K.gguf")
	s, ts := newTestServer(t, Options{Model: model, ChatTemplate: "chatml", Engine: EngineOptions{
		Embedding: true, Pooling: llama.PoolingMean, Parallel: 2, CtxSize: 1024,
	}})
	const text = "Once upon a time"
	code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": text, "n_predict": 8, "temperature": 0})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.NotEmpty(t, out["content"])

	var emb oaiEmbeddingList
	require.Equal(t, http.StatusOK, xPost(t, ts.URL+"/v1/embeddings", map[string]any{"input": text}, &emb))
	require.Len(t, emb.Data, 1)
	assert.NotEmpty(t, emb.Data[0].Embedding)

	inst := defaultInstance(t, s)
	require.NotNil(t, inst.EmbedEngine, "embeddings run in their own context")
	assert.Len(t, inst.Engine.SlotsInfo(), 2, "the completion slots")
}
