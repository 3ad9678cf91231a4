package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama/chat"
	"github.com/x/llama/engine"
	"github.com/x/llama/server/internal/wire"
)

// TestToChat pins the translation of a chat completion body into the
// internal chat request, and the texts of its refusals.
func TestToChat(t *testing.T) {
	for _, c := range []struct {
		name, body string
		slots      int
		check      func(t *testing.T, c *wire.Chat)
		err        string
	}{
		{"text, media and settings", `{"model":"m","n":2,"messages":[{"role":"system","content":"be brief"},
			{"role":"user","content":[{"type":"text","text":"look "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],
			"add_generation_prompt":false,"continue_final_message":"content","reasoning_format":"none",
			"chat_template_kwargs":{"k":1},"reasoning_effort":"low","temperature":0.5,"logprobs":true}`, 4,
			func(t *testing.T, c *wire.Chat) {
				assert.Equal(t, "m", c.Model)
				assert.Equal(t, 2, c.N)
				require.Len(t, c.Messages, 2)
				assert.Equal(t, chat.Message{Role: "system", Content: "be brief"}, c.Messages[0])
				assert.Equal(t, "look <m>", c.Messages[1].Content)
				require.Len(t, c.Media, 1)
				assert.Equal(t, "image", c.Media[0].Kind)
				assert.False(t, c.AddGenerationPrompt)
				assert.Equal(t, "content", c.Continue)
				assert.Equal(t, "none", c.Reasoning)
				assert.Equal(t, map[string]any{"k": float64(1)}, c.Extra)
				assert.Equal(t, "low", c.ReasoningEffort)
				assert.True(t, c.Gen.Params.Has("temperature"))
				assert.True(t, c.Opts.Logprobs.V)
				assert.Equal(t, "auto", c.ToolChoice.Mode)
			}, ""},
		{"tools and a forced function", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"x\":1}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"}],
			"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
			"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`, 1,
			func(t *testing.T, c *wire.Chat) {
				require.Len(t, c.Messages, 2)
				assert.Equal(t, []chat.ToolCall{{ID: "c1", Name: "f", Arguments: `{"x":1}`}}, c.Messages[0].ToolCalls)
				assert.Equal(t, chat.Message{Role: "tool", ToolCallID: "c1", Content: "42"}, c.Messages[1])
				require.Len(t, c.Tools, 1)
				assert.Equal(t, "f", c.Tools[0].Name)
				assert.Equal(t, chat.ToolChoice{Mode: "function", Function: "f"}, c.ToolChoice)
				require.NotNil(t, c.Parallel)
				assert.False(t, *c.Parallel)
			}, ""},
		{"allowed tools", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],
			"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"g"}}]}}}`, 1,
			func(t *testing.T, c *wire.Chat) {
				assert.Len(t, c.Tools, 2)
				assert.Equal(t, chat.ToolChoice{Mode: "required", Allowed: []string{"g"}}, c.ToolChoice)
			}, ""},
		{"no allowed tools under auto: none", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
			"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`, 1,
			func(t *testing.T, c *wire.Chat) { assert.Equal(t, chat.ToolChoice{Mode: "none"}, c.ToolChoice) }, ""},
		{"no allowed tools under required", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
			"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required"}}}`, 1, nil, `"tool_choice" allowed_tools with mode "required" must list a function`},
		{"allowed tools of a bad mode", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
			"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"none","tools":[{"type":"function","function":{"name":"f"}}]}}}`, 1, nil, `"tool_choice" allowed_tools mode must be "auto" or "required", got "none"`},
		{"allowed tools without the list", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"allowed_tools"}}`, 1, nil,
			`"tool_choice" of type allowed_tools needs "allowed_tools": {"mode": ..., "tools": [...]}`},
		{"an allowed tool without a name", `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function"}]}}}`, 1, nil,
			`"tool_choice.allowed_tools.tools[0]" must name a function`},
		{"json_object without a schema is an object", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`, 1,
			func(t *testing.T, c *wire.Chat) { assert.JSONEq(t, `{"type":"object"}`, string(c.Schema)) }, ""},
		{"json_object with an empty schema is an object", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object","schema":{}}}`, 1,
			func(t *testing.T, c *wire.Chat) { assert.JSONEq(t, `{"type":"object"}`, string(c.Schema)) }, ""},
		{"json_object with a schema follows it", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object","schema":{"const":"42"}}}`, 1,
			func(t *testing.T, c *wire.Chat) { assert.JSONEq(t, `{"const":"42"}`, string(c.Schema)) }, ""},
		{"json_schema", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string"}}}}`, 1,
			func(t *testing.T, c *wire.Chat) { assert.JSONEq(t, `{"type":"string"}`, string(c.Schema)) }, ""},
		{"no messages", `{}`, 1, nil, `"messages" is required`},
		{"empty messages", `{"messages":[]}`, 1, nil, `"messages" must not be empty`},
		{"messages not an array", `{"messages":{}}`, 1, nil, `"messages" must be an array`},
		{"best_of", `{"messages":[{"role":"user","content":"x"}],"best_of":2}`, 1, nil, "unsupported parameter: best_of"},
		{"n beyond the slots", `{"messages":[{"role":"user","content":"x"}],"n":3}`, 2, nil, `"n" must be between 1 and 2, got 3`},
		{"no role", `{"messages":[{"content":"x"}]}`, 1, nil, "messages[0] has no role"},
		{"the functions API's messages: a call and its result", `{"messages":[{"role":"user","content":"x"},
			{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{\"a\":1}"}},
			{"role":"function","name":"f","content":"42"}]}`, 1,
			func(t *testing.T, c *wire.Chat) {
				require.Len(t, c.Messages, 3)
				assert.Equal(t, []chat.ToolCall{{Name: "f", Arguments: `{"a":1}`}}, c.Messages[1].ToolCalls)
				assert.Equal(t, chat.Message{Role: "tool", Name: "f", Content: "42"}, c.Messages[2])
			}, ""},
		{"a function_call without a name", `{"messages":[{"role":"assistant","function_call":{"arguments":"{}"}}]}`, 1, nil, "messages[0].function_call has no name"},
		{"unknown role", `{"messages":[{"role":"bot","content":"x"}]}`, 1, nil, `messages[0] has an unknown role "bot" (want system, developer, user, assistant, tool or function)`},
		{"empty assistant", `{"messages":[{"role":"assistant"}]}`, 1, nil, "messages[0]: an assistant message needs content or tool_calls"},
		{"video", `{"messages":[{"role":"user","content":[{"type":"input_video"}]}]}`, 1, nil, "messages[0].content[0]: video input is not supported"},
		{"bad tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`, 1, nil, `tools[0] must be {"type": "function", "function": {"name": ...}}`},
		{"choice without tools", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, 1, nil, `"tool_choice" "required" needs "tools"`},
		{"bad choice", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"some"}`, 1, nil, `"tool_choice" must be "auto", "none", "required" or a function`},
		{"bad response format", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}`, 1, nil, `response_format type must be "text", "json_object" or "json_schema", got "xml"`},
		{"bad reasoning format", `{"messages":[{"role":"user","content":"x"}],"reasoning_format":1}`, 1, nil, `"reasoning_format" must be a string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b ChatBody
			require.NoError(t, wire.Decode([]byte(c.body), &b))
			req := &wire.Chat{}
			err := ToChat(&b, req, c.slots, "<m>")
			if c.err != "" {
				var we *wire.Error
				require.ErrorAs(t, err, &we)
				assert.Equal(t, c.err, we.Msg)
				return
			}
			require.NoError(t, err)
			c.check(t, req)
		})
	}
}

// TestCompletionBodyCheck pins what /v1/completions refuses, and its
// logprobs as n_probs unless n_probs is given.
func TestCompletionBodyCheck(t *testing.T) {
	for _, c := range []struct {
		name, body string
		nProbs     int
		err        string
	}{
		{"plain", `{"prompt":"x","n":1,"echo":false,"logprobs":3}`, 3, ""},
		{"n_probs wins", `{"prompt":"x","logprobs":3,"n_probs":5}`, 0, ""},
		{"no prompt", `{}`, 0, `"prompt" is required`},
		{"suffix", `{"prompt":"x","suffix":"y"}`, 0, ""},
		{"suffix not a string", `{"prompt":"x","suffix":["y"]}`, 0, `"suffix" must be a string`},
		{"best_of", `{"prompt":"x","best_of":2}`, 0, "unsupported parameter: best_of"},
		{"echo", `{"prompt":"x","echo":true}`, 0, ""},
		{"echo with a suffix", `{"prompt":"x","echo":true,"suffix":"y"}`, 0, `"echo" cannot be used with "suffix"`},
		{"bad echo", `{"prompt":"x","echo":1}`, 0, `"echo" must be a boolean`},
		{"too many logprobs", `{"prompt":"x","logprobs":21}`, 0, `"logprobs" must be between 0 and 20, got 21`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b CompletionBody
			require.NoError(t, wire.Decode([]byte(c.body), &b))
			n := 0
			err := b.Check()
			if err == nil {
				err = b.NProbs(&n)
			}
			if c.err != "" {
				var we *wire.Error
				require.ErrorAs(t, err, &we)
				assert.Equal(t, c.err, we.Msg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.nProbs, n)
		})
	}
}

// TestAnswerShapes pins the JSON of an answer message, of streamed deltas
// (a call's id and type on its first delta only), usage and finish
// reasons.
func TestAnswerShapes(t *testing.T) {
	var d Deltas
	first := d.Message(chat.Delta{ToolCalls: []chat.ToolCallDelta{{Index: 0, ID: "c1", Name: "f", ArgumentsDelta: `{"x"`}}})
	next := d.Message(chat.Delta{ToolCalls: []chat.ToolCallDelta{{Index: 0, ArgumentsDelta: `:1}`}}})
	var u Usage
	u.Add(engine.Event{PromptTokens: 3, Generated: 2, CachedTokens: 1}, true)
	u.Add(engine.Event{PromptTokens: 1, Generated: 1}, true)
	u.Add(engine.Event{PromptTokens: 1, Generated: 4, CachedTokens: 1}, false) // another choice of the last prompt
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"message with a call", AssistantMessage(chat.Message{ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}}),
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{"message with text", AssistantMessage(chat.Message{Content: "", ReasoningContent: "hm"}),
			`{"role":"assistant","content":"","reasoning_content":"hm"}`},
		{"first delta of a call", first, `{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}`},
		{"next delta of a call", next, `{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`},
		{"content delta", d.Message(chat.Delta{Content: "a"}), `{"content":"a"}`},
		{"first delta", FirstDelta{Role: "assistant"}, `{"role":"assistant","content":null}`},
		{"usage", u, `{"prompt_tokens":4,"completion_tokens":7,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":1}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.v)
			require.NoError(t, err)
			assert.JSONEq(t, c.want, string(b))
		})
	}
	assert.True(t, d.ToolCalls())
	for _, c := range []struct {
		stop  engine.StopType
		calls bool
		want  string
	}{
		{engine.StopTypeEOS, false, "stop"}, {engine.StopTypeWord, true, "tool_calls"}, {engine.StopTypeLimit, true, "length"},
	} {
		assert.Equal(t, c.want, FinishReason(c.stop, c.calls), string(c.stop))
	}
}

// FuzzToChat: no body makes the translation panic, and every refusal is
// a *wire.Error.
func FuzzToChat(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`)
	f.Add(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":5}}]}],"tool_choice":{"type":"function"}}`)
	f.Add(`{"messages":[],"response_format":{"type":"json_schema","json_schema":null},"continue_final_message":true,"n":1e9}`)
	f.Fuzz(func(t *testing.T, body string) {
		var b ChatBody
		if wire.Decode([]byte(body), &b) != nil {
			return
		}
		if err := ToChat(&b, &wire.Chat{}, 2, "<m>"); err != nil {
			var we *wire.Error
			assert.ErrorAs(t, err, &we)
		}
	})
}
