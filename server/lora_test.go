package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/x/llama/engine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/internal/gguf/gguftest"
	"github.com/x/llama/internal/testenv"
)

// directGreedy generates n tokens greedily from prompt on a context of its
// own, with the adapter at scale (none when adapter is "").
func directGreedy(t *testing.T, prompt string, n int, adapter string, scale float32) string {
	t.Helper()
	m, err := llama.LoadModel(context.Background(), testenv.Model(t, "stories260K.gguf"), llama.ModelOptions{})
	require.NoError(t, err)
	defer m.Close()
	c, err := m.NewContext(llama.ContextOptions{ContextSize: 256, Threads: 1})
	require.NoError(t, err)
	if adapter != "" {
		a, err := m.LoadAdapter(adapter)
		require.NoError(t, err)
		require.NoError(t, c.SetAdapters([]llama.AdapterScale{{Adapter: a, Scale: scale}}))
	}
	text := ""
	for p, err := range c.Generate(context.Background(), prompt, llama.GenerateOptions{MaxTokens: n}).Seq() {
		require.NoError(t, err)
		text += p.Text
	}
	return text
}

type completionAnswer struct {
	Content string `json:"content"`
}

func greedyCompletion(t *testing.T, url, prompt string, n int, extra map[string]any) string {
	t.Helper()
	body := map[string]any{"prompt": prompt, "n_predict": n, "temperature": 0, "cache_prompt": false}
	for k, v := range extra {
		body[k] = v
	}
	var res completionAnswer
	require.Equal(t, http.StatusOK, xPost(t, url+"/completion", body, &res))
	return res.Content
}

func TestLoRAAdapters(t *testing.T) {
	lora := gguftest.StoriesLoRA(t)
	const prompt, n = "Once upon a time", 16
	base := directGreedy(t, prompt, n, "", 0)
	withLoRA := directGreedy(t, prompt, n, lora, 4)
	require.NotEqual(t, base, withLoRA, "the adapter changes the output at scale 4")
	require.Equal(t, base, directGreedy(t, prompt, n, lora, 0), "scale 0 is the base model")

	srv, hs := newTestServer(t, Options{Engine: engine.Options{Adapters: []engine.AdapterSpec{{Path: lora, Scale: 1}}}})
	url := hs.URL
	modelPtr := func() *llama.Model {
		e, _ := srv.models.Lookup("")
		inst := srv.models.View(e).Inst
		require.NotNil(t, inst)
		return inst.Model
	}
	m0 := modelPtr()

	var list []engine.AdapterInfo
	require.Equal(t, http.StatusOK, xGet(t, url+"/lora-adapters", &list))
	require.Len(t, list, 1)
	assert.Equal(t, engine.AdapterInfo{ID: 0, Path: lora, Scale: 1}, list[0])

	// Per request: scale 0 is the base model, a large scale changes it.
	assert.Equal(t, base, greedyCompletion(t, url, prompt, n, map[string]any{"lora": []map[string]any{{"id": 0, "scale": 0}}}))
	assert.Equal(t, withLoRA, greedyCompletion(t, url, prompt, n, map[string]any{"lora": []map[string]any{{"id": 0, "scale": 4}}}))

	// Server-wide scales: POST changes what requests without "lora" get.
	for _, tc := range []struct {
		scale float32
		want  string
	}{{0, base}, {4, withLoRA}, {0, base}} {
		require.Equal(t, http.StatusOK, xPost(t, url+"/lora-adapters", []map[string]any{{"id": 0, "scale": tc.scale}}, nil))
		require.Equal(t, http.StatusOK, xGet(t, url+"/lora-adapters", &list))
		assert.Equal(t, tc.scale, list[0].Scale)
		assert.Equal(t, tc.want, greedyCompletion(t, url, prompt, n, nil), "server scale %v", tc.scale)
	}
	// A request's own scale wins over the server's.
	assert.Equal(t, withLoRA, greedyCompletion(t, url, prompt, n, map[string]any{"lora": []map[string]any{{"id": 0, "scale": 4}}}))
	assert.Equal(t, base, greedyCompletion(t, url, prompt, n, nil), "and does not stick")

	// Bad ids and shapes are 400s.
	for _, bad := range []any{
		map[string]any{"lora": []map[string]any{{"id": 5, "scale": 1}}},
		map[string]any{"lora": []map[string]any{{"id": -1, "scale": 1}}},
		map[string]any{"lora": "x"},
		map[string]any{"lora": []map[string]any{{"scale": 1}}},
	} {
		body := map[string]any{"prompt": prompt, "n_predict": 1}
		for k, v := range bad.(map[string]any) {
			body[k] = v
		}
		var e errorBody
		assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/completion", body, &e), "%v", bad)
	}
	var e errorBody
	assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/lora-adapters", []map[string]any{{"id": 3, "scale": 1}}, &e))
	assert.Equal(t, http.StatusBadRequest, xPost(t, url+"/lora-adapters", map[string]any{"id": 0}, &e))

	assert.Same(t, m0, modelPtr(), "changing adapters never reloads the model")
}
