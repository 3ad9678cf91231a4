//go:build realmodel

package server

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// TestRealModelRerankDiff sends /rerank to llama-server and to ours serving
// all-MiniLM-L6-v2, an embedding model without a ranking head. Started for
// embeddings, both refuse it with the same status and error type. Started
// with --reranking, llama-server loads it anyway (rank pooling over a model
// without a classifier) and answers scores; ours must answer the same way.
func TestRealModelRerankDiff(t *testing.T) {
	model := testenv.RealModel(t, "all-minilm-l6-v2")
	bin := testenv.LlamaServer(t)
	body := map[string]any{"query": "What is the capital of France?",
		"documents": []string{"Paris is the capital of France.", "Bananas are yellow.", "Berlin is in Germany."}}

	t.Run("embedding-server", func(t *testing.T) {
		ref := testenv.RunHTTPServer(t, bin, "", "-m", model, "--embeddings", "--pooling", "mean",
			"-c", "512", "-np", "1", "-t", "1", "-tb", "1")
		_, ts := newTestServer(t, Options{Model: model, Engine: engine.Options{
			Embedding: true, Context: llama.ContextOptions{Pooling: llama.PoolingMean, ContextSize: 512, Threads: 1, ThreadsBatch: 1}, Parallel: 1}})
		p := diffPair{ref: ref, ours: ts.URL}
		for _, path := range []string{"/rerank", "/v1/rerank", "/reranking"} {
			rc, r, oc, o := p.both(t, path, body)
			require.NotEqual(t, 200, rc, "%s: llama-server answered %v", path, r)
			require.Equal(t, rc, oc, "%s: status\n  llama-server: %v\n  ours: %v", path, r, o)
			require.Equal(t, errorShape(r), errorShape(o), "%s: error\n  llama-server: %v\n  ours: %v", path, r, o)
		}
	})

	t.Run("reranking-server", func(t *testing.T) {
		ref := testenv.RunHTTPServer(t, bin, "", "-m", model, "--reranking", "-c", "512", "-np", "1", "-t", "1", "-tb", "1")
		_, ts := newTestServer(t, Options{Model: model, Engine: engine.Options{
			Embedding: true, Reranking: true, Parallel: 1, Context: llama.ContextOptions{ContextSize: 512, Threads: 1, ThreadsBatch: 1}}})
		p := diffPair{ref: ref, ours: ts.URL}
		rc, r, oc, o := p.both(t, "/rerank", body)
		require.Equal(t, rc, oc, "status\n  llama-server: %v\n  ours: %v", r, o)
		if rc != 200 {
			require.Equal(t, errorShape(r), errorShape(o))
			return
		}
		rr, or := r.(map[string]any), o.(map[string]any)
		require.Equal(t, rr["usage"], or["usage"])
		scores := func(m map[string]any) map[float64]float64 {
			out := map[float64]float64{}
			for _, x := range m["results"].([]any) {
				xm := x.(map[string]any)
				out[xm["index"].(float64)] = xm["relevance_score"].(float64)
			}
			return out
		}
		rs, os := scores(rr), scores(or)
		require.Len(t, os, len(rs))
		for i, s := range rs {
			require.InDelta(t, s, os[i], 1e-4*math.Max(1, math.Abs(s)), "document %v", i)
		}
	})
}
