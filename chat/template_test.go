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

	"github.com/x/llama/internal/testenv"
)

// llamaSrc is the llama.cpp source tree the conformance tests read their
// templates and expectations from (fetched by testenv when missing).
func llamaSrc(t testing.TB) string {
	t.Helper()
	return testenv.LlamaSrc(t)
}

// templatesDir is the folder of the chat templates bundled with llama.cpp.
func templatesDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(llamaSrc(t), "models", "templates")
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
	dir := templatesDir(t)
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

// renderSource renders a template source with extra variables.
func renderSource(t *testing.T, src string, vars map[string]any) (string, error) {
	t.Helper()
	tmpl, err := ParseTemplate(src)
	if err != nil {
		return "", err
	}
	return tmpl.Render(TemplateInput{Extra: vars, Now: time.Date(2024, 7, 26, 15, 4, 5, 0, time.UTC)})
}

func TestJinjaFeatures(t *testing.T) {
	tools := json.RawMessage(`[{"name": "f", "parameters": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}}]`)
	tests := []struct {
		name string
		src  string
		vars map[string]any
		want string
	}{
		// tojson: Python json.dumps spacing and order, ensure_ascii off.
		{"tojson spacing", `{{ x | tojson }}`, map[string]any{"x": json.RawMessage(`{"b": [1, 2.5, true, null], "a": "x"}`)}, `{"b": [1, 2.5, true, null], "a": "x"}`},
		{"tojson key order kept", `{{ tools[0].parameters | tojson }}`, map[string]any{"tools": tools}, `{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}`},
		{"tojson indent", `{{ x | tojson(indent=2) }}`, map[string]any{"x": json.RawMessage(`{"a": [1, {"b": null}], "c": {}, "d": []}`)}, "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": {},\n  \"d\": []\n}"},
		{"tojson no ascii escape", `{{ "héllo <b>&'\"" | tojson }}`, nil, `"héllo <b>&'\""`},
		{"tojson separators", `{{ x | tojson(separators=(',', ':')) }}`, map[string]any{"x": json.RawMessage(`{"a": [1, 2]}`)}, `{"a":[1,2]}`},
		{"tojson float", `{{ x | tojson }}`, map[string]any{"x": json.RawMessage(`[1.0, 0.1, 1e20, 1e-7, 123456.5]`)}, `[1.0, 0.1, 1e+20, 1e-07, 123456.5]`},
		{"tojson control chars", `{{ "a\nb\tc" | tojson }}`, nil, `"a\nb\tc"`},
		// Variables and globals.
		{"bos eos", `{{ bos_token }}x{{ eos_token }}`, nil, `x`},
		{"strftime_now", `{{ strftime_now("%d %b %Y %H:%M:%S %A %-d") }}`, nil, `26 Jul 2024 15:04:05 Friday 26`},
		{"namespace", `{% set ns = namespace(found=false, n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}`, nil, `True 6`},
		// Loops.
		{"loop vars", `{% for x in "abc" | list %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}`, nil, `10TrueFalse33;21FalseFalse32;32FalseTrue31;`},
		{"loop filter and else", `{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{% else %}none{% endfor %}|{% for x in [] %}{{ x }}{% else %}empty{% endfor %}`, nil, `24|empty`},
		{"loop dict items", `{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}`, map[string]any{"d": json.RawMessage(`{"z": 1, "a": 2}`)}, `z=1;a=2;`},
		{"loop previtem", `{% for x in [1, 2] %}{% if loop.previtem is defined %}{{ loop.previtem }}{% endif %}{% endfor %}`, nil, `1`},
		// String methods.
		{"strip family", `[{{ "  a  ".strip() }}][{{ "  a  ".lstrip() }}][{{ "  a  ".rstrip() }}][{{ "xxaxx".strip("x") }}]`, nil, `[a][a  ][  a][a]`},
		{"split", `{{ "a,b,c".split(",") | join("|") }} {{ "a b  c".split() | length }}`, nil, `a|b|c 3`},
		{"startswith endswith", `{{ "hello".startswith("he") }} {{ "hello".endswith("lo") }} {{ "hello".startswith("x") }}`, nil, `True True False`},
		{"case methods", `{{ "aB".upper() }} {{ "aB".lower() }} {{ "hello world".title() }}`, nil, `AB ab Hello World`},
		{"replace find count", `{{ "aaa".replace("a", "b") }} {{ "hello".find("l") }} {{ "hello".count("l") }}`, nil, `bbb 2 2`},
		// Filters.
		{"join length first last", `{{ [1, 2, 3] | join(", ") }} {{ [1, 2, 3] | length }} {{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }}`, nil, `1, 2, 3 3 1 3`},
		{"map attribute", `{{ msgs | map(attribute="role") | join(",") }}`, map[string]any{"msgs": json.RawMessage(`[{"role": "user"}, {"role": "assistant"}]`)}, `user,assistant`},
		{"selectattr rejectattr", `{{ msgs | selectattr("role", "equalto", "user") | list | length }} {{ msgs | rejectattr("role", "equalto", "user") | map(attribute="role") | first }}`, map[string]any{"msgs": json.RawMessage(`[{"role": "user"}, {"role": "assistant"}, {"role": "user"}]`)}, `2 assistant`},
		{"reverse unique", `{{ [1, 2, 2, 3] | unique | list | reverse | join }}`, nil, `321`},
		{"dictsort items", `{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %} {% for k, v in d | items %}{{ k }}{% endfor %}`, map[string]any{"d": json.RawMessage(`{"b": 1, "a": 2}`)}, `a2b1 ba`},
		{"trim default", `[{{ "  x " | trim }}][{{ missing | default("d") }}][{{ "" | default("e", true) }}]`, nil, `[x][d][e]`},
		// Tests.
		{"is tests", `{{ x is defined }} {{ y is defined }} {{ x is string }} {{ d is mapping }} {{ l is iterable }} {{ n is none }} {{ 3 is number }}`, map[string]any{"x": "s", "d": map[string]any{}, "l": []any{}, "n": nil}, `True False True True True True True`},
		// Expressions.
		{"slicing", `{{ "hello"[1:3] }} {{ [1, 2, 3, 4][::-1] | join }} {{ [1, 2, 3][-1] }} {{ "hello"[:-1] }}`, nil, `el 4321 3 hell`},
		{"in and not in", `{{ "a" in "cat" }} {{ 2 in [1, 2] }} {{ "k" in d }} {{ "z" not in d }}`, map[string]any{"d": map[string]any{"k": 1}}, `True True True True`},
		{"concat tilde", `{{ "a" ~ 1 ~ "b" }} {{ "x" + "y" }}`, nil, `a1b xy`},
		{"inline if", `{{ "yes" if x else "no" }}`, map[string]any{"x": true}, `yes`},
		{"macro", `{% macro greet(name, p="Hi") %}{{ p }} {{ name }}{% endmacro %}{{ greet("bob") }}/{{ greet("al", p="Yo") }}`, nil, `Hi bob/Yo al`},
		// Whitespace control, trim_blocks and lstrip_blocks as transformers
		// sets them (on), and the trailing newline dropped.
		{"trim_blocks", "{% if true %}\nhello\n{% endif %}\n", nil, "hello\n"},
		{"lstrip_blocks", "    {% if true %}\n    hello\n    {% endif %}\n", nil, "    hello\n"},
		{"explicit strip", "  {%- if true -%}  \nhello\n  {%- endif -%}  \n", nil, "hello"},
		{"expression keeps indentation", "a\n {{ 'b' }}{% if true %}c{% endif %}", nil, "a\n bc"},
		{"newline after expression kept", "{% if true %}{{ 'x' }}\ny{% endif %}", nil, "x\ny"},
		{"plus disables lstrip", "  {%+ if true %}x{% endif %}", nil, "  x"},
		{"comments dropped", "a{# note #}b\n{# line #}\nc", nil, "ab\nc"},
		{"raw block", "{% raw %}{{ not evaluated }}{% endraw %}", nil, "{{ not evaluated }}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderSource(t, tc.src, tc.vars)
			require.NoError(t, err)
			assert.Equal(t, tc.want, out)
		})
	}
}

func TestRaiseExceptionIsTemplateError(t *testing.T) {
	_, err := renderSource(t, `{% if true %}{{ raise_exception("Only user and assistant roles are supported!") }}{% endif %}`, nil)
	var te *TemplateError
	require.True(t, errors.As(err, &te))
	assert.Equal(t, "Only user and assistant roles are supported!", te.Message)
	assert.Equal(t, "chat: template raised: Only user and assistant roles are supported!", err.Error())

	_, err = renderSource(t, `{{ foo() }}`, nil)
	require.Error(t, err)
	assert.False(t, errors.As(err, &te), "other failures are not TemplateError")
	assert.True(t, strings.HasPrefix(err.Error(), "chat: "))
}

func TestParseTemplateError(t *testing.T) {
	for _, tc := range []struct{ src, msg string }{
		{`{% for x in %}`, ""},
		// The parser takes an unclosed delimiter's rest as text: the
		// template would render its own source.
		{`{{ messages[0].content `, `"{{" is never closed`},
		{"a\n{% if x %}b{% endif", `line 2: "{%" is never closed`},
		{`{# note`, `"{#" is never closed`},
	} {
		_, err := ParseTemplate(tc.src)
		require.Error(t, err, tc.src)
		assert.True(t, strings.HasPrefix(err.Error(), "chat: "))
		assert.Contains(t, err.Error(), tc.msg)
	}
	for _, src := range []string{"{% raw %}{{ not closed{% endraw %}ok", "{%+ raw -%}{{{%- endraw +%}", "text { only } braces", `{{ '}}' }}`} {
		_, err := ParseTemplate(src)
		assert.NoError(t, err, src)
	}
}

func TestRenderMessageShape(t *testing.T) {
	src := `{% for m in messages %}{{ m.role }}|{{ m.content }}|{% if m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.id }} {{ tc.type }} {{ tc.function.name }} {{ tc.function.arguments | tojson }} {% for k, v in tc.function.arguments | items %}{{ k }}={{ v }};{% endfor %}{% endfor %}{% endif %}{{ m.tool_call_id }}|{{ m.name }}|{{ m.reasoning_content }}
{% endfor %}{% for t in tools %}{{ t.type }} {{ t.function.name }} {{ t.function.description }} {{ t.function.parameters | tojson }}{% endfor %}`
	tmpl, err := ParseTemplate(src)
	require.NoError(t, err)
	assert.Equal(t, src, tmpl.Source())
	caps := tmpl.Caps()
	assert.True(t, caps.SupportsObjectArguments)
	out, err := tmpl.Render(conformanceInput())
	require.NoError(t, err)
	assert.Equal(t, `system|You are a helpful assistant.|||
user|What is the weather in Paris?|||
assistant||call12345 function get_weather {"city": "Paris", "unit": "celsius"} city=Paris;unit=celsius;||
tool|{"temperature": 21}|call12345|get_weather|
user|Thanks! And tomorrow?|||
function get_weather Get the weather of a city {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`, out)
}

func TestRenderArgumentsAsTextForTemplatesPrintingThem(t *testing.T) {
	tmpl, err := ParseTemplate(`{% for m in messages %}{% for tc in m.tool_calls %}{{ tc.function.arguments }}{% endfor %}{% endfor %}`)
	require.NoError(t, err)
	assert.False(t, tmpl.Caps().SupportsObjectArguments)
	out, err := tmpl.Render(TemplateInput{Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`}}}}})
	require.NoError(t, err)
	assert.Equal(t, `{"a": 1}`, out)
}

func TestRenderPolyfills(t *testing.T) {
	noSystem := `{% for m in messages %}{% if m.role == 'system' %}{% else %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}`
	tmpl, err := ParseTemplate(noSystem)
	require.NoError(t, err)
	assert.False(t, tmpl.Caps().SupportsSystemRole)
	out, err := tmpl.Render(TemplateInput{Messages: []Message{
		{Role: RoleDeveloper, Content: "Be brief."},
		{Role: RoleUser, Content: "Hi"},
	}})
	require.NoError(t, err)
	assert.Equal(t, "<user>Be brief.\nHi", out, "developer becomes system, merged into the next message")

	typed := `{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}`
	tmpl, err = ParseTemplate(typed)
	require.NoError(t, err)
	assert.True(t, tmpl.Caps().RequiresTypedContent)
	out, err = tmpl.Render(TemplateInput{Messages: []Message{{Role: RoleUser, Content: "plain"}, {Role: RoleUser, Parts: []ContentPart{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}}}})
	require.NoError(t, err)
	assert.Equal(t, "plainab", out)

	gptOSS := `{% for m in messages %}{{ m.role }};{% endfor %}{# <|channel|> #}`
	tmpl, err = ParseTemplate(gptOSS)
	require.NoError(t, err)
	out, err = tmpl.Render(TemplateInput{Messages: []Message{{Role: RoleDeveloper, Content: "x"}}})
	require.NoError(t, err)
	assert.Equal(t, "developer;", out, "templates with <|channel|> keep the developer role")
}

func TestBundledTemplateCaps(t *testing.T) {
	dir := templatesDir(t)
	load := func(name string) *Template {
		src, err := os.ReadFile(filepath.Join(dir, name+".jinja"))
		require.NoError(t, err)
		tmpl, err := ParseTemplate(string(src))
		require.NoError(t, err)
		return tmpl
	}
	qwen3 := load("Qwen-Qwen3-0.6B").Caps()
	assert.Equal(t, TemplateCaps{SupportsSystemRole: true, SupportsTools: true, SupportsToolCalls: true, SupportsToolResponses: true, SupportsParallelToolCalls: true, SupportsThinking: true, ThinkingByDefault: true, SupportsObjectArguments: true}, qwen3)
	gemma2 := load("google-gemma-2-2b-it").Caps()
	assert.False(t, gemma2.SupportsSystemRole)
	assert.False(t, gemma2.SupportsTools)
	llama31 := load("meta-llama-Llama-3.1-8B-Instruct").Caps()
	assert.True(t, llama31.SupportsTools)
	assert.False(t, llama31.SupportsParallelToolCalls, "Llama 3.1 raises on parallel calls")
	assert.False(t, llama31.SupportsThinking)
	// Apertus reacts to enable_thinking in its developer block alone:
	// off unless asked, as llama-server has it.
	apertus := load("Apertus-8B-Instruct").Caps()
	assert.True(t, apertus.SupportsThinking)
	assert.False(t, apertus.ThinkingByDefault)
}

func TestRenderThinkingToggleAndNow(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(templatesDir(t), "Qwen-Qwen3-0.6B.jinja"))
	require.NoError(t, err)
	tmpl, err := ParseTemplate(string(src))
	require.NoError(t, err)
	in := TemplateInput{Messages: []Message{{Role: RoleUser, Content: "Hi"}}, AddGenerationPrompt: true}
	out, err := tmpl.Render(in)
	require.NoError(t, err)
	assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out)
	in.Extra = map[string]any{"enable_thinking": false}
	out, err = tmpl.Render(in)
	require.NoError(t, err)
	assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", out)

	src, err = os.ReadFile(filepath.Join(templatesDir(t), "meta-llama-Llama-3.2-3B-Instruct.jinja"))
	require.NoError(t, err)
	tmpl, err = ParseTemplate(string(src))
	require.NoError(t, err)
	out, err = tmpl.Render(TemplateInput{Messages: []Message{{Role: RoleUser, Content: "Hi"}}, BOSToken: "<|begin_of_text|>", Now: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	assert.Equal(t, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 02 Jan 2025\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", out)
}

func TestTemplateConcurrentRender(t *testing.T) {
	tmpl, err := ParseTemplate(`{% for m in messages %}{{ m.content }}{% endfor %}`)
	require.NoError(t, err)
	done := make(chan string, 8)
	for i := range 8 {
		go func() {
			out, _ := tmpl.Render(TemplateInput{Messages: []Message{{Role: RoleUser, Content: strings.Repeat("x", i)}}})
			done <- out
		}()
	}
	lens := map[int]bool{}
	for range 8 {
		lens[len(<-done)] = true
	}
	assert.Len(t, lens, 8)
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{
		"{{ x }}",
		"{% for m in messages %}{{ m.content | tojson }}{% endfor %}",
		"{%- if a -%} {{ b }} {%+ endif +%}",
		"{% raw %}{{ {% endraw %}",
		"{{ 'unterminated",
		"{# comment",
		"{% set ns = namespace(a=1) %}{{ ns.a }}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := ParseTemplate(src)
		if err != nil {
			return
		}
		_, _ = tmpl.Render(TemplateInput{Messages: []Message{{Role: RoleUser, Content: "hi"}}, AddGenerationPrompt: true})
	})
}
