package chat

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// untilMarker matches a text exactly when the parser's thinking block,
// which ends at the first of the end marker and the stops (findFirst),
// ends with the end marker at the text's end: for every format's markers,
// and for markers that overlap themselves and each other, hold several
// bytes a character, or GBNF's special characters.
func TestUntilMarker(t *testing.T) {
	type markers struct {
		end   string
		stops []string
	}
	sets := []markers{
		{end: "abab"}, {end: "aab"}, {end: "aaa"}, {end: "a"}, {end: "abcabd"},
		{end: "é</é>"}, {end: "日本日"}, {end: "🤔x🤔"},
		{end: `"`}, {end: `\`}, {end: `]`}, {end: `^`}, {end: `-`}, {end: `[^a-]`}, {end: `\"]`}, {end: `[\]^-"`},
		{end: "ab", stops: []string{"xab"}},         // a stop ending with the end marker, begun first
		{end: "xab", stops: []string{"ab"}},         // the end marker ending with a stop, begun first
		{end: "</a>", stops: []string{"<b>", "<a"}}, // stops sharing the end marker's start
		{end: "aba", stops: []string{"bab"}},
	}
	for f := range formatCount {
		if _, end, stops := thinkMarkers(f); end != "" {
			sets = append(sets, markers{end: end, stops: stops})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, m := range sets {
		t.Run(fmt.Sprintf("%q %q", m.end, m.stops), func(t *testing.T) {
			g := untilMarker("root", m.end, m.stops)
			words := append([]string{m.end}, m.stops...)
			alphabet := []rune(strings.Join(words, "") + "xé\n")
			texts := []string{"", m.end, "x" + m.end, m.end + "x", m.end + m.end, m.end[:len(m.end)-1]}
			for _, s := range m.stops {
				texts = append(texts, s+m.end, s, m.end+s)
			}
			for range 400 {
				var sb strings.Builder
				for range rng.IntN(16) {
					sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
				}
				texts = append(texts, sb.String(), sb.String()+m.end)
			}
			for _, s := range texts {
				i, w := findFirst(s, 0, words)
				want := w == m.end && i == len(s)-len(m.end)
				assert.Equal(t, want, grammarAccepts(t, g, s), "%q", s)
			}
		})
	}
}

// qwenLikeTemplate thinks unless told not to: the model opens its own
// <think> block; with enable_thinking false the generation prompt holds
// an empty one.
const qwenLikeTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}`

// A grammar that applies from the first token lets a thinking model think
// first: in the block the generation prompt opened, or in one it opens.
func TestPrepareReasoningBeforeGrammar(t *testing.T) {
	user := Message{Role: RoleUser, Content: "x"}
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	weather := Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}
	on, off := map[string]any{"enable_thinking": true}, map[string]any{"enable_thinking": false}
	const answer = `{"a": 1}`
	tests := []struct {
		name      string
		src       string
		req       Request
		accepts   []string
		refuses   []string
		reasoning string // of the first accepted text
	}{
		{name: "open block: reasoning, its end, the answer", src: thinkTemplate,
			req:       Request{Schema: schema, Extra: on},
			accepts:   []string{"Let me see.</think>\n\n" + answer, "</think>" + answer, "a<b</think>" + answer},
			refuses:   []string{answer, "x</think>y</think>" + answer, "x</think>free text"},
			reasoning: "Let me see."},
		{name: "thinking off: the answer", src: thinkTemplate,
			req:     Request{Schema: schema, Extra: off},
			accepts: []string{answer}, refuses: []string{"x</think>" + answer}},
		{name: "reasoning format none: the grammar as it was", src: thinkTemplate,
			req:     Request{Schema: schema, Extra: on, Reasoning: "none"},
			accepts: []string{answer}, refuses: []string{"x</think>" + answer}},
		{name: "a block the model may open", src: qwenLikeTemplate,
			req:       Request{Schema: schema},
			accepts:   []string{"<think>\nHm.\n</think>\n\n" + answer, answer},
			refuses:   []string{"Hm.</think>" + answer, "<think>Hm." + answer},
			reasoning: "Hm."},
		{name: "a block the model may open, thinking off", src: qwenLikeTemplate,
			req:     Request{Schema: schema, Extra: off},
			accepts: []string{answer}, refuses: []string{"<think>Hm.</think>" + answer}},
		{name: "a call required, generic envelope", src: thinkTemplate,
			req:       Request{Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}, FallbackFormat: FormatGeneric, Extra: on},
			accepts:   []string{`Call it.</think>{"tool_call": {"name": "get_weather", "arguments": {}}}`},
			refuses:   []string{`{"tool_call": {"name": "get_weather", "arguments": {}}}`},
			reasoning: "Call it."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Messages = []Message{user}
			p, err := testTemplates(t, tc.src).Prepare(tc.req)
			require.NoError(t, err)
			assertGrammar(t, p.Grammar, tc.accepts, tc.refuses)
			if tc.reasoning != "" {
				msg := p.ParseOutput(tc.accepts[0])
				assert.Equal(t, tc.reasoning, strings.TrimSpace(msg.ReasoningContent))
				if len(msg.ToolCalls) == 0 {
					assert.Equal(t, answer, msg.Content)
				}
			}
		})
	}
}

// realTemplate returns the templates of the named file bundled with
// llama.cpp.
func realTemplate(t testing.TB, file string) *Templates {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(templatesDir(t), file))
	require.NoError(t, err)
	return testTemplates(t, string(b))
}

// With real models' templates, under tool choice auto with a response
// format, and with a call required: the grammar takes the reasoning as the
// model writes it (the block its prompt opened, the block it opens, after
// a newline for GLM 4.6, between its own markers for Gemma 4, Command R7B
// and Apertus), then a call in the template's format or the schema's
// JSON, bare or fenced; the plan reads the reasoning back, the call as a
// call and the JSON as the content. A template that does not think takes
// the answer alone.
func TestPrepareReasoningRealTemplates(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	const (
		hermes   = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
		qwen3c   = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"
		glm      = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"
		r1       = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
		v31      = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
		hy3      = "<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Oslo</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>"
		dsml     = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
		closed   = "Hm, weather.\n</think>\n\n" // the rest of a block the prompt opened
		qwen3    = "<think>\nHm, weather.\n</think>\n\n"
		reasoned = "Hm, weather."
	)
	tests := []struct {
		file   string
		call   string // get_weather for Oslo, as the model writes it
		think  string // reasoning as the model writes it ("": none)
		forced bool   // the prompt opens the block
		refuse string // before the answer, refused
		final  string // before a response format's JSON
		extra  map[string]any
	}{
		{file: "Qwen-Qwen2.5-7B-Instruct.jinja", call: hermes, refuse: qwen3}, // no reasoning shown: no block offered
		{file: "Qwen-Qwen3-0.6B.jinja", call: hermes, think: qwen3},
		{file: "Qwen-QwQ-32B.jinja", call: hermes, think: closed, forced: true},
		{file: "Qwen3-Coder.jinja", call: qwen3c},
		{file: "Qwen3.5-4B.jinja", call: qwen3c, think: closed, forced: true},
		{file: "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", call: qwen3c, think: closed, forced: true},
		{file: "StepFun3.5-Flash.jinja", call: qwen3c, think: closed, forced: true},
		{file: "GLM-4.6.jinja", call: glm, think: "\n<think>Hm, weather.</think>\n"},
		{file: "GLM-4.7-Flash.jinja", call: glm, think: "Hm, weather.</think>", forced: true},
		{file: "poolside-Laguna-XS.2.jinja", call: glm, think: closed, forced: true},
		{file: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", call: r1, think: closed, forced: true},
		{file: "llama-cpp-deepseek-r1.jinja", call: r1, think: closed, forced: true},
		{file: "deepseek-ai-DeepSeek-V3.1.jinja", call: v31, think: "Hm, weather.</think>", forced: true},
		{file: "deepseek-ai-DeepSeek-V3.2.jinja", call: dsml, think: "Hm, weather.</think>\n\n", forced: true,
			refuse: "Hm, weather. " + dsml + "</think>"}, // a call in the block, which the parser would read unchecked
		{file: "deepseek-ai-DeepSeek-V4.jinja", call: strings.ReplaceAll(dsml, "function_calls", "tool_calls"), think: "Hm, weather.</think>", forced: true},
		{file: "MiniMax-M2.jinja", call: "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo</parameter>\n</invoke>\n</minimax:tool_call>", think: closed, forced: true},
		{file: "NVIDIA-Nemotron-Nano-v2.jinja", call: `<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</TOOLCALL>`, think: closed, forced: true},
		{file: "Reka-Edge.jinja", call: hermes, think: closed, forced: true},
		{file: "Bielik-11B-v3.0-Instruct.jinja", call: hermes, think: closed, forced: true},
		{file: "google-gemma-4-31B-it.jinja", call: `<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>`, think: "<|channel>thought\nHm, weather.<channel|>"},
		{file: "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", call: "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n]<|END_ACTION|>",
			think: "<|START_THINKING|>Hm, weather.<|END_THINKING|>"},
		{file: "Cohere2MoE.jinja", call: "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n]<|END_ACTION|>",
			think: "Hm, weather.<|END_THINKING|>", forced: true, final: "<|START_TEXT|>",
			refuse: "Hm, weather.<|START_TEXT|>{\"a\": 1}<|END_TEXT|>"}, // text in the block, which the parser would read unchecked
		{file: "openbmb-MiniCPM5-1B.jinja", call: `<function name="get_weather"><param name="city">Oslo</param></function>`, think: closed, forced: true},
		{file: "Kimi-K3.jinja", call: "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>" +
			"<|open|>argument key=\"city\" type=\"string\"<|sep|>Oslo<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
			think: "Hm, weather.<|close|>think<|sep|>", forced: true, final: "<|open|>response<|sep|>",
			refuse: "Hm, weather.<|open|>response<|sep|>{\"a\": 1}<|close|>response<|sep|>"}, // the answer in the block, which the parser would read unchecked
		{file: "upstage-Solar-Open-100B.jinja", call: "<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>get_weather<|tool_call:args|>{\"city\": \"Oslo\"}<|tool_call:end|>",
			refuse: "<|think|>Hm, weather.<|end|><|begin|>assistant"}, // its template shows no reasoning: no block offered, as llama-server's
		{file: "tencent-Hy3.jinja", call: hy3, refuse: "<think:opensource>Hm, weather.</think:opensource>"}, // no_think by default: the prompt closes the block
		{file: "tencent-Hy3.jinja", call: hy3, think: "Hm, weather.</think:opensource>", forced: true, extra: map[string]any{"reasoning_effort": "high"},
			refuse: "Hm, weather. " + hy3 + "</think:opensource>"}, // a call in the block, which the parser would read unchecked
		{file: "Apertus-8B-Instruct.jinja", call: "<|tools_prefix|>[{\"get_weather\": {\"city\": \"Oslo\"}}]<|tools_suffix|>", think: "<|inner_prefix|>Hm, weather.<|inner_suffix|>",
			extra: map[string]any{"enable_thinking": true}}, // off unless asked, as llama-server has it
		{file: "Apertus-8B-Instruct.jinja", call: "<|tools_prefix|>[{\"get_weather\": {\"city\": \"Oslo\"}}]<|tools_suffix|>",
			refuse: "<|inner_prefix|>Hm, weather.<|inner_suffix|>"}, // its default: no deliberation, no block
		{file: "ByteDance-Seed-OSS.jinja", call: "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function>\n</seed:tool_call>",
			think: "<seed:think>Hm, weather.</seed:think>\n"}, // always thinks: it ignores enable_thinking
		{file: "Kimi-K2-Instruct.jinja", call: "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>"},
		{file: "meta-llama-Llama-3.1-8B-Instruct.jinja", call: `{"name": "get_weather", "parameters": {"city": "Oslo"}}`},
		{file: "mistralai-Mistral-Nemo-Instruct-2407.jinja", call: `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "abcdef123"}]`},
		{file: "Mistral-Small-3.2-24B-Instruct-2506.jinja", call: `[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}`},
		{file: "meetkai-functionary-medium-v3.1.jinja", call: `<function=get_weather>{"city": "Oslo"}</function>`},
		{file: "meetkai-functionary-medium-v3.2.jinja", call: "get_weather\n{\"city\": \"Oslo\"}"},
		{file: "CohereForAI-c4ai-command-r-plus-tool_use.jinja", call: "Action:\n```json\n[{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}]\n```"},
		{file: "openai-gpt-oss-120b.jinja", call: `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}`,
			think: "<|channel|>analysis<|message|>Hm, weather.<|end|><|start|>assistant", final: "<|channel|>final<|message|>"},
		{file: "fireworks-ai-llama-3-firefunction-v2.jinja", call: ` functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}]`},
		{file: "unsloth-Apriel-1.5.jinja", call: `<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</tool_calls>`},
		{file: "LFM2-8B-A1B.jinja", call: "<|tool_call_start|>[get_weather(city='Oslo')]<|tool_call_end|>"},
		{file: "ibm-granite-granite-4.0.jinja", call: hermes},
	}
	for _, tc := range tests {
		tmpls := realTemplate(t, tc.file)
		for _, mode := range []string{"auto", "required"} {
			t.Run(tc.file+"/"+mode, func(t *testing.T) {
				req := Request{Messages: []Message{{Role: RoleUser, Content: "Weather in Oslo?"}}, Tools: grammarTools, ToolChoice: ToolChoice{Mode: mode}, Extra: tc.extra}
				outs := []string{tc.call}
				if mode == "auto" {
					req.Schema = schema
					outs = append(outs, tc.final+`{"a": 1}`, tc.final+"```json\n{\"a\": 1}\n```")
				}
				p, err := tmpls.Prepare(req)
				require.NoError(t, err)
				require.False(t, p.GrammarLazy)
				assert.Equal(t, tc.forced, p.Parse.ThinkingForcedOpen)
				for _, out := range outs {
					text := tc.think + out
					assert.True(t, grammarAccepts(t, p.Grammar, text), "refused %q", text)
					if tc.think != "" && !tc.forced {
						assert.True(t, grammarAccepts(t, p.Grammar, out), "refused %q without reasoning", out)
					}
					if tc.forced {
						assert.False(t, grammarAccepts(t, p.Grammar, out), "accepted %q in the open block", out)
					}
					msg := p.ParseOutput(text)
					if out == tc.call {
						require.Len(t, msg.ToolCalls, 1, "%+v", msg)
						assert.Equal(t, "get_weather", msg.ToolCalls[0].Name)
						assert.JSONEq(t, `{"city": "Oslo"}`, msg.ToolCalls[0].Arguments)
					} else {
						assert.Empty(t, msg.ToolCalls)
						assert.Equal(t, `{"a": 1}`, msg.Content)
					}
					if tc.think != "" {
						assert.Equal(t, reasoned, strings.TrimSpace(msg.ReasoningContent))
					}
					if tc.refuse != "" {
						assert.False(t, grammarAccepts(t, p.Grammar, tc.refuse+out), "accepted %q", tc.refuse+out)
					}
					assertStreamed(t, p, text, msg)
				}
			})
		}
	}
}

// A thinking model whose thinking is off, by the request or by the
// server's default (Templates.Thinking), gets no block to open: its
// prompt holds an empty one, or none at all.
func TestPrepareReasoningOff(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	tests := []struct {
		file, think string
	}{
		{"Qwen-Qwen3-0.6B.jinja", "<think>\nHm.\n</think>\n\n"},
		{"GLM-4.6.jinja", "\n<think>Hm.</think>\n"},
		{"google-gemma-4-31B-it.jinja", "<|channel>thought\nHm.<channel|>"},
		{"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "<|START_THINKING|>Hm.<|END_THINKING|>"},
		{"HuggingFaceTB-SmolLM3-3B.jinja", "<think>\nHm.\n</think>\n\n"},
	}
	for _, tc := range tests {
		for _, by := range []string{"request", "server"} {
			t.Run(tc.file+"/"+by, func(t *testing.T) {
				tmpls := realTemplate(t, tc.file)
				req := Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, Schema: schema}
				if by == "request" {
					req.Extra = map[string]any{"enable_thinking": false}
				} else {
					tmpls.Thinking = "off"
				}
				p, err := tmpls.Prepare(req)
				require.NoError(t, err)
				assertGrammar(t, p.Grammar, []string{`{"a": 1}`}, []string{tc.think + `{"a": 1}`})
				// With thinking on, the block is there to open.
				tmpls.Thinking = ""
				p, err = tmpls.Prepare(Request{Messages: req.Messages, Schema: schema})
				require.NoError(t, err)
				assertGrammar(t, p.Grammar, []string{`{"a": 1}`, tc.think + `{"a": 1}`}, nil)
			})
		}
	}
}

// assertStreamed asserts that text streamed to plan p a character at a
// time adds up to want, its whole parse.
func assertStreamed(t *testing.T, p *Plan, text string, want Message) {
	t.Helper()
	s := p.NewStream()
	var got Message
	add := func(d Delta) { addDelta(&got, d) }
	for _, r := range text {
		add(s.Push(string(r)))
	}
	add(s.Finish(false))
	assert.Equal(t, want.Content, got.Content, "streamed %q", text)
	assert.Equal(t, strings.TrimSpace(want.ReasoningContent), strings.TrimSpace(got.ReasoningContent), "streamed %q", text)
	require.Len(t, got.ToolCalls, len(want.ToolCalls), "streamed %q", text)
	for i, c := range want.ToolCalls {
		assert.Equal(t, c.Name, got.ToolCalls[i].Name)
		assert.JSONEq(t, c.Arguments, got.ToolCalls[i].Arguments)
	}
}

// A message continued from its content has its reasoning closed in the
// prompt: no block to open; one continued from an empty reasoning in a
// block its prompt opened goes on in that block.
func TestPrepareReasoningContinued(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	user := Message{Role: RoleUser, Content: "x"}
	p, err := realTemplate(t, "Qwen-Qwen3-0.6B.jinja").Prepare(Request{Schema: schema,
		Messages: []Message{user, {Role: RoleAssistant, ReasoningContent: "Hm.", Content: "Sure,"}}})
	require.NoError(t, err)
	assertGrammar(t, p.Grammar, []string{`{"a": 1}`}, []string{"<think>\nHm.\n</think>\n\n" + `{"a": 1}`})

	p, err = testTemplates(t, thinkTemplate).Prepare(Request{Schema: schema, Extra: map[string]any{"enable_thinking": true},
		Messages: []Message{user, {Role: RoleAssistant}}, Continue: "reasoning_content", NoGenerationPrompt: true})
	require.NoError(t, err)
	require.True(t, p.Parse.ThinkingForcedOpen)
	assertGrammar(t, p.Grammar, []string{"Hm.</think>" + `{"a": 1}`}, []string{`{"a": 1}`})
}

// Tools named as the rules that wrap the calls (root, tool-calls,
// root-choice, response-format, and the reasoning's answer-root and
// reasoning-text) are called, and the response format answered, after the
// reasoning, in each format that writes <think> blocks.
func TestReasoningToolNames(t *testing.T) {
	names := []string{"root", "tool-calls", "root-choice", "response-format", "response-format-answer", "answer-root", "reasoning-text", "reasoning-gap", "space"}
	var tools []Tool
	for _, n := range names {
		tools = append(tools, Tool{Name: n, Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)})
	}
	schema := []byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	calls := map[Format]func(name string) string{
		FormatHermes2Pro: func(n string) string {
			return "<tool_call>\n{\"name\": \"" + n + "\", \"arguments\": {\"n\": 1}}\n</tool_call>"
		},
		FormatQwen3Coder: func(n string) string {
			return "<tool_call>\n<function=" + n + ">\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>"
		},
		FormatGLM45: func(n string) string {
			return "<tool_call>" + n + "\n<arg_key>n</arg_key>\n<arg_value>1</arg_value>\n</tool_call>"
		},
		FormatKimiK2: func(n string) string {
			return "<|tool_calls_section_begin|><|tool_call_begin|>functions." + n + ":0<|tool_call_argument_begin|>{\"n\": 1}<|tool_call_end|><|tool_calls_section_end|>"
		},
		FormatDeepSeekV31: func(n string) string {
			return "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>{\"n\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
		},
		FormatGeneric: func(n string) string { return `{"tool_call": {"name": "` + n + `", "arguments": {"n": 1}}}` },
	}
	for f, call := range calls {
		t.Run(f.String(), func(t *testing.T) {
			tg, err := buildToolGrammar(f, tools, ToolChoice{Mode: "auto"}, false, schema, true)
			require.NoError(t, err)
			p := &Plan{Grammar: tg.Grammar, Parse: ParseOptions{Format: f, Reasoning: ReasoningAuto, ThinkingForcedOpen: true, ParseToolCalls: true, Tools: tools},
				tmpls: testTemplates(t, thinkTemplate), hist: []Message{{Role: RoleUser, Content: "x"}}, extra: map[string]any{"enable_thinking": true}}
			require.NoError(t, p.allowReasoning(TemplateCaps{SupportsThinking: true}, true))
			require.NotEqual(t, tg.Grammar, p.Grammar, "not wrapped")
			answer := `{"a": 1}`
			if f == FormatGeneric {
				answer = `{"response": {"a": 1}}`
			}
			accepts := []string{"Hm.</think>\n" + answer}
			for _, n := range names {
				accepts = append(accepts, "Hm.</think>\n"+call(n))
				msg := p.ParseOutput("Hm.</think>\n" + call(n))
				require.Len(t, msg.ToolCalls, 1, n)
				assert.Equal(t, n, msg.ToolCalls[0].Name)
				assert.Equal(t, "Hm.", msg.ReasoningContent)
			}
			assertGrammar(t, p.Grammar, accepts, []string{answer, call("nope"), "Hm.</think>\n" + call("nope")})
		})
	}
}

// GPT-OSS reasons in analysis messages of its own and answers a response
// format in a final message: the grammar allows both, as the parser reads
// them.
func TestPrepareHarmonyGrammar(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(templatesDir(t), "openai-gpt-oss-120b.jinja"))
	require.NoError(t, err)
	user := Message{Role: RoleUser, Content: "x"}
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	weather := Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
	const (
		analysis = "<|channel|>analysis<|message|>Think about <it>.<|end|><|start|>assistant"
		final    = `<|channel|>final<|message|>{"a": 1}`
		typed    = `<|channel|>final <|constrain|>json<|message|>{"a": 1}`
		call     = `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}`
	)
	tests := []struct {
		name      string
		req       Request
		accepts   []string
		refuses   []string
		reasoning string // of the first accepted text
		content   string
		call      bool
	}{
		{name: "response format", req: Request{Schema: schema},
			accepts:   []string{analysis + final, final, typed, analysis + analysis + typed},
			refuses:   []string{`{"a": 1}`, analysis, analysis + `{"a": 1}`, "<|channel|>analysis<|message|>a<|call|>b<|end|><|start|>assistant" + final},
			reasoning: "Think about <it>.", content: `{"a": 1}`},
		{name: "a call required", req: Request{Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}},
			accepts: []string{analysis + call, call}, refuses: []string{final, analysis},
			reasoning: "Think about <it>.", call: true},
		{name: "tools and a response format", req: Request{Tools: []Tool{weather}, Schema: schema},
			accepts: []string{analysis + call, analysis + final, final}, refuses: []string{`{"a": 1}`},
			reasoning: "Think about <it>.", call: true},
		{name: "reasoning format none: the final message at once", req: Request{Schema: schema, Reasoning: "none"},
			accepts: []string{final}, refuses: []string{analysis + final}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Messages = []Message{user}
			p, err := testTemplates(t, string(src)).Prepare(tc.req)
			require.NoError(t, err)
			require.Equal(t, FormatGPTOSS, p.Parse.Format)
			assert.False(t, p.GrammarLazy)
			assertGrammar(t, p.Grammar, tc.accepts, tc.refuses)
			if tc.reasoning == "" {
				return
			}
			msg := p.ParseOutput(tc.accepts[0])
			assert.Equal(t, tc.reasoning, msg.ReasoningContent)
			if tc.call {
				require.Len(t, msg.ToolCalls, 1)
				assert.Equal(t, "get_weather", msg.ToolCalls[0].Name)
			} else {
				assert.Equal(t, tc.content, msg.Content)
			}
		})
	}
}
