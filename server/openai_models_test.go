package server

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenAIModels lists models with the official client, with an API key
// configured: as llama-server's, the list needs the key.
func TestOpenAIModels(t *testing.T) {
	_, ts := newTestServer(t, Options{Alias: "tiny-stories", APIKeys: []string{"k"}})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	page, err := client.Models.List(context.Background())
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	assert.Equal(t, "tiny-stories", page.Data[0].ID)
	assert.Equal(t, "model", string(page.Data[0].Object))

	// Retrieval: out of router mode any name is the one model, as
	// generation requests take any name; the path may hold slashes.
	for _, name := range []string{"tiny-stories", "gpt-4o", "org/repo:Q4_K_M", "/models/x.gguf"} {
		m, err := client.Models.Get(context.Background(), name)
		require.NoError(t, err, name)
		assert.Equal(t, "tiny-stories", m.ID, name)
	}
	_, err = client.Models.Get(context.Background(), "")
	require.Error(t, err, "no name")

	noKey := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err = noKey.Models.List(context.Background())
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr, "listing models needs the key")
	assert.Equal(t, 401, apiErr.StatusCode)
	_, err = noKey.Models.Get(context.Background(), "tiny-stories")
	require.ErrorAs(t, err, &apiErr, "retrieving a model needs the key")
	assert.Equal(t, 401, apiErr.StatusCode)
	_, err = noKey.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "tiny-stories",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
	})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 401, apiErr.StatusCode)
}
