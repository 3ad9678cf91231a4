package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/x/llama"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The official OpenAI Go client, unchanged, against the server.
func TestOpenAIClient(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()

	t.Run("chat", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:       "stories",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You tell stories."), openai.UserMessage("Tell me a story.")},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(16),
		})
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		assert.Equal(t, "stories", resp.Model)
		assert.Equal(t, "chat.completion", string(resp.Object))
		assert.NotEmpty(t, resp.Choices[0].Message.Content)
		assert.Equal(t, "length", resp.Choices[0].FinishReason)
		assert.Equal(t, int64(16), resp.Usage.CompletionTokens)
		assert.Greater(t, resp.Usage.PromptTokens, int64(5))
		assert.Equal(t, resp.Usage.PromptTokens+16, resp.Usage.TotalTokens)
	})

	t.Run("chat stream", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
			Temperature:   openai.Float(0),
			MaxTokens:     openai.Int(16),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		require.NoError(t, stream.Err())
		assert.Greater(t, chunks, 3)
		require.Len(t, acc.Choices, 1)
		assert.Equal(t, "length", acc.Choices[0].FinishReason)
		assert.Equal(t, int64(16), acc.Usage.CompletionTokens)
		// The same request without streaming gives the same text.
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
		whole, err := client.Chat.Completions.New(ctx, params)
		require.NoError(t, err)
		assert.Equal(t, whole.Choices[0].Message.Content, acc.Choices[0].Message.Content)
	})

	t.Run("completions", func(t *testing.T) {
		resp, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:       "stories",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(32),
		})
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		assert.True(t, strings.HasPrefix(resp.Choices[0].Text, ", there was a little girl named Lily"), resp.Choices[0].Text)
		assert.Equal(t, openai.CompletionChoiceFinishReasonLength, resp.Choices[0].FinishReason)
		assert.Equal(t, int64(32), resp.Usage.CompletionTokens)

		stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model:       "stories",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(32),
		})
		var text strings.Builder
		for stream.Next() {
			for _, c := range stream.Current().Choices {
				text.WriteString(c.Text)
			}
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, resp.Choices[0].Text, text.String())
	})

	t.Run("completions logprobs", func(t *testing.T) {
		params := openai.CompletionNewParams{
			Model:       "stories",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(8),
			Logprobs:    openai.Int(3),
		}
		resp, err := client.Completions.New(ctx, params)
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		c := resp.Choices[0]
		lp := c.Logprobs
		require.True(t, lp.JSON.Tokens.Valid() && lp.JSON.TokenLogprobs.Valid() && lp.JSON.TopLogprobs.Valid() && lp.JSON.TextOffset.Valid(), lp.RawJSON())
		require.Len(t, lp.Tokens, 8)
		require.Len(t, lp.TokenLogprobs, 8)
		require.Len(t, lp.TopLogprobs, 8)
		require.Len(t, lp.TextOffset, 8)
		assert.Equal(t, c.Text, strings.Join(lp.Tokens, ""))
		for i, tok := range lp.Tokens {
			assert.Equal(t, c.Text[:lp.TextOffset[i]]+tok, c.Text[:int(lp.TextOffset[i])+len(tok)], "offset %d", i)
			assert.LessOrEqual(t, lp.TokenLogprobs[i], 0.0)
			assert.NotEmpty(t, lp.TopLogprobs[i])
			assert.LessOrEqual(t, len(lp.TopLogprobs[i]), 3)
			// Greedy: the sampled token is the most likely one.
			best := -1e30
			for _, v := range lp.TopLogprobs[i] {
				best = max(best, v)
			}
			assert.InDelta(t, best, lp.TokenLogprobs[i], 1e-5)
			assert.InDelta(t, lp.TokenLogprobs[i], lp.TopLogprobs[i][tok], 1e-5)
		}

		stream := client.Completions.NewStreaming(ctx, params)
		var tokens []string
		var offsets []int64
		for stream.Next() {
			for _, c := range stream.Current().Choices {
				tokens = append(tokens, c.Logprobs.Tokens...)
				offsets = append(offsets, c.Logprobs.TextOffset...)
			}
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, lp.Tokens, tokens)
		assert.Equal(t, lp.TextOffset, offsets)
	})

	weather := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string", "enum": []string{"Paris", "London", "Tokyo"}},
			"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
		},
		"required":             []string{"city", "days"},
		"additionalProperties": false,
	}

	// stories260K's template has no tool-call format (tools get free
	// text, as in llama-server): the calls run on a template that has one.
	_, toolsTS := newTestServer(t, Options{ChatTemplate: genericToolsTemplate})
	toolsClient := openai.NewClient(option.WithBaseURL(toolsTS.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))

	t.Run("tool call", func(t *testing.T) {
		resp, err := toolsClient.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: "get_weather", Description: openai.String("Weather forecast"), Parameters: weather,
			})},
			ToolChoice:  openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(200),
		})
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		c := resp.Choices[0]
		assert.Equal(t, "tool_calls", c.FinishReason)
		require.Len(t, c.Message.ToolCalls, 1)
		call := c.Message.ToolCalls[0]
		assert.Equal(t, "get_weather", call.Function.Name)
		assert.NotEmpty(t, call.ID)
		var args struct {
			City string `json:"city"`
			Days int    `json:"days"`
		}
		require.NoError(t, json.Unmarshal([]byte(call.Function.Arguments), &args), call.Function.Arguments)
		assert.Contains(t, []string{"Paris", "London", "Tokyo"}, args.City)
		assert.True(t, args.Days >= 1 && args.Days <= 7, "days %d", args.Days)
	})

	t.Run("response_format json_schema", func(t *testing.T) {
		schema := map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name": map[string]any{"type": "string", "maxLength": 12},
				"age":  map[string]any{"type": "integer", "minimum": 0, "maximum": 120},
			},
			"required":             []string{"name", "age"},
			"additionalProperties": false,
		}
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe a person.")},
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema},
			}},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(200),
		})
		require.NoError(t, err)
		c := resp.Choices[0]
		assert.Equal(t, "stop", c.FinishReason)
		var person struct {
			Name *string `json:"name"`
			Age  *int    `json:"age"`
		}
		require.NoError(t, json.Unmarshal([]byte(c.Message.Content), &person), c.Message.Content)
		require.NotNil(t, person.Name)
		require.NotNil(t, person.Age)
		assert.LessOrEqual(t, len([]rune(*person.Name)), 12)
	})
}

// TestOpenAICompletionEcho: echo puts the prompt before the answer, and
// with logprobs gives the prompt's tokens theirs (the first null), as
// evaluation harnesses score a text: a continuation's log probability is
// the sum over its tokens, read whole or streamed.
func TestOpenAICompletionEcho(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	e, _ := s.models.Lookup("")
	m := s.models.View(e).Inst.Model
	// The echo is the prompt's text as it was written: without the BOS,
	// and without the space a SentencePiece vocabulary puts before the
	// first word.
	const text = "Once upon a time, there was a little girl"
	prompt, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	params := func(echo bool, logprobs int64) openai.CompletionNewParams {
		p := openai.CompletionNewParams{Model: "stories", MaxTokens: openai.Int(3), Temperature: openai.Float(0), Echo: openai.Bool(echo),
			Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: toInt64s(prompt)}}
		if logprobs > 0 {
			p.Logprobs = openai.Int(logprobs)
		}
		return p
	}
	plain, err := client.Completions.New(ctx, params(false, 2))
	require.NoError(t, err)

	echoed, err := client.Completions.New(ctx, params(true, 0))
	require.NoError(t, err)
	assert.Equal(t, text+plain.Choices[0].Text, echoed.Choices[0].Text)
	byText, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "stories", MaxTokens: openai.Int(3), Temperature: openai.Float(0),
		Echo: openai.Bool(true), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(text)}})
	require.NoError(t, err)
	assert.Equal(t, echoed.Choices[0].Text, byText.Choices[0].Text)

	// The raw answer: the first token's log probability is null, its top
	// ones an empty object (a null there makes OpenAI's Go SDK drop them all).
	code, raw := postJSON(t, ts.URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 3, "temperature": 0, "echo": true, "logprobs": 2})
	require.Equal(t, 200, code, "%v", raw)
	lp := raw["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	assert.Nil(t, lp["token_logprobs"].([]any)[0])
	assert.Equal(t, map[string]any{}, lp["top_logprobs"].([]any)[0])

	c, err := client.Completions.New(ctx, params(true, 2))
	require.NoError(t, err)
	got := c.Choices[0].Logprobs
	require.Len(t, got.Tokens, len(prompt)+3)
	require.Len(t, got.TokenLogprobs, len(prompt)+3)
	require.Len(t, got.TextOffset, len(prompt)+3)
	// The answer's part is the plain answer's.
	want := plain.Choices[0].Logprobs
	assert.Equal(t, want.Tokens, got.Tokens[len(prompt):])
	assert.InDeltaSlice(t, want.TokenLogprobs, got.TokenLogprobs[len(prompt):], 1e-4)
	sum := 0.0
	for i := 1; i < len(prompt); i++ {
		v := got.TokenLogprobs[i]
		assert.Less(t, v, 0.0, "token %d", i)
		sum += v
		assert.Len(t, got.TopLogprobs[i], 2)
		assert.GreaterOrEqual(t, got.TextOffset[i], got.TextOffset[i-1])
		piece, err := m.TokenPiece(prompt[i], true)
		require.NoError(t, err)
		assert.Equal(t, piece, got.Tokens[i])
	}
	assert.Less(t, sum, 0.0)

	// Streamed: the prompt in a chunk of its own, then the answer.
	stream := client.Completions.NewStreaming(ctx, params(true, 2))
	var streamed strings.Builder
	var lps []float64
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			streamed.WriteString(ch.Text)
			lps = append(lps, ch.Logprobs.TokenLogprobs...)
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, c.Choices[0].Text, streamed.String())
	assert.InDeltaSlice(t, got.TokenLogprobs, lps, 1e-4)

	// lm-evaluation-harness's loglikelihood request: one token, top 1.
	code, raw = postJSON(t, ts.URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1, "temperature": 0, "echo": true, "logprobs": 1, "seed": 1234})
	require.Equal(t, 200, code, "%v", raw)
	lp = raw["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	assert.Len(t, lp["token_logprobs"], len(prompt)+1)

	code, raw = postJSON(t, ts.URL+"/v1/completions", map[string]any{"prompt": "x", "echo": true, "suffix": "y"})
	assert.Equal(t, 400, code)
	assert.Equal(t, `"echo" cannot be used with "suffix"`, raw["error"].(map[string]any)["message"])
}

func toInt64s(toks []llama.Token) []int64 {
	out := make([]int64, len(toks))
	for i, t := range toks {
		out[i] = int64(t)
	}
	return out
}

// TestOpenAILogprobsNoAlternatives: logprobs with no top alternatives
// (chat's top_logprobs 0, completions' logprobs 0) still give each
// token's own log probability, with an empty list of alternatives, as
// OpenAI does; and echo with logprobs 0 scores the prompt.
func TestOpenAILogprobsNoAlternatives(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	code, out := postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}},
		"max_tokens": 3, "logprobs": true, "top_logprobs": 0, "temperature": 0})
	require.Equal(t, 200, code, "%v", out)
	content := out["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)["content"].([]any)
	require.Len(t, content, 3)
	for _, c := range content {
		c := c.(map[string]any)
		assert.Less(t, c["logprob"].(float64), 0.0)
		assert.Equal(t, []any{}, c["top_logprobs"])
	}

	for _, echo := range []bool{false, true} {
		code, out = postJSON(t, ts.URL+"/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 3, "logprobs": 0, "echo": echo, "temperature": 0})
		require.Equal(t, 200, code, "%v", out)
		lp := out["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
		n := len(lp["tokens"].([]any))
		if echo {
			assert.Greater(t, n, 3)
		} else {
			assert.Equal(t, 3, n)
		}
		for i, v := range lp["token_logprobs"].([]any) {
			if echo && i == 0 {
				assert.Nil(t, v)
				continue
			}
			assert.Less(t, v.(float64), 0.0, "token %d", i)
			assert.Equal(t, map[string]any{}, lp["top_logprobs"].([]any)[i])
		}
	}
}
