package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	respdialect "github.com/x/llama/server/internal/responses"
)

func TestResponses(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(hs.URL+"/v1"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{
		Model:           "stories",
		Instructions:    openai.String("You tell stories."),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Once upon a time")},
		MaxOutputTokens: openai.Int(12),
		Temperature:     openai.Float(0),
	}
	resp, err := client.Responses.New(ctx, params)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(resp.ID, "resp_"))
	// Cut by max_output_tokens: incomplete, as OpenAI's (clients map it
	// to their "length" finish).
	assert.Equal(t, "incomplete", string(resp.Status))
	assert.Equal(t, "max_output_tokens", string(resp.IncompleteDetails.Reason))
	assert.Zero(t, resp.CompletedAt)
	require.Len(t, resp.Output, 1)
	assert.Equal(t, "message", resp.Output[0].Type)
	assert.Equal(t, "incomplete", string(resp.Output[0].Status))
	text := resp.OutputText()
	require.NotEmpty(t, text)
	assert.EqualValues(t, 12, resp.Usage.OutputTokens)
	assert.Equal(t, resp.Usage.InputTokens+resp.Usage.OutputTokens, resp.Usage.TotalTokens)

	// The same conversation as a chat completion gives the same text.
	chatBody := map[string]any{
		"messages":   []map[string]any{{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Once upon a time"}},
		"max_tokens": 12, "temperature": 0,
	}
	var oai struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/chat/completions", chatBody, &oai))
	assert.Equal(t, oai.Choices[0].Message.Content, text)

	// Token counts agree between the two count endpoints and the usage.
	var n1, n2 struct {
		Object      string `json:"object"`
		InputTokens int64  `json:"input_tokens"`
	}
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/chat/completions/input_tokens", chatBody, &n1))
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses/input_tokens", map[string]any{
		"instructions": "You tell stories.", "input": "Once upon a time",
	}, &n2))
	assert.Equal(t, "response.input_tokens", n1.Object)
	assert.Equal(t, resp.Usage.InputTokens, n1.InputTokens)
	assert.Equal(t, n1.InputTokens, n2.InputTokens)

	// Streaming: the events in order, and the text adds up.
	stream := client.Responses.NewStreaming(ctx, params)
	var types []string
	var deltas strings.Builder
	var completed responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			completed = ev.Response
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, text, deltas.String())
	assert.Equal(t, text, completed.OutputText())
	require.GreaterOrEqual(t, len(types), 9)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}, types[:5])
	assert.Equal(t, []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}, types[len(types)-4:])

	// Earlier output items as input: the conversation continues.
	items := responses.ResponseInputParam{
		{OfMessage: &responses.EasyInputMessageParam{Role: "user", Content: responses.EasyInputMessageContentUnionParam{OfString: openai.String("Once upon a time")}}},
		{OfOutputMessage: &responses.ResponseOutputMessageParam{ID: resp.Output[0].ID, Status: "completed",
			Content: []responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{Text: text}}}}},
		{OfMessage: &responses.EasyInputMessageParam{Role: "user", Content: responses.EasyInputMessageContentUnionParam{OfString: openai.String("And then?")}}},
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "stories", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
		MaxOutputTokens: openai.Int(5), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	assert.NotEmpty(t, next.OutputText())
	assert.Greater(t, next.Usage.InputTokens, resp.Usage.InputTokens)
}

func TestResponsesFunctionCall(t *testing.T) {
	_, hs := newTestServer(t, Options{ChatTemplate: genericToolsTemplate})
	tool := map[string]any{"type": "function", "name": "get_weather", "description": "Weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 8}}, "required": []string{"city"}}}
	body := map[string]any{
		"input": "Weather in Paris?", "tools": []any{tool},
		"tool_choice":       map[string]any{"type": "function", "name": "get_weather"},
		"max_output_tokens": 200, "temperature": 0,
	}
	var resp respdialect.Object
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses", body, &resp))
	var call *respdialect.Item
	for i := range resp.Output {
		if resp.Output[i].Type == "function_call" {
			call = &resp.Output[i]
		}
	}
	require.NotNil(t, call, "a function_call item: %+v", resp.Output)
	assert.Equal(t, "get_weather", call.Name)
	assert.NotEmpty(t, call.CallID)
	require.NotNil(t, call.Arguments)
	var args map[string]any
	require.NoError(t, json.Unmarshal([]byte(*call.Arguments), &args))
	assert.IsType(t, "", args["city"])

	// Streamed: the arguments arrive as deltas and the item is done once.
	events := xStream(t, hs.URL+"/v1/responses", merged(body, map[string]any{"stream": true}))
	argDeltas := ""
	doneItems := 0
	for _, e := range events {
		switch e["type"] {
		case "response.function_call_arguments.delta":
			argDeltas += e["delta"].(string)
		case "response.output_item.done":
			if e["item"].(map[string]any)["type"] == "function_call" {
				doneItems++
				assert.JSONEq(t, *call.Arguments, e["item"].(map[string]any)["arguments"].(string))
			}
		}
	}
	assert.JSONEq(t, *call.Arguments, argDeltas)
	assert.Equal(t, 1, doneItems)

	// The call and its output go back as items; the model answers.
	input := []any{
		map[string]any{"role": "user", "content": "Weather in Paris?"},
		map[string]any{"type": "function_call", "call_id": call.CallID, "name": call.Name, "arguments": *call.Arguments},
		map[string]any{"type": "function_call_output", "call_id": call.CallID, "output": "Sunny"},
	}
	var final respdialect.Object
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses", map[string]any{
		"input": input, "tools": []any{tool}, "tool_choice": "none", "max_output_tokens": 6, "temperature": 0,
	}, &final))
	require.NotEmpty(t, final.Output)
	assert.Equal(t, "message", final.Output[0].Type)
	var withCall, without struct {
		InputTokens int `json:"input_tokens"`
	}
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses/input_tokens", map[string]any{"input": input, "tools": []any{tool}, "tool_choice": "none"}, &withCall))
	require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses/input_tokens", map[string]any{"input": input[:1], "tools": []any{tool}, "tool_choice": "none"}, &without))
	assert.Equal(t, withCall.InputTokens, final.Usage.InputTokens)
	assert.Greater(t, withCall.InputTokens, without.InputTokens+5, "the call and its output are in the prompt")
}

// TestResponsesTextFormat: text.format constrains the answer, as
// OpenAI's clients ask for it (responses.parse with a schema), streamed or
// not; a streamed message item is announced with its (empty) content
// list, which the clients' stream accumulators append the parts to.
func TestResponsesTextFormat(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []string{"name", "age"},
		"properties": map[string]any{"name": map[string]any{"type": "string", "maxLength": 6}, "age": map[string]any{"type": "integer", "minimum": 0, "maximum": 99}}}
	for _, tc := range []struct {
		name   string
		format map[string]any
		check  func(t *testing.T, v any)
	}{
		{"json_schema", map[string]any{"type": "json_schema", "name": "person", "strict": true, "schema": schema}, func(t *testing.T, v any) {
			obj, ok := v.(map[string]any)
			require.True(t, ok, "%v", v)
			assert.IsType(t, "", obj["name"])
			assert.IsType(t, float64(0), obj["age"])
			assert.Len(t, obj, 2)
		}},
		{"json_object", map[string]any{"type": "json_object"}, func(t *testing.T, v any) { assert.IsType(t, map[string]any{}, v) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"input": "A person:", "text": map[string]any{"format": tc.format}, "max_output_tokens": 80, "temperature": 0}
			var resp respdialect.Object
			require.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses", body, &resp))
			require.Len(t, resp.Output, 1)
			require.Len(t, resp.Output[0].Content, 1)
			text := resp.Output[0].Content[0].Text
			var v any
			require.NoError(t, json.Unmarshal([]byte(text), &v), "%q", text)
			tc.check(t, v)

			events := xStream(t, hs.URL+"/v1/responses", merged(body, map[string]any{"stream": true}))
			deltas := ""
			for _, e := range events {
				switch e["type"] {
				case "response.output_item.added":
					item := e["item"].(map[string]any)
					assert.Equal(t, "message", item["type"])
					assert.Equal(t, []any{}, item["content"], "a message item is announced with an empty content list")
				case "response.output_text.delta":
					deltas += e["delta"].(string)
				}
			}
			assert.Equal(t, text, deltas)
		})
	}
}

func TestResponsesErrors(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	tests := []struct {
		name string
		body string
	}{
		{"no input", `{}`},
		{"input a number", `{"input":5}`},
		{"previous_response_id", `{"input":"x","previous_response_id":"resp_1"}`},
		{"unknown item", `{"input":[{"type":"magic"}]}`},
		{"bad part", `{"input":[{"role":"user","content":[{"type":"input_file"}]}]}`},
		{"part without text", `{"input":[{"role":"user","content":[{"type":"input_text"}]}]}`},
		{"call without id", `{"input":[{"type":"function_call","name":"a","arguments":"{}"}]}`},
		{"output without id", `{"input":[{"type":"function_call_output","output":"x"}]}`},
		{"bad tool_choice", `{"input":"x","tool_choice":{"type":"file_search"}}`},
		{"bad max_output_tokens", `{"input":"x","max_output_tokens":"many"}`},
		{"instructions a number", `{"input":"x","instructions":3}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, route := range []string{"/v1/responses", "/v1/responses/input_tokens"} {
				resp, err := http.Post(hs.URL+route, "application/json", strings.NewReader(tc.body))
				require.NoError(t, err)
				var e errorBody
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
				resp.Body.Close()
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, route)
				assert.Equal(t, errInvalidRequest, e.Error.Type)
			}
		})
	}
	var e errorBody
	assert.Equal(t, http.StatusBadRequest, xPost(t, hs.URL+"/v1/chat/completions/input_tokens", map[string]any{}, &e))
	assert.Equal(t, http.StatusBadRequest, xPost(t, hs.URL+"/v1/chat/completions/input_tokens", map[string]any{"messages": "x"}, &e))
}

// TestResponsesErrorMessages pins the messages of errors in converted
// fields and in the chat completion fields a Responses body carries.
func TestResponsesErrorMessages(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	tests := []struct {
		name, body, msg string
	}{
		{"max_output_tokens not an integer", `{"input":"x","max_output_tokens":"many"}`, `"max_tokens" must be an integer`},
		{"max_output_tokens beyond int32", `{"input":"x","max_output_tokens":3000000000}`, `"max_tokens" must be between -1 and 2147483647, got 3000000000`},
		{"function tool without name", `{"input":"x","tools":[{"type":"web_search"},{"type":"function","parameters":{}}]}`, `tools[0] must be {"type": "function", "function": {"name": ...}}`},
		{"function tool name a number", `{"input":"x","tools":[{"type":"function","name":3}]}`, `"tools" must be an array of function tools`},
		{"required without function tools", `{"input":"x","tool_choice":"required","tools":[{"type":"web_search"}]}`, `"tool_choice" "required" needs "tools"`},
		{"no messages", `{"input":[]}`, `"messages" is required`},
		{"chat field: temperature", `{"input":"x","temperature":1e39}`, `"temperature" is out of range`},
		{"chat field: logprobs", `{"input":"x","top_logprobs":3}`, `"top_logprobs" requires "logprobs": true`},
		{"chat field: reasoning_effort", `{"input":"x","reasoning_effort":3}`, `"reasoning_effort" must be a string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e errorBody
			assert.Equal(t, http.StatusBadRequest, xPost(t, hs.URL+"/v1/responses", json.RawMessage(tc.body), &e))
			assert.Equal(t, tc.msg, e.Error.Message)
		})
	}
	// reasoning.effort takes the place of a reasoning_effort field.
	var out respdialect.Object
	assert.Equal(t, http.StatusOK, xPost(t, hs.URL+"/v1/responses", json.RawMessage(`{"input":"x","max_output_tokens":2,"reasoning_effort":3,"reasoning":{"effort":"low"}}`), &out))
}

// TestResponsesStreamProgressTimings pins the stream's events around
// llama-server's return_progress and timings_per_token: in_progress events
// carry prompt_progress, only a token's delta events and
// response.completed carry timings, and sequence numbers count every event.
func TestResponsesStreamProgressTimings(t *testing.T) {
	_, hs := newTestServer(t, Options{})
	events := xStream(t, hs.URL+"/v1/responses", map[string]any{"input": "Once upon a time", "max_output_tokens": 4,
		"stream": true, "return_progress": true, "timings_per_token": true})
	require.GreaterOrEqual(t, len(events), 4)
	assert.Equal(t, "response.created", events[0]["type"])
	assert.Equal(t, "response.in_progress", events[1]["type"])
	progress, deltas := 0, 0
	for i, e := range events {
		assert.EqualValues(t, i, e["sequence_number"], "event %d", i)
		typ := e["type"].(string)
		_, hasTimings := e["timings"]
		_, hasProgress := e["prompt_progress"]
		switch {
		case typ == "response.in_progress" && hasProgress:
			progress++
		case strings.HasSuffix(typ, ".delta"):
			deltas++
			assert.True(t, hasTimings, "%s has timings", typ)
		case typ == "response.completed":
			// Cut by max_output_tokens: still response.completed (as
			// llama.cpp's clients wait for), the status incomplete.
			assert.True(t, hasTimings, "%s has timings", typ)
			assert.Equal(t, "incomplete", e["response"].(map[string]any)["status"])
			assert.Equal(t, map[string]any{"reason": "max_output_tokens"}, e["response"].(map[string]any)["incomplete_details"])
		case typ == "response.output_item.done":
			assert.Equal(t, "incomplete", e["item"].(map[string]any)["status"], "the cut item")
		default:
			assert.False(t, hasTimings, "%s has no timings", typ)
			assert.False(t, hasProgress, "%s has no prompt_progress", typ)
		}
	}
	assert.Positive(t, progress)
	assert.Positive(t, deltas)
	assert.Equal(t, "response.completed", events[len(events)-1]["type"])
}
