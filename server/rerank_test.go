package server

import (
	"context"
	"math"
	"net/http"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
)

var rerankDocs = []string{
	"A machine is a physical system that uses power to apply forces.",
	"Learning is the process of acquiring new understanding.",
	"Machine learning is a field of study in artificial intelligence.",
	"Paris is the capital of France.",
}

// directScores scores each document against query on a context of its own.
func directScores(t *testing.T, path, query string, docs []string) []float32 {
	t.Helper()
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	c, err := m.NewContext(llama.ContextOptions{ContextSize: 512, Embeddings: true, Pooling: llama.PoolingRank, Threads: 1})
	require.NoError(t, err)
	var out []float32
	for _, d := range docs {
		toks, err := rerankPrompt(m, query, d)
		require.NoError(t, err)
		b := llama.NewBatch(len(toks), 1)
		require.NoError(t, b.AddSequence(toks, 0, 0, true))
		for i := range toks {
			b.SetOutput(i, true)
		}
		require.NoError(t, c.Memory().Clear())
		require.NoError(t, c.Encode(context.Background(), b))
		s, err := c.SeqEmbeddings(0)
		require.NoError(t, err)
		require.Len(t, s, 1)
		out = append(out, s[0])
	}
	return out
}

func rerankServer(t *testing.T, path string) string {
	_, hs := newTestServer(t, Options{Model: path, Engine: engine.Options{
		Embedding: true, Reranking: true, Context: llama.ContextOptions{Pooling: llama.PoolingRank, ContextSize: 1024, BatchSize: 512, UBatchSize: 512, Threads: 1},
		Parallel: 2,
	}})
	return hs.URL
}

func TestRerankPrompt(t *testing.T) {
	path := writeTinyBert(t, 1, 0)
	m, err := llama.LoadModel(context.Background(), path, llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	toks, err := rerankPrompt(m, "what is panda?", "hi")
	require.NoError(t, err)
	// The bge vocabulary adds BOS ([CLS]) and SEP but no EOS:
	// [CLS] what is panda ? [SEP] hi
	assert.Equal(t, []llama.Token{101, 2054, 2003, 25462, 1029, 102, 7632}, toks)
}

func TestRerank(t *testing.T) {
	path := writeTinyBert(t, 1, 0)
	url := rerankServer(t, path)
	const query = "Machine learning is"
	want := directScores(t, path, query, rerankDocs)
	for i, s := range want {
		require.False(t, math.IsNaN(float64(s)) || math.IsInf(float64(s), 0), "score %d finite", i)
	}

	var res rerankResponse
	require.Equal(t, http.StatusOK, xPost(t, url+"/rerank", map[string]any{"query": query, "documents": rerankDocs}, &res))
	require.Len(t, res.Results, 4)
	seen := map[int]bool{}
	for k, r := range res.Results {
		seen[r.Index] = true
		assert.InDelta(t, want[r.Index], r.RelevanceScore, 1e-3, "score of document %d", r.Index)
		assert.Nil(t, r.Document)
		if k > 0 {
			assert.GreaterOrEqual(t, res.Results[k-1].RelevanceScore, r.RelevanceScore, "sorted by score")
		}
	}
	assert.Len(t, seen, 4, "each document once")
	assert.Greater(t, res.Usage.PromptTokens, 4*6)
	assert.Equal(t, res.Usage.PromptTokens, res.Usage.TotalTokens)

	// Equal documents score equally; top_n keeps the best; return_text
	// carries the documents.
	for _, route := range []string{"/reranking", "/v1/rerank", "/v1/reranking"} {
		var top rerankResponse
		require.Equal(t, http.StatusOK, xPost(t, url+route, map[string]any{
			"query": query, "documents": rerankDocs, "top_n": 2, "return_text": true,
		}, &top))
		require.Len(t, top.Results, 2)
		assert.Equal(t, res.Results[0].Index, top.Results[0].Index)
		assert.Equal(t, res.Results[1].Index, top.Results[1].Index)
		require.NotNil(t, top.Results[0].Document)
		assert.Equal(t, rerankDocs[top.Results[0].Index], top.Results[0].Document.Text)
	}
	var same rerankResponse
	require.Equal(t, http.StatusOK, xPost(t, url+"/rerank", map[string]any{
		"query": query, "documents": []string{rerankDocs[1], rerankDocs[1], rerankDocs[1]}, "top_n": 99,
	}, &same))
	require.Len(t, same.Results, 3)
	assert.InDelta(t, same.Results[0].RelevanceScore, same.Results[2].RelevanceScore, 1e-4)
	assert.InDelta(t, want[1], same.Results[0].RelevanceScore, 1e-3)

	// TEI's shape: "texts" in, a bare list with "score" out.
	var tei []teiRerankResult
	require.Equal(t, http.StatusOK, xPost(t, url+"/rerank", map[string]any{
		"query": query, "texts": rerankDocs, "return_text": true,
	}, &tei))
	require.Len(t, tei, 4)
	assert.Equal(t, res.Results[0].Index, tei[0].Index)
	assert.InDelta(t, res.Results[0].RelevanceScore, tei[0].Score, 1e-6)
	require.NotNil(t, tei[0].Text)
	assert.Equal(t, rerankDocs[tei[0].Index], *tei[0].Text)
}

func TestRerankErrors(t *testing.T) {
	url := rerankServer(t, writeTinyBert(t, 1, 0))
	tests := []struct {
		name string
		body map[string]any
	}{
		{"no documents", map[string]any{"query": "q"}},
		{"empty documents", map[string]any{"query": "q", "documents": []string{}}},
		{"null documents", map[string]any{"query": "q", "documents": nil}},
		{"number documents", map[string]any{"query": "q", "documents": 123}},
		{"numbers in documents", map[string]any{"query": "q", "documents": []int{1, 2, 3}}},
		{"no query", map[string]any{"documents": []string{"a"}}},
		{"query not a string", map[string]any{"query": 5, "documents": []string{"a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e errorBody
			assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/rerank", tc.body, &e))
			assert.Equal(t, errInvalidRequest, e.Error.Type)
		})
	}
	// Without --reranking the endpoint is not supported.
	_, hs := newTestServer(t, Options{})
	var e errorBody
	assert.Equal(t, http.StatusNotImplemented, xPost(t, hs.URL+"/rerank", map[string]any{"query": "q", "documents": []string{"a"}}, &e))
	assert.Equal(t, errNotSupported, e.Error.Type)
}
