package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	grammar "github.com/x/llama/internal/gbnf"
)

// testTemplates returns templates that render src.
func testTemplates(t testing.TB, src string) *Templates {
	t.Helper()
	tmpl, err := ParseTemplate(src)
	require.NoError(t, err)
	return &Templates{Default: NewJinjaRenderer(tmpl), BOS: "<s>", EOS: "</s>"}
}

// hermesTemplate is ChatML that offers tools and writes calls in the
// Hermes <tool_call> format.
const hermesTemplate = `{%- if tools %}<|im_start|>system
Tools: {% for tool in tools %}{{ tool.function.name }} {% endfor %}
Call one with <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for tc in m.tool_calls %}<tool_call>
{{ {"name": tc.function.name, "arguments": tc.function.arguments} | tojson }}
</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// thinkTemplate opens a <think> block in the generation prompt when
// thinking is on, and shows an assistant message's reasoning.
const thinkTemplate = `{{ bos_token }}{%- for m in messages %}<|{{ m.role }}|>
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}
{% endfor %}{%- if add_generation_prompt %}<|assistant|>
{% if enable_thinking %}<think>
{% endif %}{% endif %}`

// reasoningTemplate shows an assistant message's reasoning in a <think>
// block; its generation prompt does not open one.
const reasoningTemplate = `{%- for m in messages %}<|{{ m.role }}|>
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>
{% endif %}{{ m.content }}
{% endfor %}{%- if add_generation_prompt %}<|assistant|>
{% endif %}`

func TestPrepare(t *testing.T) {
	chatml, ok := BuiltinJinja("chatml")
	require.True(t, ok)
	user := Message{Role: RoleUser, Content: "What is the weather in Paris?"}
	weather := Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}
	for _, tc := range []struct {
		name  string
		src   string
		tmpls func(*Templates)
		req   Request
		check func(t *testing.T, p *Plan)
		err   string
	}{
		{name: "generation prompt", src: chatml, req: Request{Messages: []Message{user}},
			check: func(t *testing.T, p *Plan) {
				assert.Equal(t, "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n", p.Prompt)
				assert.Equal(t, FormatContentOnly, p.Parse.Format)
				assert.Equal(t, ReasoningAuto, p.Parse.Reasoning)
				assert.Empty(t, p.Grammar)
			}},
		{name: "no generation prompt", src: chatml, req: Request{Messages: []Message{user}, NoGenerationPrompt: true},
			check: func(t *testing.T, p *Plan) {
				assert.Equal(t, "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n", p.Prompt)
			}},
		{name: "assistant prefill", src: chatml, req: Request{Messages: []Message{user, {Role: RoleAssistant, Content: "It is"}}},
			check: func(t *testing.T, p *Plan) {
				assert.True(t, strings.HasSuffix(p.Prompt, "<|im_start|>assistant\nIt is"), p.Prompt)
				assert.Equal(t, "It is", p.Prefill)
				assert.Equal(t, "It is sunny.", p.ParseOutput(" sunny.").Content)
			}},
		{name: "no assistant prefill", src: chatml,
			req: Request{Messages: []Message{user, {Role: RoleAssistant, Content: "It is"}}, NoPrefillAssistant: true},
			check: func(t *testing.T, p *Plan) {
				assert.Equal(t, "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\nIt is<|im_end|>\n<|im_start|>assistant\n", p.Prompt)
				assert.Empty(t, p.Prefill)
			}},
		{name: "no assistant prefill, continued as asked", src: chatml,
			req:   Request{Messages: []Message{user, {Role: RoleAssistant, Content: "It is"}}, NoPrefillAssistant: true, Continue: "auto", NoGenerationPrompt: true},
			check: func(t *testing.T, p *Plan) { assert.Equal(t, "It is", p.Prefill) }},
		{name: "two assistant messages, no prefill", src: chatml,
			req: Request{Messages: []Message{user, {Role: RoleAssistant, Content: "a"}, {Role: RoleAssistant, Content: "b"}}, NoPrefillAssistant: true},
			check: func(t *testing.T, p *Plan) {
				assert.True(t, strings.HasSuffix(p.Prompt, "b<|im_end|>\n<|im_start|>assistant\n"), p.Prompt)
			}},
		{name: "two assistant messages at the end", src: chatml,
			req: Request{Messages: []Message{user, {Role: RoleAssistant, Content: "a"}, {Role: RoleAssistant, Content: "b"}}},
			err: "cannot have 2 or more assistant messages at the end of the list"},
		{name: "no messages", src: chatml, req: Request{}, err: `"messages" must not be empty`},
		{name: "no messages allowed", src: chatml, req: Request{AllowEmpty: true},
			check: func(t *testing.T, p *Plan) { assert.Equal(t, "<|im_start|>assistant\n", p.Prompt) }},
		{name: "unknown reasoning format", src: chatml, req: Request{Messages: []Message{user}, Reasoning: "loud"},
			err: `chat: unknown reasoning format "loud"`},
		{name: "pure content: the tools rendered, no grammar, nothing parsed out", src: hermesTemplate,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}, PureContent: true},
			check: func(t *testing.T, p *Plan) {
				assert.Contains(t, p.Prompt, "Tools: get_weather")
				assert.Empty(t, p.Grammar)
				assert.False(t, p.ToolGrammar)
				assert.Empty(t, p.GrammarTriggers)
				assert.Equal(t, ParseOptions{Format: FormatContentOnly, Reasoning: ReasoningNone}, p.Parse)
				out := "<think>hm</think><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"
				msg := p.ParseOutput(out)
				assert.Empty(t, msg.ToolCalls)
				assert.Empty(t, msg.ReasoningContent)
				assert.Equal(t, out, msg.Content)
			}},
		{name: "pure content: no generic fallback", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, FallbackFormat: FormatGeneric, PureContent: true},
			check: func(t *testing.T, p *Plan) {
				assert.Empty(t, p.Grammar)
				assert.Equal(t, FormatContentOnly, p.Parse.Format)
			}},
		{name: "pure content keeps a response format", src: chatml,
			req:   Request{Messages: []Message{user}, Schema: json.RawMessage(`{"type":"object"}`), PureContent: true},
			check: func(t *testing.T, p *Plan) { assert.NotEmpty(t, p.Grammar) }},
		{name: "tools, auto: a lazy grammar", src: hermesTemplate, req: Request{Messages: []Message{user}, Tools: []Tool{weather}},
			check: func(t *testing.T, p *Plan) {
				assert.Contains(t, p.Prompt, "Tools: get_weather")
				assert.Equal(t, FormatHermes2Pro, p.Parse.Format)
				assert.True(t, p.Parse.ParseToolCalls)
				assert.True(t, p.ToolGrammar)
				assert.True(t, p.GrammarLazy)
				assert.Contains(t, p.Grammar, "get_weather")
				assert.NotEmpty(t, p.GrammarTriggers)
				msg := p.ParseOutput("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>")
				require.Len(t, msg.ToolCalls, 1)
				assert.Equal(t, ToolCall{Name: "get_weather", Arguments: `{"city": "Paris"}`}, msg.ToolCalls[0])
			}},
		{name: "tools, required: a grammar from the first token", src: hermesTemplate,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}},
			check: func(t *testing.T, p *Plan) {
				assert.False(t, p.GrammarLazy)
				assert.Contains(t, p.Grammar, "get_weather")
			}},
		{name: "tools, required among allowed ones: every tool in the prompt, the allowed in the grammar", src: hermesTemplate,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather, {Name: "get_time"}}, ToolChoice: ToolChoice{Mode: "required", Allowed: []string{"get_time"}}},
			check: func(t *testing.T, p *Plan) {
				assert.Contains(t, p.Prompt, "Tools: get_weather get_time ")
				assert.False(t, p.GrammarLazy)
				assert.Contains(t, p.Grammar, "get_time")
				assert.NotContains(t, p.Grammar, "get_weather")
			}},
		{name: "an allowed tool that is not among the tools: refused", src: hermesTemplate,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "auto", Allowed: []string{"get_time"}}},
			err: `tools: chat: allowed tool "get_time" is not among the tools`},
		{name: "tools, none: neither grammar nor tools in the prompt", src: hermesTemplate,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "none"}},
			check: func(t *testing.T, p *Plan) {
				assert.NotContains(t, p.Prompt, "Tools:")
				assert.Empty(t, p.Grammar)
				assert.False(t, p.Parse.ParseToolCalls)
			}},
		{name: "tools, required, on a template without a tool-call format: refused", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}},
			err: `tools: the chat template has no tool-call format, so tool choice "required" cannot be honoured: ` +
				`set FallbackFormat to chat.FormatGeneric to constrain calls to JSON, use tool choice auto, or give a template with tool calls`},
		{name: "a named function on a template without a tool-call format: refused", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "function", Function: "get_weather"}},
			err: `tools: the chat template has no tool-call format, so tool choice "function get_weather" cannot be honoured: ` +
				`set FallbackFormat to chat.FormatGeneric to constrain calls to JSON, use tool choice auto, or give a template with tool calls`},
		{name: "tools, auto, on a template without a tool-call format: free text", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}},
			check: func(t *testing.T, p *Plan) {
				assert.Empty(t, p.Grammar)
				assert.False(t, p.Parse.ParseToolCalls)
			}},
		{name: "tools, required, free text as llama-server", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}, FreeTextToolChoice: true},
			check: func(t *testing.T, p *Plan) {
				assert.Equal(t, "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n", p.Prompt)
				assert.Empty(t, p.Grammar)
				assert.False(t, p.ToolGrammar)
				assert.False(t, p.Parse.ParseToolCalls)
				out := `{"tool_call": {"name": "get_weather", "arguments": {}}}`
				assert.Equal(t, Message{Role: RoleAssistant, Content: out}, p.ParseOutput(out))
			}},
		{name: "tools, required, generic fallback: tools listed, grammar from the first token", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}, FallbackFormat: FormatGeneric},
			check: func(t *testing.T, p *Plan) {
				assert.Contains(t, p.Prompt, "<|im_start|>system\nYou can call any of the following tools")
				assert.Contains(t, p.Prompt, `"name": "get_weather"`)
				assert.Contains(t, p.Prompt, GenericToolsPrompt)
				assert.Equal(t, FormatGeneric, p.Parse.Format)
				assert.True(t, p.ToolGrammar)
				assert.False(t, p.GrammarLazy)
				assert.NotContains(t, p.Grammar, `\"response\"`)
				msg := p.ParseOutput(`{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`)
				require.Len(t, msg.ToolCalls, 1)
				assert.Equal(t, "get_weather", msg.ToolCalls[0].Name)
			}},
		{name: "tools, auto, generic fallback: a call or a response", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, FallbackFormat: FormatGeneric},
			check: func(t *testing.T, p *Plan) {
				assert.Contains(t, p.Grammar, `\"response\"`)
				assert.Equal(t, "Sunny.", p.ParseOutput(`{"response": "Sunny."}`).Content)
			}},
		{name: "generic fallback: calls and results written as the template's text", src: strictRoles,
			req: Request{Messages: []Message{user,
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
				{Role: RoleTool, ToolCallID: "c1", Name: "get_weather", Content: `{"sky":"sunny"}`},
				{Role: RoleTool, ToolCallID: "c2", Name: "get_weather", Content: "not JSON"},
			}, Tools: []Tool{weather}, FallbackFormat: FormatGeneric},
			check: func(t *testing.T, p *Plan) {
				assert.Contains(t, p.Prompt, "<assistant>"+`{"tool_call":{"name":"get_weather","arguments":{"city":"Paris"}}}`+"\n")
				assert.Contains(t, p.Prompt, "<user>"+`{"tool_response":{"tool":"get_weather","tool_call_id":"c1","content":{"sky":"sunny"}}}`+"\n"+
					`{"tool_response":{"tool":"get_weather","tool_call_id":"c2","content":"not JSON"}}`+"\n")
			}},
		{name: "generic fallback, tool choice none: history still written, no grammar", src: strictRoles,
			req: Request{Messages: []Message{user,
				{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{}`}, {Name: "get_weather", Arguments: `x`}}},
				{Role: RoleTool, Content: "a"}, {Role: RoleTool, Content: "b"},
			}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "none"}, FallbackFormat: FormatGeneric},
			check: func(t *testing.T, p *Plan) {
				assert.Contains(t, p.Prompt, `<assistant>{"tool_calls":[{"name":"get_weather","arguments":{}},{"name":"get_weather","arguments":"x"}]}`)
				assert.NotContains(t, p.Prompt, "following tools")
				assert.Empty(t, p.Grammar)
				assert.False(t, p.Parse.ParseToolCalls)
				out := `{"tool_call": {"name": "get_weather", "arguments": {}}}`
				assert.Equal(t, Message{Role: RoleAssistant, Content: out}, p.ParseOutput(out), "no call read under none")
			}},
		{name: "without the fallback, a strict template refuses tool results", src: strictRoles,
			req: Request{Messages: []Message{user, {Role: RoleAssistant, Content: "x"}, {Role: RoleTool, Content: "a"}}},
			err: "cannot apply the chat template: chat: template raised: roles alternate"},
		{name: "a fallback format other than generic", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, FallbackFormat: FormatHermes2Pro},
			err: "tools: fallback tool-call format Hermes 2 Pro is not supported (only chat.FormatGeneric)"},
		{name: "a template with its own format ignores the fallback", src: hermesTemplate,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, FallbackFormat: FormatGeneric},
			check: func(t *testing.T, p *Plan) {
				assert.Equal(t, FormatHermes2Pro, p.Parse.Format)
				assert.NotContains(t, p.Prompt, GenericToolsPrompt)
			}},
		{name: "a named function not among the tools", src: chatml,
			req: Request{Messages: []Message{user}, Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "function", Function: "nope"}},
			err: `tools: chat: tool choice names unknown function "nope"`},
		{name: "tools and a grammar", src: hermesTemplate, req: Request{Messages: []Message{user}, Tools: []Tool{weather}, Grammar: `root ::= "x"`},
			err: "cannot use custom grammar constraints with tools"},
		{name: "tools and an empty schema: the tools alone", src: hermesTemplate, req: Request{Messages: []Message{user}, Tools: []Tool{weather}, Schema: json.RawMessage(`{}`)},
			check: func(t *testing.T, p *Plan) {
				assert.True(t, p.GrammarLazy)
				assert.False(t, p.JSONContent)
			}},
		{name: "schema: fenced JSON, content alone", src: chatml,
			req: Request{Messages: []Message{user}, Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)},
			check: func(t *testing.T, p *Plan) {
				assert.True(t, p.JSONContent)
				assert.Contains(t, p.Grammar, "```json")
				assert.Contains(t, p.Grammar, "response-format ::=")
				assert.Equal(t, `{"a": 1}`, p.ParseOutput("\n```json\n{\"a\": 1}\n```\n").Content)
			}},
		{name: "schema {}: nothing asked", src: chatml, req: Request{Messages: []Message{user}, Schema: json.RawMessage(`{}`)},
			check: func(t *testing.T, p *Plan) {
				assert.Empty(t, p.Grammar)
				assert.False(t, p.JSONContent)
			}},
		{name: "plain schema {}: an object", src: chatml, req: Request{Messages: []Message{user}, Schema: json.RawMessage(`{}`), PlainSchema: true},
			check: func(t *testing.T, p *Plan) {
				assert.NotEmpty(t, p.Grammar)
				assert.NotContains(t, p.Grammar, "```json")
				assert.False(t, p.JSONContent)
			}},
		{name: "schema and a grammar", src: chatml, req: Request{Messages: []Message{user}, Schema: json.RawMessage(`{"type":"string"}`), Grammar: `root ::= "x"`},
			err: "cannot use response_format with grammar or json_schema"},
		{name: "a grammar alone stays the caller's", src: chatml, req: Request{Messages: []Message{user}, Grammar: `root ::= "x"`},
			check: func(t *testing.T, p *Plan) { assert.Empty(t, p.Grammar) }},
		{name: "BOS the tokenizer adds is removed", src: thinkTemplate, tmpls: func(t *Templates) { t.AddBOS, t.Thinking = true, "off" },
			req: Request{Messages: []Message{user}},
			check: func(t *testing.T, p *Plan) {
				assert.Equal(t, "<|user|>\nWhat is the weather in Paris?\n<|assistant|>\n", p.Prompt)
			}},
		{name: "thinking on opens the block", src: thinkTemplate, tmpls: func(t *Templates) { t.Thinking = "on" },
			req: Request{Messages: []Message{user}},
			check: func(t *testing.T, p *Plan) {
				assert.True(t, strings.HasSuffix(p.Prompt, "<think>\n"), p.Prompt)
				assert.True(t, p.Parse.ThinkingForcedOpen)
				start, end, ok, err := p.ThinkingTags()
				require.NoError(t, err)
				assert.True(t, ok)
				assert.Equal(t, "<think>", strings.TrimSpace(start))
				assert.Equal(t, "</think>", end)
				msg := p.ParseOutput("Paris is near.</think>Sunny.")
				assert.Equal(t, "Paris is near.", msg.ReasoningContent)
				assert.Equal(t, "Sunny.", msg.Content)
			}},
		{name: "a request's enable_thinking wins", src: thinkTemplate, tmpls: func(t *Templates) { t.Thinking = "on" },
			req: Request{Messages: []Message{user}, Extra: map[string]any{"enable_thinking": false}},
			check: func(t *testing.T, p *Plan) {
				assert.NotContains(t, p.Prompt, "<think>")
				assert.False(t, p.Parse.ThinkingForcedOpen)
			}},
		{name: "continuing the reasoning", src: reasoningTemplate,
			req: Request{Messages: []Message{user, {Role: RoleAssistant, ReasoningContent: "Paris is"}}, Continue: "reasoning_content", NoGenerationPrompt: true},
			check: func(t *testing.T, p *Plan) {
				assert.True(t, strings.HasSuffix(p.Prompt, "<|assistant|>\n<think>\nParis is"), p.Prompt)
				assert.True(t, p.Parse.ThinkingForcedOpen)
				// Read back, the reasoning starts with the message's, as
				// llama-server's does.
				assert.Equal(t, "Paris is", p.Prefill)
				msg := p.ParseOutput(" near.\n</think>\nSunny.")
				assert.Equal(t, "Paris is near.", msg.ReasoningContent)
				assert.Equal(t, "Sunny.", msg.Content)
			}},
		{name: "continuing the content after the reasoning", src: reasoningTemplate,
			req: Request{Messages: []Message{user, {Role: RoleAssistant, ReasoningContent: "Near.", Content: "It is"}}},
			check: func(t *testing.T, p *Plan) {
				assert.True(t, strings.HasSuffix(p.Prompt, "<|assistant|>\n<think>\nNear.\n</think>\nIt is"), p.Prompt)
				assert.Equal(t, "It is", p.Prefill)
			}},
		{name: "template error", src: `{{ raise_exception("no") }}`, req: Request{Messages: []Message{user}},
			err: "cannot apply the chat template: chat: template raised: no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := testTemplates(t, tc.src)
			if tc.tmpls != nil {
				tc.tmpls(tm)
			}
			p, err := tm.Prepare(tc.req)
			if tc.err != "" {
				var re *RequestError
				require.True(t, errors.As(err, &re), "%v", err)
				assert.Equal(t, tc.err, re.Msg)
				return
			}
			require.NoError(t, err)
			tc.check(t, p)
		})
	}
}

// A streamed plan's deltas add up to the whole parse.
// strictRoles knows system, user and assistant only, as Gemma 3's.
const strictRoles = `{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant'] %}{{ raise_exception('roles alternate') }}{% endif %}` +
	`<{{ m.role }}>{{ m.content }}{{ "\n" }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`

func TestPlanStream(t *testing.T) {
	tm := testTemplates(t, hermesTemplate)
	p, err := tm.Prepare(Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}, Tools: []Tool{{Name: "f"}}})
	require.NoError(t, err)
	out := "Sure. <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	s := p.NewStream()
	var got Message
	add := func(d Delta) { addDelta(&got, d) }
	for i := 0; i < len(out); i += 5 {
		add(s.Push(out[i:min(i+5, len(out))]))
	}
	add(s.Finish(false))
	whole := p.ParseOutput(out)
	assert.Equal(t, whole.Content, got.Content)
	assert.Equal(t, whole.ToolCalls, got.ToolCalls)
	assert.Equal(t, []ToolCall{{Name: "f", Arguments: `{"a": 1}`}}, got.ToolCalls)
}

// addDelta adds a stream's delta to the message it builds.
func addDelta(m *Message, d Delta) {
	m.Content += d.Content
	m.ReasoningContent += d.ReasoningContent
	for _, c := range d.ToolCalls {
		if c.Index == len(m.ToolCalls) {
			m.ToolCalls = append(m.ToolCalls, ToolCall{})
		}
		m.ToolCalls[c.Index].Name += c.Name
		m.ToolCalls[c.Index].Arguments += c.ArgumentsDelta
	}
}

// assertGrammar asserts that grammar g matches each of accepts whole and
// none of refuses.
func assertGrammar(t *testing.T, g string, accepts, refuses []string) {
	t.Helper()
	for _, text := range accepts {
		assert.True(t, grammarAccepts(t, g, text), "refused %q", text)
	}
	for _, text := range refuses {
		assert.False(t, grammarAccepts(t, g, text), "accepted %q", text)
	}
}

// grammarAccepts reports whether GBNF grammar g matches text whole.
func grammarAccepts(t *testing.T, g, text string) bool {
	t.Helper()
	gr, err := grammar.Parse(g, "root")
	require.NoError(t, err, g)
	st := gr.Stacks()
	return (text == "" || st.AcceptToken(-1, []byte(text))) && st.AtEnd()
}

// Tools with a response format (OpenAI's agents with an output type): under
// auto the answer is calls or the schema's JSON, from the first token;
// where no call can come, the JSON alone.
func TestPrepareToolsWithSchema(t *testing.T) {
	chatml, ok := BuiltinJinja("chatml")
	require.True(t, ok)
	user := Message{Role: RoleUser, Content: "weather?"}
	weather := Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}`)
	const (
		call    = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
		answer  = `{"answer": 42}`
		fenced  = "```json\n{\"answer\": 42}\n```"
		generic = `{"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo"}}}`
		wrong   = `{"answer": "many"}`
	)
	tests := []struct {
		name      string
		src       string
		req       Request
		accepts   []string
		refuses   []string
		jsonOnly  bool // content is the JSON alone
		toolParse bool
	}{
		{name: "auto: a call or the JSON", src: hermesTemplate,
			req:     Request{Tools: []Tool{weather}, Schema: schema},
			accepts: []string{call, answer, fenced, " " + answer}, refuses: []string{wrong, "free text", "Sure. " + call},
			jsonOnly: true, toolParse: true},
		{name: "required: a call only", src: hermesTemplate,
			req:     Request{Tools: []Tool{weather}, Schema: schema, ToolChoice: ToolChoice{Mode: "required"}},
			accepts: []string{call}, refuses: []string{answer}, toolParse: true},
		{name: "named function: a call only", src: hermesTemplate,
			req:     Request{Tools: []Tool{weather}, Schema: schema, ToolChoice: ToolChoice{Mode: "function", Function: "get_weather"}},
			accepts: []string{call}, refuses: []string{answer}, toolParse: true},
		{name: "tool choice none: the JSON", src: hermesTemplate,
			req:     Request{Tools: []Tool{weather}, Schema: schema, ToolChoice: ToolChoice{Mode: "none"}},
			accepts: []string{answer, fenced}, refuses: []string{call}, jsonOnly: true},
		{name: "generic envelope: a call or the JSON as the response", src: chatml,
			req:     Request{Tools: []Tool{weather}, Schema: schema, FallbackFormat: FormatGeneric},
			accepts: []string{generic, `{"response": {"answer": 42}}`}, refuses: []string{`{"response": "42"}`, answer},
			jsonOnly: true, toolParse: true},
		{name: "a template with no call format: the JSON", src: chatml,
			req:     Request{Tools: []Tool{weather}, Schema: schema},
			accepts: []string{answer}, refuses: []string{call}, jsonOnly: true},
		{name: "pure content: the JSON", src: hermesTemplate,
			req:     Request{Tools: []Tool{weather}, Schema: schema, PureContent: true},
			accepts: []string{answer}, refuses: []string{call}, jsonOnly: true},
		{name: "plain schema: no fence", src: hermesTemplate,
			req:     Request{Tools: []Tool{weather}, Schema: schema, PlainSchema: true},
			accepts: []string{call, answer}, refuses: []string{fenced}, toolParse: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Messages = []Message{user}
			p, err := testTemplates(t, tc.src).Prepare(tc.req)
			require.NoError(t, err)
			require.NotEmpty(t, p.Grammar)
			assert.False(t, p.GrammarLazy)
			assert.Empty(t, p.GrammarTriggers)
			assert.Equal(t, tc.jsonOnly, p.JSONContent)
			assert.Equal(t, tc.toolParse, p.Parse.ParseToolCalls)
			assertGrammar(t, p.Grammar, tc.accepts, tc.refuses)
		})
	}
	// What the model wrote is read back: a call, or the JSON as content.
	p, err := testTemplates(t, hermesTemplate).Prepare(Request{Messages: []Message{user}, Tools: []Tool{weather}, Schema: schema})
	require.NoError(t, err)
	msg := p.ParseOutput(call)
	require.Len(t, msg.ToolCalls, 1)
	assert.Equal(t, "get_weather", msg.ToolCalls[0].Name)
	msg = p.ParseOutput(fenced)
	assert.Empty(t, msg.ToolCalls)
	assert.Equal(t, answer, msg.Content)

	// A schema that cannot be converted is the response format's error,
	// whether it is converted alone or inside the tools' grammar.
	bad := json.RawMessage(`{"$ref":"#/definitions/missing"}`)
	for _, req := range []Request{
		{Tools: []Tool{weather}, Schema: bad},
		{Tools: []Tool{weather}, Schema: bad, ToolChoice: ToolChoice{Mode: "required"}},
		{Tools: []Tool{weather}, Schema: bad, ToolChoice: ToolChoice{Mode: "none"}},
		{Tools: []Tool{weather}, Schema: bad, PureContent: true},
		{Schema: bad},
	} {
		req.Messages = []Message{user}
		_, err := testTemplates(t, hermesTemplate).Prepare(req)
		var re *RequestError
		require.ErrorAs(t, err, &re)
		assert.True(t, strings.HasPrefix(re.Msg, "invalid json_schema: "), "%s", re.Msg)
	}
}

// A response format whose properties are named as the rules that wrap its
// grammar (response-format, root, space; answer-root and reasoning-text
// where a thinking model reasons first) keeps its own rules, alone, with
// tools, and after reasoning.
func TestPrepareSchemaRuleNames(t *testing.T) {
	user := Message{Role: RoleUser, Content: "x"}
	weather := Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}
	for _, key := range []string{"response-format", "root", "space", "answer-root", "reasoning-text", "reasoning-text-1", "reasoning-gap", "tool-calls"} {
		schema := json.RawMessage(`{"type":"object","properties":{"` + key + `":{"type":"string","maxLength":3}},"required":["` + key + `"]}`)
		good, bad := `{"`+key+`": "ab"}`, `{"`+key+`": "abcd"}`
		for _, tc := range []struct {
			name, src string
			tools     []Tool
			think     string // reasoning before the answer
		}{
			{name: "schema", src: hermesTemplate},
			{name: "tools and schema", src: hermesTemplate, tools: []Tool{weather}},
			{name: "after reasoning", src: thinkTemplate, think: "Hm.</think>"},
			{name: "tools and schema after reasoning", src: thinkTemplate, tools: []Tool{weather}, think: "Hm.</think>"},
		} {
			t.Run(key+"/"+tc.name, func(t *testing.T) {
				p, err := testTemplates(t, tc.src).Prepare(Request{Messages: []Message{user}, Tools: tc.tools, Schema: schema,
					FallbackFormat: FormatGeneric, Extra: map[string]any{"enable_thinking": true}})
				require.NoError(t, err)
				good, bad := good, bad
				if tc.tools != nil && p.Parse.Format == FormatGeneric {
					good, bad = `{"response": `+good+`}`, `{"response": `+bad+`}`
				}
				assertGrammar(t, p.Grammar, []string{tc.think + good}, []string{tc.think + bad})
			})
		}
	}
}

// ThinkingTags reuses what Prepare rendered: for every template of
// llama.cpp's folder and every way a chat can end (a new turn, a prefill,
// a message continued from its content or its reasoning, no generation
// prompt), it finds what a plan that renders everything again finds.
func TestPlanThinkingTagsReusesRenders(t *testing.T) {
	dir := templatesDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	user := Message{Role: RoleUser, Content: "Weather in Oslo?"}
	prefill := Message{Role: RoleAssistant, Content: "It is", ReasoningContent: "Hm."}
	shapes := []struct {
		name string
		req  Request
	}{
		{"new turn", Request{Messages: []Message{user}}},
		{"new turn with tools", Request{Messages: []Message{user}, Tools: grammarTools}},
		{"prefill", Request{Messages: []Message{user, prefill}}},
		{"continue reasoning", Request{Messages: []Message{user, prefill}, Continue: "reasoning_content", NoGenerationPrompt: true}},
		{"no generation prompt", Request{Messages: []Message{user}, NoGenerationPrompt: true}},
	}
	ran := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		tmpls := testTemplates(t, string(b))
		for _, sh := range shapes {
			p, err := tmpls.Prepare(sh.req)
			if err != nil {
				continue // the template's own rules refuse this chat
			}
			ran[sh.name]++
			name := filepath.Base(f) + "/" + sh.name
			start, end, ok, err := p.ThinkingTags()
			again := &Plan{tmpls: p.tmpls, hist: p.hist, tools: p.tools, extra: p.extra, Parse: p.Parse}
			wantStart, wantEnd, wantOK, wantErr := again.thinkingTags()
			assert.Equal(t, []any{wantStart, wantEnd, wantOK, wantErr}, []any{start, end, ok, err}, name)
			s2, e2, ok2, err2 := p.ThinkingTags()
			assert.Equal(t, []any{start, end, ok, err}, []any{s2, e2, ok2, err2}, name)
		}
	}
	for _, sh := range shapes {
		assert.Greater(t, ran[sh.name], len(files)*3/4, "%s: too few templates take this chat", sh.name)
	}
	t.Logf("templates: %d; chats compared: %v", len(files), ran)
}

// With reasoning format none, a generation prompt that opens a thinking
// block has that opening written at the start of the content, so that it
// holds the whole block, as llama-server's does (measured on v0.4.0:
// "<think>\n" for Qwen 3.5, "<|START_THINKING|>" for Cohere2 MoE).
// Nothing is added where the prompt opens no block, where a grammar
// applies from the first token (the model cannot close the block), or
// where the reasoning is parsed.
func TestPrepareReasoningNoneKeepsOpenedBlock(t *testing.T) {
	schema := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		file      string
		reasoning string
		thinking  any // enable_thinking (nil: the template's default)
		tools     bool
		schema    bool
		output    string
		content   string
	}{
		{file: "Qwen3.5-4B.jinja", reasoning: "none", thinking: true, output: "Hm.\n</think>\n\nHi", content: "<think>\nHm.\n</think>\n\nHi"},
		{file: "Qwen3.5-4B.jinja", reasoning: "none", thinking: true, tools: true, output: "Hm.\n</think>\n\nHi", content: "<think>\nHm.\n</think>\n\nHi"},
		{file: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", reasoning: "none", output: "Hm.</think>Hi", content: "<think>\nHm.</think>Hi"},
		{file: "Cohere2MoE.jinja", reasoning: "none", output: "Hm.<|END_THINKING|><|START_TEXT|>Hi<|END_TEXT|>", content: "<|START_THINKING|>Hm.<|END_THINKING|>Hi"},
		// Kimi K3's parser drops the tags: the block's text alone, as llama-server's.
		{file: "Kimi-K3.jinja", reasoning: "none", output: "Hm.<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|><|close|>message<|sep|>", content: "Hm.Hi"},
		{file: "Qwen-Qwen3-0.6B.jinja", reasoning: "none", output: "<think>Hm.</think>Hi", content: "<think>Hm.</think>Hi"},
		{file: "Qwen-Qwen3-0.6B.jinja", reasoning: "none", thinking: false, output: "Hi", content: "Hi"},
		{file: "Qwen3.5-4B.jinja", reasoning: "none", thinking: true, schema: true, output: `{"a": 1}`, content: `{"a": 1}`},
		{file: "Qwen3.5-4B.jinja", reasoning: "auto", thinking: true, output: "Hm.\n</think>\n\nHi", content: "Hi"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s/thinking=%v/tools=%v/schema=%v", tc.file, tc.reasoning, tc.thinking, tc.tools, tc.schema), func(t *testing.T) {
			req := Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}, Reasoning: tc.reasoning}
			if tc.thinking != nil {
				req.Extra = map[string]any{"enable_thinking": tc.thinking}
			}
			if tc.tools {
				req.Tools = grammarTools
			}
			if tc.schema {
				req.Schema = schema
			}
			p, err := realTemplate(t, tc.file).Prepare(req)
			require.NoError(t, err)
			msg := p.ParseOutput(tc.output)
			assert.Equal(t, tc.content, msg.Content)
			assertStreamed(t, p, tc.output, msg)
		})
	}
}

// Kimi K3's generation prompt opens its think section, or, with the
// template's thinking off, its response section: the plan reads the
// output from there, gives the think tags for a thinking budget, and a
// message continued has its reasoning and content in their sections, as
// llama.cpp writes them.
func TestPrepareKimiK3(t *testing.T) {
	user := Message{Role: RoleUser, Content: "Weather in Oslo?"}
	tests := []struct {
		name      string
		req       Request
		suffix    string // the prompt's end
		forced    bool
		tags      bool // ThinkingTags finds the think tags (from the generation prompt)
		prefill   string
		output    string
		reasoning string
		content   string
	}{
		{name: "thinking", req: Request{Messages: []Message{user}}, suffix: kimi3MsgStart + kimi3Think, forced: true, tags: true,
			output: "Hm.<|close|>think<|sep|><|open|>response<|sep|>Sunny.<|close|>response<|sep|><|close|>message<|sep|>", reasoning: "Hm.", content: "Sunny."},
		{name: "thinking off", req: Request{Messages: []Message{user}, Extra: map[string]any{"thinking": false}}, suffix: kimi3MsgStart + kimi3Resp,
			output: "Sunny.<|close|>response<|sep|><|close|>message<|sep|>", content: "Sunny."},
		{name: "continuing the content", req: Request{Messages: []Message{user, {Role: RoleAssistant, ReasoningContent: "Near.", Content: "It is"}}},
			suffix: kimi3MsgStart + kimi3Think + "Near." + kimi3ThinkEnd + kimi3Resp + "It is", prefill: "It is", tags: true,
			output: " sunny.<|close|>response<|sep|><|close|>message<|sep|>", content: "It is sunny."},
		{name: "continuing the reasoning", req: Request{Messages: []Message{user, {Role: RoleAssistant, ReasoningContent: "Paris is"}},
			Continue: "reasoning_content", NoGenerationPrompt: true},
			suffix: kimi3MsgStart + kimi3Think + "Paris is", forced: true, tags: true, prefill: "Paris is",
			output: " sunny.<|close|>think<|sep|><|open|>response<|sep|>Sunny.<|close|>response<|sep|>", reasoning: "Paris is sunny.", content: "Sunny."},
	}
	tmpls := realTemplate(t, "Kimi-K3.jinja")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tmpls.Prepare(tc.req)
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(p.Prompt, tc.suffix), "%q", p.Prompt)
			assert.Equal(t, tc.forced, p.Parse.ThinkingForcedOpen)
			assert.Equal(t, tc.prefill, p.Prefill)
			start, end, ok, err := p.ThinkingTags()
			require.NoError(t, err)
			assert.Equal(t, tc.tags, ok)
			if tc.tags {
				assert.Equal(t, []string{kimi3Think, kimi3ThinkEnd}, []string{start, end})
			}
			if tc.output == "" {
				return
			}
			msg := p.ParseOutput(tc.output)
			assert.Equal(t, tc.reasoning, msg.ReasoningContent)
			assert.Equal(t, tc.content, msg.Content)
			assertStreamed(t, p, tc.output, msg)
		})
	}
}

// A continued message's prompt ends as llama.cpp v0.4.0 writes it
// (tests/test-chat.cpp's test_template_generation_prompt, and the
// specialized handlers of MiniCPM5 and Cohere2 MoE): the reasoning between
// the markers the template shows, or those the generation prompt opens,
// or the format's own where the template drops the last turn's
// reasoning; closed before continued content, open where the reasoning is
// continued. Read back, whole and streamed, the answer's reasoning or
// content starts with the message's, as llama-server's does.
func TestPrepareContinuationAsLlamaCpp(t *testing.T) {
	tests := []struct {
		file               string
		basic              string // the generation prompt of a new turn
		content, reasoning string // the prompt's end when continuing either
		afterContent       string // what the model writes next, after "Hello, "
		afterReasoning     string // and after "I'm"
	}{
		{"Qwen3.5-4B.jinja", "<|im_start|>assistant\n<think>\n",
			"<|im_start|>assistant\n<think>\nI'm thinking\n</think>\n\nHello, ", "<|im_start|>assistant\n<think>\nI'm",
			"world!", " thinking\n</think>\n\nHello, world!"},
		{"openai-gpt-oss-120b.jinja", "<|start|>assistant",
			"<|start|>assistant<|channel|>analysis<|message|>I'm thinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, ",
			"<|start|>assistant<|channel|>analysis<|message|>I'm",
			"world!", " thinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!"},
		{"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "[/INST]",
			"[THINK]I'm thinking[/THINK]Hello, ", "[THINK]I'm",
			"world!", " thinking[/THINK]Hello, world!"},
		{"google-gemma-4-31B-it.jinja", "<|turn>model\n",
			"<|turn>model\n<|channel>thought\nI'm thinking<channel|>Hello, ", "<|turn>model\n<|channel>thought\nI'm",
			"world!", " thinking<channel|>Hello, world!"},
		{"meetkai-functionary-medium-v3.2.jinja", "<|start_header_id|>assistant<|end_header_id|>\n\n>>>",
			"<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\nHello, ", "<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n",
			"world!", "Hello, world!"},
		{"Reka-Edge.jinja", "assistant: <think>\n",
			"assistant: <think>\nI'm thinking\n</think>\n\nHello, ", "assistant: <think>\nI'm",
			"world!", " thinking\n</think>\n\nHello, world!"},
		{"moonshotai-Kimi-K2.jinja", "<|im_assistant|>assistant<|im_middle|>",
			"<|im_assistant|>assistant<|im_middle|><think>I'm thinking</think>Hello, ", "<|im_assistant|>assistant<|im_middle|><think>I'm",
			"world!", " thinking</think>Hello, world!"},
		{"LFM2-8B-A1B.jinja", "<|im_start|>assistant\n",
			"<|im_start|>assistant\n<think>I'm thinking</think>Hello, ", "<|im_start|>assistant\n<think>I'm",
			"world!", " thinking</think>Hello, world!"},
		{"LFM2.5-Instruct.jinja", "<|im_start|>assistant\n",
			"<|im_start|>assistant\n<think>I'm thinking</think>Hello, ", "<|im_start|>assistant\n<think>I'm",
			"world!", " thinking</think>Hello, world!"},
		{"GigaChat3-10B-A1.8B.jinja", "assistant<|role_sep|>\n",
			"assistant<|role_sep|>\nHello, ", "assistant<|role_sep|>\n",
			"world!", "Hello, world!"}, // the model does not think: the reasoning is dropped
		{"openbmb-MiniCPM5-1B.jinja", "<|im_start|>assistant\n<think>\n",
			"<|im_start|>assistant\n<think>\nI'm thinking\n</think>\n\nHello, ", "<|im_start|>assistant\n<think>\nI'm",
			"world!", " thinking\n</think>\n\nHello, world!"},
		{"Cohere2MoE.jinja", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>",
			"<|CHATBOT_TOKEN|><|START_THINKING|>I'm thinking<|END_THINKING|><|START_TEXT|>Hello, ", "<|CHATBOT_TOKEN|><|START_THINKING|>I'm",
			"world!<|END_TEXT|>", " thinking<|END_THINKING|><|START_TEXT|>Hello, world!<|END_TEXT|>"},
	}
	sys := Message{Role: RoleSystem, Content: "You are a helpful assistant."}
	user := Message{Role: RoleUser, Content: "Hello"}
	thinks := func(reasoning string) string { // what the answer's reasoning reads
		if reasoning == "" {
			return ""
		}
		return "I'm thinking"
	}
	for _, tc := range tests {
		tmpls := realTemplate(t, tc.file)
		t.Run(tc.file, func(t *testing.T) {
			extra := map[string]any{"enable_thinking": true}
			p, err := tmpls.Prepare(Request{Messages: []Message{sys, user}, Extra: extra})
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(p.Prompt, tc.basic), "new turn: %q", p.Prompt)

			p, err = tmpls.Prepare(Request{Messages: []Message{sys, user, {Role: RoleAssistant, Content: "Hello, ", ReasoningContent: "I'm thinking"}},
				Continue: "content", NoGenerationPrompt: true, Extra: extra})
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(p.Prompt, tc.content), "content: %q", p.Prompt)
			msg := p.ParseOutput(tc.afterContent)
			assert.Equal(t, "Hello, world!", msg.Content)
			assert.Empty(t, msg.ReasoningContent)
			assertStreamed(t, p, tc.afterContent, msg)

			p, err = tmpls.Prepare(Request{Messages: []Message{sys, user, {Role: RoleAssistant, ReasoningContent: "I'm"}},
				Continue: "reasoning_content", NoGenerationPrompt: true, Extra: extra})
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(p.Prompt, tc.reasoning), "reasoning: %q", p.Prompt)
			msg = p.ParseOutput(tc.afterReasoning)
			assert.Equal(t, "Hello, world!", msg.Content)
			assert.Equal(t, thinks(strings.TrimPrefix(tc.afterReasoning, "Hello, world!")), msg.ReasoningContent)
			assertStreamed(t, p, tc.afterReasoning, msg)
		})
	}
}
