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

	noKey := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err = noKey.Models.List(context.Background())
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr, "listing models needs the key")
	assert.Equal(t, 401, apiErr.StatusCode)
	_, err = noKey.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "tiny-stories",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
	})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 401, apiErr.StatusCode)
}
