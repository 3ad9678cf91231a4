package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func anthClient(url string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(url+"/"), aoption.WithAPIKey("none"), aoption.WithMaxRetries(0))
}

// lastToolUse returns the last tool_use block of content (nil: none).
func lastToolUse(content []anthropic.ContentBlockUnion) *anthropic.ContentBlockUnion {
	var use *anthropic.ContentBlockUnion
	for i := range content {
		if content[i].Type == "tool_use" {
			use = &content[i]
		}
	}
	return use
}

func TestAnthropicMessages(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	ctx := context.Background()
	client := anthClient(hs.URL)
	params := anthropic.MessageNewParams{
		Model:       "stories",
		MaxTokens:   12,
		System:      []anthropic.TextBlockParam{{Text: "You tell stories."}},
		Messages:    []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Once upon a time"))},
		Temperature: anthropic.Float(0),
	}
	msg, err := client.Messages.New(ctx, params)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(msg.ID, "msg_"))
	assert.Equal(t, "stories", string(msg.Model))
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "text", msg.Content[0].Type)
	assert.NotEmpty(t, msg.Content[0].Text)
	assert.Equal(t, anthropic.StopReasonMaxTokens, msg.StopReason)
	assert.EqualValues(t, 12, msg.Usage.OutputTokens)
	assert.Greater(t, msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens, int64(5))

	// The same conversation through the OpenAI chat endpoint gives the same text.
	var oai struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/chat/completions", map[string]any{
		"messages":   []map[string]any{{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Once upon a time"}},
		"max_tokens": 12, "temperature": 0,
	}, &oai))
	require.Len(t, oai.Choices, 1)
	assert.Equal(t, oai.Choices[0].Message.Content, msg.Content[0].Text)

	// count_tokens counts the rendered prompt.
	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    "stories",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: "You tell stories."}}},
		Messages: params.Messages,
	})
	require.NoError(t, err)
	assert.Equal(t, msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens, count.InputTokens)

	// Streaming: the accumulated message equals the plain one.
	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	var kinds []string
	for stream.Next() {
		ev := stream.Current()
		kinds = append(kinds, ev.Type)
		require.NoError(t, acc.Accumulate(ev))
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Content, 1)
	assert.Equal(t, msg.Content[0].Text, acc.Content[0].Text)
	assert.Equal(t, anthropic.StopReasonMaxTokens, acc.StopReason)
	assert.EqualValues(t, 12, acc.Usage.OutputTokens)
	require.GreaterOrEqual(t, len(kinds), 5)
	assert.Equal(t, []string{"message_start", "content_block_start"}, kinds[:2])
	assert.Equal(t, []string{"content_block_stop", "message_delta", "message_stop"}, kinds[len(kinds)-3:])

	// On the wire: event names match the data's type; a ping follows message_start.
	raw := xSSE(t, hs.URL+"/v1/messages", map[string]any{
		"max_tokens": 3, "stream": true, "messages": []map[string]any{{"role": "user", "content": "Hi"}},
	})
	require.GreaterOrEqual(t, len(raw), 7)
	assert.Equal(t, "message_start", raw[0].Name)
	assert.Equal(t, "ping", raw[1].Name)
	for _, e := range raw {
		var d struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
		assert.Equal(t, e.Name, d.Type)
	}

	// A stop sequence.
	stopped := params
	stopped.MaxTokens = 40
	stopped.StopSequences = []string{strings.Fields(msg.Content[0].Text)[1]}
	sm, err := client.Messages.New(ctx, stopped)
	require.NoError(t, err)
	assert.Equal(t, anthropic.StopReasonStopSequence, sm.StopReason)
	assert.Equal(t, stopped.StopSequences[0], sm.StopSequence)
}

func TestAnthropicToolRoundTrip(t *testing.T) {
	_, hs := newTestServer(t, Options{ChatTemplate: genericToolsTemplate})
	ctx := context.Background()
	client := anthClient(hs.URL)
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        "get_weather",
		Description: anthropic.String("Weather of a city"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string", "maxLength": 8}},
			Required:   []string{"city"},
		},
	}}}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}
	params := anthropic.MessageNewParams{
		Model: "stories", MaxTokens: 200, Messages: msgs, Tools: tools,
		ToolChoice: anthropic.ToolChoiceParamOfTool("get_weather"), Temperature: anthropic.Float(0),
	}
	msg, err := client.Messages.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	use := lastToolUse(msg.Content)
	require.NotNil(t, use, "a tool_use block")
	assert.Equal(t, "get_weather", use.Name)
	assert.NotEmpty(t, use.ID)
	var input map[string]any
	require.NoError(t, json.Unmarshal(use.Input, &input), "input is valid JSON: %s", use.Input)
	city, ok := input["city"].(string)
	assert.True(t, ok, "city is a string: %s", use.Input)

	// Streaming the same request: the tool input arrives as input_json_delta.
	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	sawJSONDelta := false
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
			sawJSONDelta = true
		}
		require.NoError(t, acc.Accumulate(ev))
	}
	require.NoError(t, stream.Err())
	assert.True(t, sawJSONDelta)
	assert.Equal(t, anthropic.StopReasonToolUse, acc.StopReason)
	streamedUse := lastToolUse(acc.Content)
	require.NotNil(t, streamedUse)
	assert.JSONEq(t, string(use.Input), string(streamedUse.Input))

	// The tool's result goes back; the model answers in text.
	msgs = append(msgs, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "Sunny in "+city, false)))
	final, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "stories", MaxTokens: 10, Messages: msgs, Tools: tools, Temperature: anthropic.Float(0),
		ToolChoice: anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}},
	})
	require.NoError(t, err)
	require.NotEmpty(t, final.Content)
	assert.Equal(t, "text", final.Content[0].Type)
	assert.NotEmpty(t, final.Content[0].Text)
	assert.Equal(t, anthropic.StopReasonMaxTokens, final.StopReason)
	// The tool use and its result reached the prompt.
	count := func(m []anthropic.MessageParam) int64 {
		c, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model: "stories", Messages: m,
			Tools:      []anthropic.MessageCountTokensToolUnionParam{{OfTool: tools[0].OfTool}},
			ToolChoice: anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}},
		})
		require.NoError(t, err)
		return c.InputTokens
	}
	assert.Equal(t, count(msgs), final.Usage.InputTokens+final.Usage.CacheReadInputTokens)
	assert.Greater(t, count(msgs), count(msgs[:1])+10)
}

// TestAnthropicDocuments: the official client's text documents and search
// results reach the prompt as the text they hold (llama-server drops
// them unseen): counted as the same text sent as text blocks. A PDF is
// refused, not dropped.
func TestAnthropicDocuments(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	ctx := context.Background()
	client := anthClient(hs.URL)
	count := func(blocks ...anthropic.ContentBlockParamUnion) int64 {
		t.Helper()
		n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "stories",
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(blocks...)}})
		require.NoError(t, err)
		return n.InputTokens
	}
	question := anthropic.NewTextBlock("What color is the sky?")
	doc := anthropic.ContentBlockParamUnion{OfDocument: &anthropic.DocumentBlockParam{Title: anthropic.String("Notes"),
		Source: anthropic.DocumentBlockParamSourceUnion{OfText: &anthropic.PlainTextSourceParam{Data: "The sky is green."}}}}
	result := anthropic.NewSearchResultBlock([]anthropic.TextBlockParam{{Text: "Grass is blue."}}, "https://example.org/a", "Colors")
	assert.Equal(t, count(anthropic.NewTextBlock("Notes\n\nThe sky is green."), question), count(doc, question))
	assert.Equal(t, count(anthropic.NewTextBlock("Colors\n\nhttps://example.org/a\n\nGrass is blue."), question), count(result, question))
	assert.Greater(t, count(doc, question), count(question))

	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "stories", MaxTokens: 4,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(doc, question)}})
	require.NoError(t, err)
	assert.EqualValues(t, 4, msg.Usage.OutputTokens)

	pdf := anthropic.ContentBlockParamUnion{OfDocument: &anthropic.DocumentBlockParam{
		Source: anthropic.DocumentBlockParamSourceUnion{OfBase64: &anthropic.Base64PDFSourceParam{Data: "JVBERi0xLjQK"}}}}
	_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: "stories", MaxTokens: 4,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(pdf, question)}})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, apiErr.Error(), `document source type \"base64\" (application/pdf) cannot be read by this server`)
}

func TestAnthropicErrors(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	tests := []struct {
		name   string
		body   string
		status int
	}{
		{"not json", `{`, 400},
		{"no messages", `{"max_tokens":5}`, 400},
		{"bad role", `{"max_tokens":5,"messages":[{"role":"robot","content":"hi"}]}`, 400},
		{"block without type", `{"max_tokens":5,"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, 400},
		{"content a number", `{"max_tokens":5,"messages":[{"role":"user","content":5}]}`, 400},
		{"system a number", `{"max_tokens":5,"system":3,"messages":[{"role":"user","content":"hi"}]}`, 400},
		{"tool without name", `{"max_tokens":5,"tools":[{"input_schema":{}}],"messages":[{"role":"user","content":"hi"}]}`, 400},
		{"forced unknown tool", `{"max_tokens":5,"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"b"},"messages":[{"role":"user","content":"hi"}]}`, 400},
		{"tool_use input not an object", `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"a","input":3}]}]}`, 400},
		{"huge max_tokens type", `{"max_tokens":"many","messages":[{"role":"user","content":"hi"}]}`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(hs.URL+"/v1/messages", "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			defer resp.Body.Close()
			var e anthErrorBody
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			if tc.status != 0 {
				assert.Equal(t, tc.status, resp.StatusCode)
			} else {
				assert.GreaterOrEqual(t, resp.StatusCode, 400)
			}
			assert.Equal(t, "error", e.Type)
			assert.NotEmpty(t, e.Error.Type)
			assert.NotEmpty(t, e.Error.Message)
		})
	}
	// The SDK reads these errors.
	client := anthClient(hs.URL)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "stories", MaxTokens: 5,
		Messages:   []anthropic.MessageParam{{Role: "user", Content: []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("hi")}}},
		Tools:      []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "a", InputSchema: anthropic.ToolInputSchemaParam{}}}},
		ToolChoice: anthropic.ToolChoiceParamOfTool("zzz"),
	})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
}

// TestAnthropicErrorMessages pins the messages of errors found after the
// conversion to the internal chat request: the sampling fields are checked
// as llama.cpp's fields of the same meaning, and converted messages and
// tools as the chat endpoint checks them.
func TestAnthropicErrorMessages(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body, msg string
	}{
		{"temperature out of float32", `{"max_tokens":5,"temperature":1e39,` + hi + `}`, `"temperature" is out of range`},
		{"top_k beyond int32", `{"max_tokens":5,"top_k":3000000000,` + hi + `}`, `"top_k" must be between -2147483648 and 2147483647, got 3000000000`},
		{"max_tokens beyond int32", `{"max_tokens":3000000000,` + hi + `}`, `"max_tokens" must be between -1 and 2147483647, got 3000000000`},
		{"tool_use without name", `{"max_tokens":5,"system":"s","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"x","input":{}}]}]}`,
			"messages[2].tool_calls[0] has no function name"},
		{"any without tools", `{"max_tokens":5,"tool_choice":{"type":"any"},` + hi + `}`, `"tool_choice" "required" needs "tools"`},
		{"schema not an object", `{"max_tokens":5,"tools":[{"name":"a","input_schema":3}],` + hi + `}`, "tools[0].function.parameters must be a JSON Schema object"},
		{"thinking flag not a bool", `{"max_tokens":5,"chat_template_kwargs":{"enable_thinking":"yes"},` + hi + `}`, `invalid type for "enable_thinking" (expected boolean)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, route := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
				resp, err := http.Post(hs.URL+route, "application/json", strings.NewReader(tc.body))
				require.NoError(t, err)
				var e anthErrorBody
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
				resp.Body.Close()
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, route)
				assert.Equal(t, "invalid_request_error", e.Error.Type, route)
				assert.Equal(t, tc.msg, e.Error.Message, route)
			}
		})
	}
}
