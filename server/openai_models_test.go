package server

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenAIModels lists and gets models with the official client, with an
// API key configured (GET /v1/models is public, GET /v1/models/{id} too).
func TestOpenAIModels(t *testing.T) {
	_, ts := newTestServer(t, Options{Alias: "tiny-stories", APIKeys: []string{"k"}})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	page, err := client.Models.List(context.Background())
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	assert.Equal(t, "tiny-stories", page.Data[0].ID)
	assert.Equal(t, "model", string(page.Data[0].Object))

	noKey := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	page, err = noKey.Models.List(context.Background())
	require.NoError(t, err, "listing models is public")
	assert.Len(t, page.Data, 1)
	_, err = noKey.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "tiny-stories",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 401, apiErr.StatusCode)
}
