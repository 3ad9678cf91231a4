package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// llamaSrc is the llama.cpp source tree the conformance tests read their
// templates and expectations from.
func llamaSrc(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LLAMA_CPP_SRC")
	if dir == "" {
		dir = "/root/.cache/llama-cpp-src/v0.4.0"
	}
	if _, err := os.Stat(filepath.Join(dir, "models", "templates")); err != nil {
		t.Fatalf("llama.cpp source not found at %s (set LLAMA_CPP_SRC to a llama.cpp v0.4.0 checkout): %v", dir, err)
	}
	return dir
}

// conformanceInput is the conversation every bundled template renders: a
// system message, tool definitions, a user message, an assistant tool call
// and its result, and a final user message.
func conformanceInput() TemplateInput {
	return TemplateInput{
		Messages: []Message{
			{Role: RoleSystem, Content: "You are a helpful assistant."},
			{Role: RoleUser, Content: "What is the weather in Paris?"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call12345", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius"}`}}},
			{Role: RoleTool, Content: `{"temperature": 21}`, ToolCallID: "call12345", Name: "get_weather"},
			{Role: RoleUser, Content: "Thanks! And tomorrow?"},
		},
		Tools: []Tool{{
			Name:        "get_weather",
			Description: "Get the weather of a city",
			Parameters:  json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`),
		}},
		AddGenerationPrompt: true,
		BOSToken:            "<s>",
		EOSToken:            "</s>",
		Now:                 time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC),
	}
}

func TestBundledTemplatesRender(t *testing.T) {
	dir := filepath.Join(llamaSrc(t), "models", "templates")
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	sort.Strings(files)
	rendered := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jinja")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			tmpl, err := ParseTemplate(string(src))
			require.NoError(t, err)
			out, err := tmpl.Render(conformanceInput())
			if want, ok := expectedRaise[name]; ok {
				var te *TemplateError
				require.True(t, errors.As(err, &te), "want raise_exception %q, got %v", want, err)
				assert.Equal(t, want, te.Message)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, out, "What is the weather in Paris?")
			assert.Contains(t, out, "Thanks! And tomorrow?")
			rendered++
			if os.Getenv("CHAT_DUMP") != "" {
				t.Logf("%s caps=%+v\n%s", name, tmpl.Caps(), out)
			}
		})
	}
	t.Logf("%d of %d templates rendered", rendered, len(files))
}

// expectedRaise lists the bundled templates that refuse the conformance
// conversation themselves, with the message their source raises.
var expectedRaise = map[string]string{
	// These count the tool result as a turn and want an assistant reply
	// before the next user message.
	"Mistral-Small-3.2-24B-Instruct-2506":      "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...",
	"mistralai-Mistral-Nemo-Instruct-2407":     "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...",
	"mistralai-Ministral-3-14B-Reasoning-2512": "After the optional system message, conversation roles must alternate user and assistant roles except for tool calls and results.",
	// Gemma 2 knows no tool role: the tool message breaks its alternation.
	"google-gemma-2-2b-it": "Conversation roles must alternate user/assistant/user/assistant/...",
}

// llamaTemplateCase is one case of llama.cpp's tests/test-chat-template.cpp,
// reproduced in testdata/template_llama/chat_template_cases.json.
type llamaTemplateCase struct {
	Name                string     `json:"name"`
	Template            string     `json:"template_str"`
	ExpectedOutput      string     `json:"expected_output"`
	ExpectedOutputJinja string     `json:"expected_output_jinja"`
	BOSToken            string     `json:"bos_token"`
	EOSToken            string     `json:"eos_token"`
	SupportedWithJinja  *bool      `json:"supported_with_jinja"`
	ExtraConversation   [][]string `json:"extra_conversation"`
}

func TestLlamaChatTemplateExpectations(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "template_llama", "chat_template_cases.json"))
	require.NoError(t, err)
	var cases []llamaTemplateCase
	require.NoError(t, json.Unmarshal(data, &cases))
	require.Len(t, cases, 36)

	conversation := []Message{
		{Role: RoleSystem, Content: "You are a helpful assistant"},
		{Role: RoleUser, Content: "Hello"},
		{Role: RoleAssistant, Content: "Hi there"},
		{Role: RoleUser, Content: "Who are you"},
		{Role: RoleAssistant, Content: "   I am an assistant   "},
		{Role: RoleUser, Content: "Another question"},
	}
	matched, ran := 0, 0
	for _, tc := range cases {
		if tc.SupportedWithJinja != nil && !*tc.SupportedWithJinja {
			continue
		}
		ran++
		t.Run(tc.Name, func(t *testing.T) {
			msgs := append([]Message(nil), conversation...)
			for _, m := range tc.ExtraConversation {
				msgs = append(msgs, Message{Role: m[0], Content: m[1]})
			}
			tmpl, err := ParseTemplate(tc.Template)
			require.NoError(t, err)
			out, err := tmpl.Render(TemplateInput{
				Messages:            msgs,
				AddGenerationPrompt: true,
				BOSToken:            tc.BOSToken,
				EOSToken:            tc.EOSToken,
			})
			require.NoError(t, err)
			want := tc.ExpectedOutputJinja
			if want == "" {
				want = tc.ExpectedOutput
			}
			if assert.Equal(t, want, out) {
				matched++
			}
		})
	}
	t.Logf("%d of %d expected renderings match", matched, ran)
}
