package server

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/x/llama/engine"
	"github.com/x/llama/internal/gguf"

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
	s, ts := newTestServer(t, Options{Model: model, ChatTemplate: "chatml", Engine: engine.Options{
		Embedding: true, Context: llama.ContextOptions{Pooling: llama.PoolingMean, ContextSize: 1024}, Parallel: 2,
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

// TestSpecialTokensOutput checks -sp: control tokens come out as text.
func TestSpecialTokensOutput(t *testing.T) {
	for _, special := range []bool{false, true} {
		_, ts := newTestServer(t, Options{Engine: engine.Options{Parallel: 1, Special: special}})
		// A bias that forces the BOS token (a control token, not an end of
		// generation one) as the first generated token.
		code, out := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once", "n_predict": 1, "logit_bias": [][]any{{1, 100}}})
		require.Equal(t, http.StatusOK, code, "%v", out)
		if special {
			assert.NotEmpty(t, out["content"], "BOS as text")
		} else {
			assert.Empty(t, out["content"])
		}
	}
}

// TestEmbdNormalizeDefault checks --embd-normalize: the default of
// requests that give no embd_normalize.
func TestEmbdNormalizeDefault(t *testing.T) {
	none := -1
	path := writeTinyBert(t, 0, gguf.PoolingCLS)
	_, ts := newTestServer(t, Options{Model: path, EmbdNormalize: &none, Engine: engine.Options{Embedding: true, Context: llama.ContextOptions{ContextSize: 512}}})
	var raw, norm []nativeEmbedding
	require.Equal(t, http.StatusOK, xPost(t, ts.URL+"/embedding", map[string]any{"content": "hello world"}, &raw))
	require.Equal(t, http.StatusOK, xPost(t, ts.URL+"/embedding", map[string]any{"content": "hello world", "embd_normalize": 2}, &norm))
	assert.InDelta(t, 1, norm2(norm[0].Embedding[0]), 1e-4)
	assert.Greater(t, math.Abs(norm2(raw[0].Embedding[0])-1), 1e-3, "not normalized by default")
}

// TestChatTemplateKwargsDefault checks --chat-template-kwargs (and
// --reasoning): template variables every request gets unless it sets them.
func TestChatTemplateKwargsDefault(t *testing.T) {
	_, ts := newTestServer(t, Options{ChatTemplate: "{{ x }}|{{ y }}", ChatTemplateKwargs: map[string]any{"x": "server", "y": "default"}})
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	code, out := postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": msgs})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, "server|default", out["prompt"])
	code, out = postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"x": "request"}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	assert.Equal(t, "request|default", out["prompt"])
}

// TestModelAliasesTags checks -a a,b,c and --tags in /v1/models.
func TestModelAliasesTags(t *testing.T) {
	for _, tc := range []struct {
		o             Options
		id            string
		aliases, tags []any
	}{
		{Options{Alias: "tinyllama-2,code,fim", Tags: []string{"chat", "small"}}, "code",
			[]any{"code", "fim", "tinyllama-2"}, []any{"chat", "small"}},
		{Options{Alias: "tiny"}, "tiny", []any{"tiny"}, []any{}},
	} {
		_, ts := newTestServer(t, tc.o)
		code, out := getJSON(t, ts.URL+"/v1/models")
		require.Equal(t, http.StatusOK, code)
		m := out["data"].([]any)[0].(map[string]any)
		assert.Equal(t, tc.id, m["id"])
		assert.Equal(t, tc.aliases, m["aliases"])
		assert.Equal(t, tc.tags, m["tags"])
	}
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	code, data := call(t, "GET", url, nil, nil)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "%s", data)
	return code, out
}
