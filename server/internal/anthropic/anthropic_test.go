package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama/chat"
	"github.com/x/llama/server/internal/wire"
)

// TestBillingHeader pins the stamp normalisation: only the five
// characters after cch= of a billing header line, followed by ";".
func TestBillingHeader(t *testing.T) {
	tests := []struct{ in, want string }{
		{"x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=a5145;You are Claude Code",
			"x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=fffff;You are Claude Code"},
		{"x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=sdk-cli;", "x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=sdk-cli;"},
		{"x-anthropic-billing-header: cch=abc;", "x-anthropic-billing-header: cch=abc;"},
		{"x-anthropic-billing-header: cch=abcde", "x-anthropic-billing-header: cch=abcde"},
		{"You are a helper. cch=a5145;", "You are a helper. cch=a5145;"},
		{"", ""},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, billingHeader(tc.in), tc.in)
	}
}

// TestToChat pins the translation of a Messages request into the
// internal chat request, and the texts of its refusals.
func TestToChat(t *testing.T) {
	for _, c := range []struct {
		name, body string
		check      func(t *testing.T, c *wire.Chat)
		err        string
	}{
		{"system and text", `{"model":"m","system":"be brief","messages":[{"role":"user","content":"hi"}],"max_tokens":7,"temperature":0.5,"top_k":3,"stop_sequences":["x"]}`,
			func(t *testing.T, c *wire.Chat) {
				assert.Equal(t, "m", c.Model)
				assert.Equal(t, []chat.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, c.Messages)
				assert.True(t, c.Gen.Params.Has("max_tokens"))
				assert.True(t, c.Gen.Params.Has("temperature"))
				assert.True(t, c.Gen.Params.Has("top_k"))
				assert.Equal(t, []string{"x"}, c.Gen.Stop.V)
			}, ""},
		{"blocks, tool use and result", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"tool_use","id":"t1","name":"f","input":{"x": 1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"42"}]}]}],
			"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			func(t *testing.T, c *wire.Chat) {
				require.Len(t, c.Messages, 3)
				assert.Equal(t, "a\nb", c.Messages[0].Content)
				assert.Equal(t, "hm", c.Messages[1].ReasoningContent)
				assert.Equal(t, []chat.ToolCall{{ID: "t1", Name: "f", Arguments: `{"x":1}`}}, c.Messages[1].ToolCalls)
				assert.Equal(t, chat.Message{Role: "tool", ToolCallID: "t1", Content: "42"}, c.Messages[2])
				assert.Equal(t, "required", c.ToolChoice.Mode)
				require.NotNil(t, c.Parallel)
				assert.False(t, *c.Parallel)
			}, ""},
		{"thinking enabled", `{"messages":[],"thinking":{"type":"enabled"}}`, func(t *testing.T, c *wire.Chat) {
			assert.Equal(t, true, c.Extra["enable_thinking"])
			n, err := c.Opts.ThinkingBudgetTokens.Integer()
			require.NoError(t, err)
			assert.EqualValues(t, DefaultThinkingBudget, n)
		}, ""},
		{"output_config.format", `{"messages":[],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`,
			func(t *testing.T, c *wire.Chat) { assert.JSONEq(t, `{"type":"object"}`, string(c.Schema)) }, ""},
		{"the beta's output_format", `{"messages":[],"output_format":{"type":"json_schema","schema":{"type":"array"}}}`,
			func(t *testing.T, c *wire.Chat) { assert.JSONEq(t, `{"type":"array"}`, string(c.Schema)) }, ""},
		{"output_config.format wins over output_format", `{"messages":[],"output_format":{"type":"json_schema","schema":{"type":"array"}},"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`,
			func(t *testing.T, c *wire.Chat) { assert.JSONEq(t, `{"type":"object"}`, string(c.Schema)) }, ""},
		{"bad output_format", `{"messages":[],"output_format":{"type":"json_schema"}}`, nil, `"output_format.schema" must be a JSON Schema object`},
		{"bad output_config.format", `{"messages":[],"output_config":{"format":{"type":"text"}}}`, nil, `"output_config.format.type" must be "json_schema"`},
		{"no messages", `{}`, nil, `"messages" is required`},
		{"bad role", `{"messages":[{"role":"bot","content":"x"}]}`, nil, `messages[0] has an unknown role "bot" (want user, assistant, system, developer or tool)`},
		{"bad system", `{"system":5,"messages":[]}`, nil, `"system" must be a string or an array of text blocks`},
		{"zero max_tokens", `{"messages":[],"max_tokens":0}`, nil, `"max_tokens" must be at least 1`},
		{"text documents and search results are text", `{"messages":[{"role":"user","content":[
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The sky is green."},"title":"Notes","context":"from a field trip","citations":{"enabled":true}},
			{"type":"document","source":{"type":"content","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}},
			{"type":"search_result","source":"https://example.org/a","title":"A","content":[{"type":"text","text":"found"}]},
			{"type":"text","text":"What color is the sky?"},
			{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"},{"type":"search_result","source":"u","title":"T","content":[{"type":"text","text":"s"}]}]}]}]}`,
			func(t *testing.T, c *wire.Chat) {
				require.Len(t, c.Messages, 2)
				assert.Equal(t, []chat.ContentPart{
					{Type: "text", Text: "Notes\n\nfrom a field trip\n\nThe sky is green."},
					{Type: "text", Text: "one\ntwo"},
					{Type: "text", Text: "A\n\nhttps://example.org/a\n\nfound"},
					{Type: "text", Text: "What color is the sky?"},
				}, c.Messages[0].Parts)
				assert.Equal(t, chat.Message{Role: "tool", ToolCallID: "t1", Content: "r\n\nT\n\nu\n\ns"}, c.Messages[1])
			}, ""},
		{"document without a source", `{"messages":[{"role":"user","content":[{"type":"document"}]}]}`, nil, `messages[0].content[0]: document block needs a source object`},
		{"PDF document", `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`, nil,
			`messages[0].content[0]: document source type "base64" (application/pdf) cannot be read by this server: send the text as a text source`},
		{"document in a tool result", `{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"document","source":{"type":"url","url":"https://x/y.pdf"}}]}]}]}`, nil,
			`messages[0].content[0]: document source type "url" (no media type) cannot be read by this server: send the text as a text source`},
		{"image in a document", `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"content","content":[{"type":"image"}]}}]}]}`, nil, "messages[0].content[0]: " + noImageInput},
		{"search result without its URL", `{"messages":[{"role":"user","content":[{"type":"search_result","source":{"u":1}}]}]}`, nil, `messages[0].content[0]: search_result source must be a string (its URL)`},
		{"tool choice without tools", `{"messages":[],"tool_choice":{"type":"any"}}`, nil, `"tool_choice" "required" needs "tools"`},
		{"image in a tool result", `{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"image"}]}]}]}`, nil, "messages[0].content[0]: " + noImageInput},
	} {
		t.Run(c.name, func(t *testing.T) {
			var req Request
			require.NoError(t, json.Unmarshal([]byte(c.body), &req))
			out, err := ToChat(&req, "<m>")
			if c.err != "" {
				var we *wire.Error
				require.ErrorAs(t, err, &we)
				assert.Equal(t, c.err, we.Msg)
				return
			}
			require.NoError(t, err)
			c.check(t, out)
		})
	}
}

// FuzzToChat: no request makes the translation panic, and every refusal
// is a *wire.Error.
func FuzzToChat(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`)
	f.Add(`{"system":[{"type":"text","text":"x-anthropic-billing-header: cch=abcde;"}],"messages":[{"role":"assistant"}]}`)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"}]}},{"type":"search_result","source":"u","content":"y"}]}]}`)
	f.Add(`{"messages":[],"output_config":{"format":{"type":"json_schema","schema":{}}},"thinking":{"type":"enabled","budget_tokens":-1}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req Request
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		if _, err := ToChat(&req, "<m>"); err != nil {
			var we *wire.Error
			assert.ErrorAs(t, err, &we)
		}
	})
}
