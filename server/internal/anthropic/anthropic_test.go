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
		{"no messages", `{}`, nil, `"messages" is required`},
		{"bad role", `{"messages":[{"role":"bot","content":"x"}]}`, nil, `messages[0] has an unknown role "bot" (want user, assistant, system, developer or tool)`},
		{"bad system", `{"system":5,"messages":[]}`, nil, `"system" must be a string or an array of text blocks`},
		{"zero max_tokens", `{"messages":[],"max_tokens":0}`, nil, `"max_tokens" must be at least 1`},
		{"document", `{"messages":[{"role":"user","content":[{"type":"document"}]}]}`, nil, `messages[0].content[0]: document blocks are not supported by this model`},
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
