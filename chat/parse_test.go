package chat

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type parseCase struct {
	name      string
	format    Format
	reasoning ReasoningFormat
	forced    bool
	noTools   bool
	tools     []Tool
	in        string

	content, reasoningOut string
	calls                 []ToolCall // Arguments compared as JSON
	wantErr               bool
}

func (c parseCase) opts() ParseOptions {
	return ParseOptions{Format: c.format, Reasoning: c.reasoning, ThinkingForcedOpen: c.forced, ParseToolCalls: !c.noTools, Tools: c.tools}
}

func call(name, args string) ToolCall { return ToolCall{Name: name, Arguments: args} }

func callID(name, args, id string) ToolCall { return ToolCall{Name: name, Arguments: args, ID: id} }

const (
	helloContent = "Hello, world!\nWhat's up?"
	argsArg1     = `{"arg1": 1}`
)

var parseCases = []parseCase{
	{name: "content only", format: FormatContentOnly, in: helloContent, content: helloContent},
	{name: "content only keeps spaces", format: FormatContentOnly, in: "  indented\n", content: "  indented\n"},
	{name: "content only think", format: FormatContentOnly, reasoning: ReasoningDeepSeek, in: "<think>I'm\nthinking</think>\n\nHello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "content only think none", format: FormatContentOnly, reasoning: ReasoningNone, in: "<think>I'm\nthinking</think>Hello", content: "<think>I'm\nthinking</think>Hello"},
	{name: "qwq forced open", format: FormatHermes2Pro, reasoning: ReasoningAuto, forced: true, in: "Let me think about this...\n</think>\nThe answer is 42.", content: "The answer is 42.", reasoningOut: "Let me think about this..."},
	{name: "forced open unterminated", format: FormatHermes2Pro, reasoning: ReasoningDeepSeek, forced: true, in: "still thinking", reasoningOut: "still thinking"},
	{name: "empty think", format: FormatHermes2Pro, reasoning: ReasoningAuto, forced: true, in: "</think>Hello, world!", content: "Hello, world!"},

	{name: "generic response", format: FormatGeneric, in: `{"response": "Hello, world!\nWhat's up?"}`, content: helloContent},
	{name: "generic call", format: FormatGeneric, in: `{"tool_call": {"name": "special_function", "arguments": {"arg1": 1}}}`, calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "generic calls", format: FormatGeneric, in: `{"tool_calls": [{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]}`, calls: []ToolCall{callID("special_function", argsArg1, "123456789")}},
	{name: "generic plain text", format: FormatGeneric, in: "plain text", content: "plain text"},
	{name: "generic unicode response", format: FormatGeneric, in: `{"response": "caf\u00e9 \ud83d\ude00 格"}`, content: "café 😀 格"},

	{name: "hermes call", format: FormatHermes2Pro, in: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hermes content and call", format: FormatHermes2Pro, in: "Hello, world!\nWhat's up?<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>", content: helloContent, calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hermes parallel", format: FormatHermes2Pro, in: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"special_function_with_opt\", \"arguments\": {\"arg1\": 1, \"arg2\": 2}}\n</tool_call>",
		calls: []ToolCall{call("special_function", argsArg1), call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "hermes think and call", format: FormatHermes2Pro, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking\n</think>\n\n<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>", reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hermes tools off", format: FormatHermes2Pro, noTools: true, in: "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", content: "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
	{name: "hermes bad call is text", format: FormatHermes2Pro, in: "see <tool_call> tags", content: "see <tool_call> tags"},
	{name: "hermes cut in the closing tag", format: FormatHermes2Pro, in: "Sure.\n<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_ca", content: "Sure.\n", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hermes cut after the call", format: FormatHermes2Pro, in: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n\n<", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hermes text after the call", format: FormatHermes2Pro, in: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>\n\nDone.\n", content: "Done.\n", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hermes cut off", format: FormatHermes2Pro, in: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg", calls: []ToolCall{call("special_function", `{"arg`)}, wantErr: true},

	{name: "qwen3 coder call", format: FormatQwen3Coder, in: "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "qwen3 coder no open tag", format: FormatQwen3Coder, in: "Let me call it.\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", content: "Let me call it.\n", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "qwen3 coder parallel", format: FormatQwen3Coder, in: "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>",
		calls: []ToolCall{call("special_function", argsArg1), call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "qwen3 coder code", format: FormatQwen3Coder, in: "<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n    print(\"Hello, world!\")\n\nhello()\n</parameter>\n</function>\n</tool_call>",
		calls: []ToolCall{call("python", "{\"code\": \"def hello():\\n    print(\\\"Hello, world!\\\")\\n\\nhello()\"}")}},
	{name: "qwen3 coder unicode", format: FormatQwen3Coder, in: "<tool_call>\n<function=python>\n<parameter=code>\n格\n</parameter>\n</function>\n</tool_call>", calls: []ToolCall{call("python", `{"code": "格"}`)}},
	{name: "qwen3 coder html", format: FormatQwen3Coder, in: "<tool_call>\n<function=html>\n<parameter=markup>\n<html>\n <head>\n  <title>Hello!</title>\n </head>\n</html>\n</parameter>\n</function>\n</tool_call>",
		calls: []ToolCall{call("html", "{\"markup\": \"<html>\\n <head>\\n  <title>Hello!</title>\\n </head>\\n</html>\"}")}},
	{name: "qwen3 coder typed by schema", format: FormatQwen3Coder, tools: []Tool{{Name: "f", Parameters: []byte(`{"type":"object","properties":{"zip":{"type":"string"}}}`)}},
		in: "<tool_call>\n<function=f>\n<parameter=zip>\n01234\n</parameter>\n</function>\n</tool_call>", calls: []ToolCall{call("f", `{"zip": "01234"}`)}},
	{name: "qwen3.5 think and call", format: FormatQwen3Coder, reasoning: ReasoningAuto, forced: true, in: "I'm\nthinking\n</think>\n\n<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},

	{name: "llama json call", format: FormatLlama3x, in: `{"name": "special_function", "parameters": {"arg1": 1}}`, calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "llama typed json call", format: FormatLlama3x, in: `{"type": "function", "name": "special_function", "parameters": {"arg1": 1}}`, calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "llama json content", format: FormatLlama3x, in: `{"answer": 42}`, content: `{"answer": 42}`},
	{name: "llama builtin", format: FormatLlama3x, in: `<|python_tag|>code_interpreter.call(code="print('hey')")`, calls: []ToolCall{call("code_interpreter", `{"code": "print('hey')"}`)}},
	{name: "llama builtin search", format: FormatLlama3x, in: `<|python_tag|>brave_search.call(query="today's weather", count=3)`, calls: []ToolCall{call("brave_search", `{"query": "today's weather", "count": 3}`)}},
	{name: "llama python code", format: FormatLlama3x, in: "<|python_tag|>print('hey')", calls: []ToolCall{call("python", `{"code": "print('hey')"}`)}},
	{name: "llama content", format: FormatLlama3x, in: helloContent, content: helloContent},

	{name: "nemo call", format: FormatMistralNemo, in: `[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]`, calls: []ToolCall{callID("special_function", argsArg1, "123456789")}},
	{name: "nemo content", format: FormatMistralNemo, in: helloContent, content: helloContent},

	{name: "magistral think", format: FormatMagistral, reasoning: ReasoningAuto, in: "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "magistral think none", format: FormatMagistral, in: "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?", content: "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?"},
	{name: "magistral call", format: FormatMagistral, reasoning: ReasoningAuto, in: `[TOOL_CALLS]special_function[ARGS]{"arg1":1}`, calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "magistral think call", format: FormatMagistral, reasoning: ReasoningAuto, in: "[THINK]I'm\nthinking[/THINK]" + `[TOOL_CALLS]special_function[ARGS]{"arg1":1}`, reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "magistral parallel", format: FormatMagistral, in: `[TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}`,
		calls: []ToolCall{call("special_function", argsArg1), call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "magistral fake marker in thinking", format: FormatMagistral, reasoning: ReasoningAuto, in: "[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more[/THINK]" + `[TOOL_CALLS]special_function[ARGS]{"arg1": 1}`,
		reasoningOut: "Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "mistral small call id", format: FormatMagistral, in: `[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{"arg1": 1}`, calls: []ToolCall{callID("special_function", argsArg1, "123456789")}},
	{name: "devstral content call", format: FormatMagistral, in: `Hello, world!` + "\n" + `What's up?[TOOL_CALLS]special_function[ARGS]{"arg1": 1}`, content: helloContent, calls: []ToolCall{call("special_function", argsArg1)}},

	{name: "functionary v3.1 call", format: FormatFunctionaryV31, in: `<function=special_function>{"arg1": 1}</function>`, calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "functionary v3.1 python", format: FormatFunctionaryV31, in: "<|python_tag|>print('hey')", calls: []ToolCall{call("python", `{"code": "print('hey')"}`)}},
	{name: "functionary v3.1 content", format: FormatFunctionaryV31, in: helloContent, content: helloContent},

	{name: "functionary v3.2 content", format: FormatFunctionaryV32, in: "all\nHello, world!\nWhat's up?", content: helloContent},
	{name: "functionary v3.2 call", format: FormatFunctionaryV32, in: "special_function\n{\"arg1\": 1}", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "functionary v3.2 content then call", format: FormatFunctionaryV32, in: "all\nHello, world!\nWhat's up?>>>special_function\n{\"arg1\": 1}", content: helloContent, calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "functionary v3.2 python", format: FormatFunctionaryV32, in: "python\nprint('hey')", calls: []ToolCall{call("python", `{"code": "print('hey')"}`)}},
	{name: "functionary v3.2 plain", format: FormatFunctionaryV32, in: "Just text, no recipient.", content: "Just text, no recipient."},

	{name: "deepseek r1 think", format: FormatDeepSeekR1, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking</think>Hello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "deepseek r1 call", format: FormatDeepSeekR1, reasoning: ReasoningDeepSeek, forced: true, in: "</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "deepseek r1 call no think", format: FormatDeepSeekR1, reasoning: ReasoningDeepSeek, in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", calls: []ToolCall{call("special_function", argsArg1)}},

	{name: "deepseek v3.1 call", format: FormatDeepSeekV31, reasoning: ReasoningDeepSeek, in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"XYZCITY\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", calls: []ToolCall{call("get_time", `{"city":"XYZCITY"}`)}},
	{name: "deepseek v3.1 think call", format: FormatDeepSeekV31, reasoning: ReasoningDeepSeek, forced: true, in: "REASONING</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", reasoningOut: "REASONING", calls: []ToolCall{call("get_time", `{"city":"Tokyo"}`)}},
	{name: "deepseek v3.1 parallel", format: FormatDeepSeekV31, reasoning: ReasoningDeepSeek, forced: true, in: "REASONING</think>CONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		reasoningOut: "REASONING", content: "CONTENT", calls: []ToolCall{call("get_time", `{"city":"Paris"}`), call("get_weather", `{"city":"Paris"}`)}},
	{name: "deepseek v3.1 content", format: FormatDeepSeekV31, reasoning: ReasoningDeepSeek, in: "CONTENT", content: "CONTENT"},

	{name: "cohere2 moe content", format: FormatCohere2MoE, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>",
		reasoningOut: "I'm\nthinking", content: helloContent},
	{name: "cohere2 moe unparsed", format: FormatCohere2MoE, in: "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>",
		content: "<|START_THINKING|>I'm\nthinking<|END_THINKING|>Hello, world!\nWhat's up?"},
	{name: "cohere2 moe empty thinking", format: FormatCohere2MoE, reasoning: ReasoningDeepSeek, forced: true, in: "<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>", content: helloContent},
	{name: "cohere2 moe text without end of thinking", format: FormatCohere2MoE, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking<|START_TEXT|>Hello, world!\nWhat's up?",
		reasoningOut: "I'm\nthinking", content: helloContent},
	{name: "cohere2 moe json", format: FormatCohere2MoE, reasoning: ReasoningDeepSeek, forced: true, in: "I need to output the invoice details in JSON<|END_THINKING|><|START_TEXT|>{\"amount\": 123.45, \"date\": \"2025-12-03\"}<|END_TEXT|>",
		reasoningOut: "I need to output the invoice details in JSON", content: `{"amount": 123.45, "date": "2025-12-03"}`},
	{name: "cohere2 moe think call", format: FormatCohere2MoE, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n]<|END_ACTION|>",
		reasoningOut: "I'm\nthinking", calls: []ToolCall{callID("special_function", argsArg1, "0")}},
	{name: "cohere2 moe call in thinking", format: FormatCohere2MoE, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}]<|END_ACTION|>",
		reasoningOut: "I'm\nthinking", calls: []ToolCall{callID("special_function", argsArg1, "0")}},
	{name: "cohere2 moe empty thinking call", format: FormatCohere2MoE, reasoning: ReasoningDeepSeek, forced: true, in: "<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"todo_list\", \"parameters\": {\"todos\": [\"buy milk\", \"walk dog\"]}}\n]<|END_ACTION|>",
		calls: []ToolCall{callID("todo_list", `{"todos": ["buy milk", "walk dog"]}`, "0")}},
	{name: "minicpm5 content", format: FormatMiniCPM5, reasoning: ReasoningAuto, in: helloContent, content: helloContent},
	{name: "minicpm5 call", format: FormatMiniCPM5, reasoning: ReasoningAuto, in: `<function name="python"><param name="code">print('Hello, World!')</param></function>`,
		calls: []ToolCall{call("python", `{"code": "print('Hello, World!')"}`)}},
	{name: "minicpm5 empty args", format: FormatMiniCPM5, reasoning: ReasoningAuto, in: `<function name="empty_args"></function>`, calls: []ToolCall{call("empty_args", `{}`)}},
	{name: "minicpm5 cdata", format: FormatMiniCPM5, reasoning: ReasoningAuto, in: `<function name="html"><param name="markup"><![CDATA[<a href="/x">hi</a> </param>]]></param></function>`,
		calls: []ToolCall{call("html", `{"markup": "<a href=\"/x\">hi</a> </param>"}`)}},
	{name: "minicpm5 think call", format: FormatMiniCPM5, reasoning: ReasoningAuto, forced: true, in: `I'm thinking</think><function name="python"><param name="code">print('hey')</param></function>`,
		reasoningOut: "I'm thinking", calls: []ToolCall{call("python", `{"code": "print('hey')"}`)}},
	{name: "minicpm5 parallel", format: FormatMiniCPM5, reasoning: ReasoningAuto, in: "<function name=\"python\"><param name=\"code\">print('x')</param></function>\n<function name=\"python\"><param name=\"code\">print('y')</param></function>",
		calls: []ToolCall{call("python", `{"code": "print('x')"}`), call("python", `{"code": "print('y')"}`)}},
	{name: "minicpm5 typed and content first", format: FormatMiniCPM5, in: "Let me look.\n<function name=\"get_weather\"><param name=\"city\">Paris</param><param name=\"days\">3</param></function>",
		content: "Let me look.\n", calls: []ToolCall{call("get_weather", `{"city": "Paris", "days": 3}`)}},
	{name: "minicpm5 cut off", format: FormatMiniCPM5, in: `<function name="python"><param name="code">print(`, calls: []ToolCall{call("python", `{`)}, wantErr: true},
	// Kimi K3: the generation prompt opens the think section.
	{name: "kimi k3 content", format: FormatKimiK3, noTools: true, in: "<|open|>response<|sep|>Hello, world!\nWhat's up?<|close|>response<|sep|><|close|>message<|sep|>",
		content: helloContent},
	{name: "kimi k3 thinking", format: FormatKimiK3, reasoning: ReasoningAuto, forced: true, noTools: true,
		in:           "I'm thinking about this<|close|>think<|sep|><|open|>response<|sep|>Hello, world!\nWhat's up?<|close|>response<|sep|><|close|>message<|sep|>",
		reasoningOut: "I'm thinking about this", content: helloContent},
	{name: "kimi k3 tag names in prose", format: FormatKimiK3, noTools: true, in: "<|open|>response<|sep|>Use the response tag, then message the handler.<|close|>response<|sep|><|close|>message<|sep|>",
		content: "Use the response tag, then message the handler."},
	{name: "kimi k3 cut off thinking", format: FormatKimiK3, reasoning: ReasoningAuto, forced: true, noTools: true, in: "I was still thinking when the budget ran out",
		reasoningOut: "I was still thinking when the budget ran out"},
	{name: "kimi k3 thinking without its end", format: FormatKimiK3, reasoning: ReasoningAuto, forced: true, in: "I'm thinking<|open|>response<|sep|>Hello, world!\nWhat's up?",
		reasoningOut: "I'm thinking", content: helloContent},
	{name: "kimi k3 reasoning none", format: FormatKimiK3, in: "I'm thinking<|close|>think<|sep|><|open|>response<|sep|>Hello, world!\nWhat's up?<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>",
		content: "I'm thinkingHello, world!\nWhat's up?"},
	{name: "kimi k3 call", format: FormatKimiK3, in: "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"special_function\" index=\"1\"<|sep|>" +
		"<|open|>argument key=\"arg1\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
		calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "kimi k3 thinking content call", format: FormatKimiK3, reasoning: ReasoningAuto, forced: true,
		in: "I should call it<|close|>think<|sep|><|open|>response<|sep|>On it.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"special_function\" index=\"1\"<|sep|>" +
			"<|open|>argument key=\"arg1\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
		reasoningOut: "I should call it", content: "On it.", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "kimi k3 typed arguments", format: FormatKimiK3, in: "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"special_function_with_opt\" index=\"1\"<|sep|>" +
		"<|open|>argument key=\"arg1\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|open|>argument key=\"arg2\" type=\"number\"<|sep|>2<|close|>argument<|sep|>" +
		"<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
		calls: []ToolCall{call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "kimi k3 parallel", format: FormatKimiK3, in: "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>" +
		"<|open|>call tool=\"special_function\" index=\"1\"<|sep|><|open|>argument key=\"arg1\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|>" +
		"<|open|>call tool=\"special_function_with_opt\" index=\"2\"<|sep|><|open|>argument key=\"arg1\" type=\"number\"<|sep|>1<|close|>argument<|sep|>" +
		"<|open|>argument key=\"arg2\" type=\"number\"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
		calls: []ToolCall{call("special_function", argsArg1), call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "kimi k3 string argument", format: FormatKimiK3, in: "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"python\" index=\"1\"<|sep|>" +
		"<|open|>argument key=\"code\" type=\"string\"<|sep|>print('hey')<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
		calls: []ToolCall{call("python", `{"code": "print('hey')"}`)}},
	{name: "kimi k3 string by type attribute", format: FormatKimiK3, in: "<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>" +
		"<|open|>argument key=\"id\" type=\"string\"<|sep|>42<|close|>argument<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>42<|close|>argument<|sep|>" +
		"<|open|>argument key=\"a&quot;b\" type=\"boolean\"<|sep|>true<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
		calls: []ToolCall{call("f", `{"id": "42", "n": 42, "a\"b": true}`)}},
	{name: "kimi k3 string by schema", format: FormatKimiK3, tools: grammarTools, in: "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>" +
		"<|open|>argument key=\"city\" type=\"number\"<|sep|>42<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
		calls: []ToolCall{call("get_weather", `{"city": "42"}`)}},
	{name: "kimi k3 no call in the tools section", format: FormatKimiK3, in: "<|open|>response<|sep|>Hi<|close|>response<|sep|><|open|>tools<|sep|>oops",
		content: "Hi<|open|>tools<|sep|>oops"},
	{name: "kimi k3 tools not parsed", format: FormatKimiK3, noTools: true, in: "<|open|>response<|sep|>Hi<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
		content: "Hi<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"},
	{name: "kimi k3 cut off", format: FormatKimiK3, in: "<|open|>tools<|sep|><|open|>call tool=\"python\" index=\"1\"<|sep|><|open|>argument key=\"code\" type=\"string\"<|sep|>print(",
		calls: []ToolCall{call("python", `{`)}, wantErr: true},
	{name: "kimi k3 marker in a tag", format: FormatKimiK3, in: "<|open|>tools<|sep|><|open|>call tool=\"f<|close|>call<|sep|>",
		content: "<|open|>tools<|sep|><|open|>call tool=\"f<|close|>call<|sep|>"},
	{name: "solar open content", format: FormatSolarOpen, reasoning: ReasoningAuto, in: "<|content|>Hello, world!\nWhat's up?<|end|>", content: helloContent},
	{name: "solar open content tools off", format: FormatSolarOpen, reasoning: ReasoningAuto, noTools: true, in: "<|content|>Hello, world!\nWhat's up?<|end|>", content: helloContent},
	{name: "solar open think content", format: FormatSolarOpen, reasoning: ReasoningAuto, in: "<|think|>I'm\nthinking<|end|><|begin|>assistant<|content|>Hello, world!\nWhat's up?<|end|>",
		reasoningOut: "I'm\nthinking", content: helloContent},
	{name: "solar open call", format: FormatSolarOpen, reasoning: ReasoningAuto, in: "<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": 1}<|tool_call:end|><|calls|>",
		calls: []ToolCall{callID("special_function", argsArg1, "a1b2c3d4e5")}},
	{name: "solar open think call", format: FormatSolarOpen, reasoning: ReasoningAuto, in: "<|think|>I'm\nthinking<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": 1}<|tool_call:end|>",
		reasoningOut: "I'm\nthinking", calls: []ToolCall{callID("special_function", argsArg1, "a1b2c3d4e5")}},
	{name: "solar open parallel", format: FormatSolarOpen, reasoning: ReasoningAuto, in: "<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": 1}<|tool_call:end|><|tool_call:begin|>f6g7h8i9j0<|tool_call:name|>get_weather<|tool_call:args|>{\"city\": \"Paris\"}<|tool_call:end|><|calls|>",
		calls: []ToolCall{callID("special_function", argsArg1, "a1b2c3d4e5"), callID("get_weather", `{"city": "Paris"}`, "f6g7h8i9j0")}},
	{name: "solar open cut off", format: FormatSolarOpen, in: "<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": ",
		calls: []ToolCall{callID("special_function", `{"arg1":`, "a1b2c3d4e5")}, wantErr: true},
	{name: "solar open cut off before a second call", format: FormatSolarOpen, in: "<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": 1}<|tool_call:end|><|tool_call:",
		calls: []ToolCall{callID("special_function", argsArg1, "a1b2c3d4e5")}},
	{name: "solar open no call after marker", format: FormatSolarOpen, in: "<|content|>Use <|tool_calls|> to call.<|end|>", content: "Use <|tool_calls|> to call."},
	{name: "hunyuan3 content", format: FormatHunyuan3, reasoning: ReasoningAuto, in: helloContent, content: helloContent},
	{name: "hunyuan3 think content", format: FormatHunyuan3, reasoning: ReasoningAuto, in: "<think:opensource>I'm\nthinking</think:opensource>Hello, world!\nWhat's up?", reasoningOut: "I'm\nthinking", content: helloContent},
	{name: "hunyuan3 forced think content", format: FormatHunyuan3, reasoning: ReasoningAuto, forced: true, in: "I'm\nthinking</think:opensource>Hello, world!\nWhat's up?", reasoningOut: "I'm\nthinking", content: helloContent},
	{name: "hunyuan3 call", format: FormatHunyuan3, reasoning: ReasoningAuto, in: "<tool_calls:opensource>\n<tool_call:opensource>special_function<tool_sep:opensource>\n<arg_key:opensource>arg1</arg_key:opensource>\n<arg_value:opensource>1</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
		calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hunyuan3 empty args", format: FormatHunyuan3, reasoning: ReasoningAuto, in: "<tool_calls:opensource>\n<tool_call:opensource>get_time<tool_sep:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
		calls: []ToolCall{call("get_time", `{}`)}},
	{name: "hunyuan3 forced think call", format: FormatHunyuan3, reasoning: ReasoningAuto, forced: true, in: "I'm\nthinking</think:opensource><tool_calls:opensource>\n<tool_call:opensource>special_function<tool_sep:opensource>\n<arg_key:opensource>arg1</arg_key:opensource>\n<arg_value:opensource>1</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
		reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hunyuan3 call in open thinking", format: FormatHunyuan3, reasoning: ReasoningAuto, forced: true, in: "I'm\nthinking <tool_calls:opensource>\n<tool_call:opensource>special_function<tool_sep:opensource>\n<arg_key:opensource>arg1</arg_key:opensource>\n<arg_value:opensource>1</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
		reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "hunyuan3 parallel", format: FormatHunyuan3, reasoning: ReasoningAuto, in: "<tool_calls:opensource>\n<tool_call:opensource>special_function<tool_sep:opensource>\n<arg_key:opensource>arg1</arg_key:opensource>\n<arg_value:opensource>1</arg_value:opensource>\n</tool_call:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Paris</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
		calls: []ToolCall{call("special_function", argsArg1), call("get_weather", `{"city": "Paris"}`)}},
	{name: "hunyuan3 typed and content first", format: FormatHunyuan3, tools: []Tool{{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)}},
		in:      "Let me look.\n<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>1984</arg_value:opensource>\n<arg_key:opensource>days</arg_key:opensource>\n<arg_value:opensource>3</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>",
		content: "Let me look.\n", calls: []ToolCall{call("get_weather", `{"city": "1984", "days": 3}`)}},
	{name: "hunyuan3 cut off", format: FormatHunyuan3, in: "<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Par",
		calls: []ToolCall{call("get_weather", `{`)}, wantErr: true},
	{name: "command r7b response", format: FormatCommandR7B, in: "<|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>", content: helloContent},
	{name: "command r7b think call", format: FormatCommandR7B, reasoning: ReasoningDeepSeek, in: "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n]<|END_ACTION|>",
		reasoningOut: "I'm\nthinking", calls: []ToolCall{callID("special_function", argsArg1, "0")}},

	{name: "gemma think", format: FormatGemma, reasoning: ReasoningAuto, in: "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "gemma empty think", format: FormatGemma, reasoning: ReasoningAuto, in: "<|channel>thought<channel|>Hello, world!\nWhat's up?", content: helloContent},
	{name: "gemma think none", format: FormatGemma, in: "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", content: "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?"},
	{name: "gemma call", format: FormatGemma, in: `<|tool_call>call:get_time{city:<|"|>London<|"|>}<tool_call|>`, calls: []ToolCall{call("get_time", `{"city": "London"}`)}},
	{name: "gemma empty args", format: FormatGemma, in: `<|tool_call>call:empty_args{}<tool_call|>`, calls: []ToolCall{call("empty_args", `{}`)}},
	{name: "gemma content call", format: FormatGemma, in: "Hello, world!\nWhat's up?" + `<|tool_call>call:get_time{city:<|"|>Paris<|"|>}<tool_call|>`, content: helloContent, calls: []ToolCall{call("get_time", `{"city": "Paris"}`)}},
	{name: "gemma parallel", format: FormatGemma, in: `<|tool_call>call:get_time{city:<|"|>London<|"|>}<tool_call|><|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>`,
		calls: []ToolCall{call("get_time", `{"city": "London"}`), call("get_weather", `{"city": "Paris"}`)}},
	{name: "gemma number nested", format: FormatGemma, in: `<|tool_call>call:special_function{arg1:42,opts:{on:true,tags:[<|"|>a<|"|>,-1.5]}}<tool_call|>`, calls: []ToolCall{call("special_function", `{"arg1": 42, "opts": {"on": true, "tags": ["a", -1.5]}}`)}},

	{name: "gpt-oss final", format: FormatGPTOSS, in: "<|channel|>final<|message|>Hello, world!\nWhat's up?", content: helloContent},
	{name: "gpt-oss commentary", format: FormatGPTOSS, in: "<|channel|>commentary<|message|>Hello, world!\nWhat's up?", content: helloContent},
	{name: "gpt-oss analysis final", format: FormatGPTOSS, reasoning: ReasoningAuto, in: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "gpt-oss reasoning none", format: FormatGPTOSS, in: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?", content: "<|channel|>analysis<|message|>I'm\nthinking<|end|>Hello, world!\nWhat's up?"},
	{name: "gpt-oss recipient in role", format: FormatGPTOSS, reasoning: ReasoningAuto, in: " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "gpt-oss recipient in channel", format: FormatGPTOSS, reasoning: ReasoningAuto, in: "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "gpt-oss constrain", format: FormatGPTOSS, reasoning: ReasoningAuto, in: " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "gpt-oss think then call", format: FormatGPTOSS, reasoning: ReasoningAuto, in: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "gpt-oss edit", format: FormatGPTOSS, reasoning: ReasoningAuto, in: "<|channel|>analysis<|message|>Thinking about edit...<|end|><|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json<|message|>{\"oldString\": \"if (part < railCount - 1) {\", \"newString\": \"if (part < 4) {\", \"replaceAll\": false}<|call|>",
		reasoningOut: "Thinking about edit...", calls: []ToolCall{call("edit", `{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", "replaceAll": false}`)}},

	{name: "kimi call", format: FormatKimiK2, in: "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>", calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0")}},
	{name: "kimi think call", format: FormatKimiK2, reasoning: ReasoningAuto, in: "<think>I'm thinking about this</think><|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>",
		reasoningOut: "I'm thinking about this", calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0")}},
	{name: "kimi content call", format: FormatKimiK2, in: "Hello, world!\nWhat's up?<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>", content: helloContent, calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0")}},
	{name: "kimi parallel", format: FormatKimiK2, reasoning: ReasoningAuto, in: "<think>I need to call two functions</think><|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{\"code\": \"print('hey')\"}<|tool_call_end|><|tool_calls_section_end|>",
		reasoningOut: "I need to call two functions", calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0"), callID("python", `{"code": "print('hey')"}`, "functions.python:1")}},

	{name: "glm 4.6 call", format: FormatGLM45, in: "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "glm 4.7 call", format: FormatGLM45, in: "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "glm think", format: FormatGLM45, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking</think>Hello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "glm string arg", format: FormatGLM45, in: "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>", calls: []ToolCall{call("get_time", `{"city": "Paris"}`)}},

	{name: "firefunction call", format: FormatFireFunctionV2, in: " functools[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "nemotron v2 call", format: FormatNemotronV2, reasoning: ReasoningAuto, forced: true, in: "I'm\nthinking\n</think>\n<TOOLCALL>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]</TOOLCALL>", reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "apriel call", format: FormatApriel, in: "<tool_calls>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]</tool_calls>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "seed-oss content", format: FormatSeedOSS, in: helloContent, content: helloContent},
	{name: "seed-oss think", format: FormatSeedOSS, reasoning: ReasoningDeepSeek, in: "<seed:think>I'm thinking about the answer</seed:think>\nHello, world!", content: "Hello, world!", reasoningOut: "I'm thinking about the answer"},
	{name: "seed-oss call", format: FormatSeedOSS, in: "<seed:tool_call>\n<function=special_function>\n<parameter=arg1>1</parameter>\n</function>\n</seed:tool_call>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "seed-oss parallel", format: FormatSeedOSS, in: "<seed:tool_call>\n<function=special_function>\n<parameter=arg1>1</parameter>\n</function>\n</seed:tool_call>\n<seed:tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>1</parameter>\n<parameter=arg2>2</parameter>\n</function>\n</seed:tool_call>",
		calls: []ToolCall{call("special_function", argsArg1), call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "seed-oss bad call is text", format: FormatSeedOSS, in: "see <seed:tool_call> tags", content: "see <seed:tool_call> tags"},

	{name: "minimax m2 empty think", format: FormatMiniMaxM2, reasoning: ReasoningAuto, forced: true, in: "\n</think>\n\nHello, world!\nWhat's up?", content: helloContent},
	{name: "minimax m2 think", format: FormatMiniMaxM2, reasoning: ReasoningAuto, forced: true, in: "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "minimax m2 empty args", format: FormatMiniMaxM2, reasoning: ReasoningAuto, forced: true, in: "Let's call a tool:\n</think>\n\n<minimax:tool_call>\n<invoke name=\"empty_args\">\n</invoke>\n</minimax:tool_call>", reasoningOut: "Let's call a tool:", calls: []ToolCall{call("empty_args", `{}`)}},
	{name: "minimax m2 call", format: FormatMiniMaxM2, reasoning: ReasoningDeepSeek, forced: true, in: "\n</think>\n\n<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n</minimax:tool_call>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "minimax m2 parallel", format: FormatMiniMaxM2, in: "Hello, world!\nWhat's up?\n<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
		content: helloContent + "\n", calls: []ToolCall{call("special_function", argsArg1), call("get_time", `{"city": "Paris"}`)}},
	{name: "minimax m2 cut off", format: FormatMiniMaxM2, in: "<minimax:tool_call>\n<invoke name=\"get_time\">\n<parameter name=\"city\">Par", calls: []ToolCall{call("get_time", `{`)}, wantErr: true},

	{name: "granite call", format: FormatGranite, in: "<|tool_call|>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]", calls: []ToolCall{call("special_function", argsArg1)}},

	// Kimi K2 Thinking: calls inside the thinking block, without section
	// markers or end markers.
	{name: "kimi call inside thinking", format: FormatKimiK2, reasoning: ReasoningAuto, in: "<think>I need to call two functions<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{\"code\": \"print('hey')\"}<|tool_call_end|><|tool_calls_section_end|>",
		reasoningOut: "I need to call two functions", calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0"), callID("python", `{"code": "print('hey')"}`, "functions.python:1")}},
	{name: "kimi bare calls inside thinking", format: FormatKimiK2, reasoning: ReasoningAuto, in: "<think>I need to call two functions<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{\"code\": \"print('hey')\"}",
		reasoningOut: "I need to call two functions", calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0"), callID("python", `{"code": "print('hey')"}`, "functions.python:1")}},
	{name: "kimi bare call no end", format: FormatKimiK2, reasoning: ReasoningAuto, in: "<|tool_call_begin|>functions.execute_command:0<|tool_call_argument_begin|>{\"command\": \"ls -lah\", \"cwd\": \"/home/user/development/exllamav3\", \"timeout\": 10}",
		calls: []ToolCall{callID("execute_command", `{"command": "ls -lah", "cwd": "/home/user/development/exllamav3", "timeout": 10}`, "functions.execute_command:0")}},
	{name: "kimi three calls", format: FormatKimiK2, reasoning: ReasoningAuto, in: "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{\"code\": \"print(1)\"}<|tool_call_end|><|tool_call_begin|>functions.html:2<|tool_call_argument_begin|>{\"markup\": \"<p>test</p>\"}<|tool_call_end|><|tool_calls_section_end|>",
		calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0"), callID("python", `{"code": "print(1)"}`, "functions.python:1"), callID("html", `{"markup": "<p>test</p>"}`, "functions.html:2")}},
	{name: "kimi empty args", format: FormatKimiK2, in: "<|tool_calls_section_begin|><|tool_call_begin|>functions.empty_args:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>", calls: []ToolCall{callID("empty_args", `{}`, "functions.empty_args:0")}},
	{name: "kimi cut off", format: FormatKimiK2, in: "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": ", calls: []ToolCall{callID("special_function", `{"arg1":`, "functions.special_function:0")}, wantErr: true},
	{name: "kimi text after calls", format: FormatKimiK2, in: "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|>\nDone.", content: "Done.", calls: []ToolCall{callID("special_function", argsArg1, "functions.special_function:0")}},
	{name: "kimi stray marker is text", format: FormatKimiK2, in: "see <|tool_call_begin|> here", content: "see <|tool_call_begin|> here"},

	// DeepSeek V3.2 (DSML); the thinking prompt ends with <think>.
	{name: "dsml content", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, in: helloContent, content: helloContent},
	{name: "dsml think", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "I'm\nthinking</think>Hello, world!\nWhat's up?", content: helloContent, reasoningOut: "I'm\nthinking"},
	{name: "dsml think call", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Let me check the time</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Tokyo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Let me check the time", calls: []ToolCall{call("get_time", `{"city": "Tokyo"}`)}},
	{name: "dsml call", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, in: "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"special_function\">\n<｜DSML｜parameter name=\"arg1\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "dsml parallel", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Calling both</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Calling both", calls: []ToolCall{call("get_time", `{"city": "Paris"}`), call("get_weather", `{"city": "Paris"}`)}},
	{name: "dsml content then call", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Thinking about it</think>Let me call the function.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"special_function\">\n<｜DSML｜parameter name=\"arg1\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		content: "Let me call the function.", reasoningOut: "Thinking about it", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "dsml negative", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Test negative</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"magic_int\">\n<｜DSML｜parameter name=\"ref\" string=\"false\">-14</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Test negative", calls: []ToolCall{call("magic_int", `{"ref": -14}`)}},
	{name: "dsml decimal", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Test decimal</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"amount\">\n<｜DSML｜parameter name=\"orig\" string=\"false\">3.14</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Test decimal", calls: []ToolCall{call("amount", `{"orig": 3.14}`)}},
	{name: "dsml boolean", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Test boolean</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"toggle\">\n<｜DSML｜parameter name=\"enabled\" string=\"false\">true</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Test boolean", calls: []ToolCall{call("toggle", `{"enabled": true}`)}},
	{name: "dsml array", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Test array</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"todo_list\">\n<｜DSML｜parameter name=\"todos\" string=\"false\">[\"buy milk\",\"walk dog\"]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Test array", calls: []ToolCall{call("todo_list", `{"todos": ["buy milk", "walk dog"]}`)}},
	{name: "dsml object", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Test object</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"set_config\">\n<｜DSML｜parameter name=\"config\" string=\"false\">{\"theme\":\"dark\",\"level\":2}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Test object", calls: []ToolCall{call("set_config", `{"config": {"theme": "dark", "level": 2}}`)}},
	{name: "dsml empty reasoning", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"city\" string=\"true\">XYZCITY</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		calls: []ToolCall{call("get_time", `{"city": "XYZCITY"}`)}},
	{name: "dsml mixed params", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Multi-arg call</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"magic_int\">\n<｜DSML｜parameter name=\"ref\" string=\"false\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"name\" string=\"true\">foo bar</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Multi-arg call", calls: []ToolCall{call("magic_int", `{"ref": 42, "name": "foo bar"}`)}},
	{name: "dsml string keeps digits", format: FormatDeepSeekV32, in: "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"zip\" string=\"true\">01234</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>", calls: []ToolCall{call("f", `{"zip": "01234"}`)}},
	{name: "dsml call inside thinking", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Let me check\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		reasoningOut: "Let me check", calls: []ToolCall{call("get_time", `{"city": "Paris"}`)}},
	{name: "dsml v4 call", format: FormatDeepSeekV32, reasoning: ReasoningDeepSeek, forced: true, in: "Let me check the time</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Tokyo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
		reasoningOut: "Let me check the time", calls: []ToolCall{call("get_time", `{"city": "Tokyo"}`)}},
	{name: "dsml cut off", format: FormatDeepSeekV32, in: "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Tok", calls: []ToolCall{call("get_time", `{`)}, wantErr: true},
	{name: "dsml bad block is text", format: FormatDeepSeekV32, in: "see <｜DSML｜function_calls> here", content: "see <｜DSML｜function_calls> here"},

	// LFM2 / LFM2.5: Python-style calls.
	{name: "lfm2 content", format: FormatLFM2, in: helloContent, content: helloContent},
	{name: "lfm2 call", format: FormatLFM2, in: "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "lfm2 string arg", format: FormatLFM2, in: "<|tool_call_start|>[get_time(city=\"XYZCITY\")]<|tool_call_end|>", calls: []ToolCall{call("get_time", `{"city":"XYZCITY"}`)}},
	{name: "lfm2 python true", format: FormatLFM2, in: "<|tool_call_start|>[toggle(enabled=True)]<|tool_call_end|>", calls: []ToolCall{call("toggle", `{"enabled": true}`)}},
	{name: "lfm2 python none", format: FormatLFM2, in: "<|tool_call_start|>[set_nullable(value=None)]<|tool_call_end|>", calls: []ToolCall{call("set_nullable", `{"value": null}`)}},
	{name: "lfm2 nested python", format: FormatLFM2, in: "<|tool_call_start|>[set_config(config={\"enabled\": True, \"count\": 3})]<|tool_call_end|>", calls: []ToolCall{call("set_config", `{"config": {"enabled": true, "count": 3}}`)}},
	{name: "lfm2 nested json", format: FormatLFM2, in: "<|tool_call_start|>[set_config(config={\"enabled\": true, \"note\": null})]<|tool_call_end|>", calls: []ToolCall{call("set_config", `{"config": {"enabled": true, "note": null}}`)}},
	{name: "lfm2 dotted name", format: FormatLFM2, in: "<|tool_call_start|>[Calendar.create_event(title=\"demo\", participants=[\"Alice\", \"Bob\"], metadata={\"priority\": \"high\", \"reminder\": true})]<|tool_call_end|>",
		calls: []ToolCall{call("Calendar.create_event", `{"title": "demo", "participants": ["Alice", "Bob"], "metadata": {"priority": "high", "reminder": true}}`)}},
	{name: "lfm2 markdown link", format: FormatLFM2, in: "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org).", content: "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org)."},
	{name: "lfm2 code newline", format: FormatLFM2, in: "<|tool_call_start|>[python(code=\"def hello():\\n    print('hey')\")]<|tool_call_end|>", calls: []ToolCall{call("python", `{"code": "def hello():\n    print('hey')"}`)}},
	{name: "lfm2 code tab", format: FormatLFM2, in: "<|tool_call_start|>[python(code=\"First line\\nSecond line\\tindented\")]<|tool_call_end|>", calls: []ToolCall{call("python", `{"code": "First line\nSecond line\tindented"}`)}},
	{name: "lfm2 escaped quotes", format: FormatLFM2, in: "<|tool_call_start|>[python(code=\"print(\\\"hi\\\")\")]<|tool_call_end|>", calls: []ToolCall{call("python", `{"code": "print(\"hi\")"}`)}},
	{name: "lfm2 single quotes", format: FormatLFM2, in: "<|tool_call_start|>[get_time(city='Paris', tz=('UTC', -1))]<|tool_call_end|>", calls: []ToolCall{call("get_time", `{"city": "Paris", "tz": ["UTC", -1]}`)}},
	{name: "lfm2 content then call", format: FormatLFM2, in: "Let me check the time.<|tool_call_start|>[get_time(city=\"Paris\")]<|tool_call_end|>", content: "Let me check the time.", calls: []ToolCall{call("get_time", `{"city":"Paris"}`)}},
	{name: "lfm2 parallel", format: FormatLFM2, in: "<|tool_call_start|>[special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)]<|tool_call_end|>",
		calls: []ToolCall{call("special_function", argsArg1), call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "lfm2 empty args", format: FormatLFM2, in: "<|tool_call_start|>[empty_args()]<|tool_call_end|>", calls: []ToolCall{call("empty_args", `{}`)}},
	{name: "lfm2 cut off", format: FormatLFM2, in: "<|tool_call_start|>[special_function(arg1=", calls: []ToolCall{call("special_function", `{`)}, wantErr: true},
	{name: "lfm2 think call", format: FormatLFM2, reasoning: ReasoningAuto, in: "<think>I'm\nthinking</think><|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", reasoningOut: "I'm\nthinking", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "lfm2 think content call", format: FormatLFM2, reasoning: ReasoningAuto, in: "<think>I need to call a function</think>Let me check the time.<|tool_call_start|>[get_time(city=\"Paris\")]<|tool_call_end|>",
		reasoningOut: "I need to call a function", content: "Let me check the time.", calls: []ToolCall{call("get_time", `{"city":"Paris"}`)}},
	{name: "lfm2 fake marker in thinking", format: FormatLFM2, reasoning: ReasoningAuto, in: "<think>Let me think about <|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|> hmm</think><|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>",
		reasoningOut: "Let me think about <|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|> hmm", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "lfm2 think content", format: FormatLFM2, reasoning: ReasoningAuto, in: "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", reasoningOut: "I'm\nthinking", content: helloContent},
	{name: "lfm2 bad call is text", format: FormatLFM2, in: "see <|tool_call_start|> here", content: "see <|tool_call_start|> here"},

	// Apertus: function name as the key.
	{name: "apertus call", format: FormatApertus, in: "<|tools_prefix|>[{\"special_function\": {\"arg1\": 1}}]<|tools_suffix|>", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "apertus content", format: FormatApertus, in: helloContent, content: helloContent},
	{name: "apertus think", format: FormatApertus, reasoning: ReasoningAuto, in: "<|inner_prefix|>I'm\nthinking<|inner_suffix|>Hello, world!\nWhat's up?", reasoningOut: "I'm\nthinking", content: helloContent},
	{name: "apertus parallel", format: FormatApertus, in: "Calling.<|tools_prefix|>[{\"special_function\": {\"arg1\": 1}}, {\"special_function_with_opt\": {\"arg1\": 1, \"arg2\": 2}}]<|tools_suffix|>",
		content: "Calling.", calls: []ToolCall{call("special_function", argsArg1), call("special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
	{name: "apertus call inside thinking", format: FormatApertus, reasoning: ReasoningAuto, in: "<|inner_prefix|>Let me check<|tools_prefix|>[{\"get_time\": {\"city\": \"Paris\"}}]<|tools_suffix|>",
		reasoningOut: "Let me check", calls: []ToolCall{call("get_time", `{"city": "Paris"}`)}},
	{name: "apertus cut off", format: FormatApertus, in: "<|tools_prefix|>[{\"get_time\": {\"city\": \"Par", calls: []ToolCall{call("get_time", `{"city": "Par`)}, wantErr: true},
	{name: "apertus bad call is text", format: FormatApertus, in: "see <|tools_prefix|> here", content: "see <|tools_prefix|> here"},

	// Command R+: Action: and a JSON code block.
	{name: "command r+ content", format: FormatCommandRPlus, in: "<|CHATBOT_TOKEN|>Hello, world!\nWhat's up?<|END_OF_TURN_TOKEN|>", content: helloContent},
	{name: "command r+ call", format: FormatCommandRPlus, in: "Action:\n```json\n[{\"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}]\n```", calls: []ToolCall{call("special_function", argsArg1)}},
	{name: "command r+ template call", format: FormatCommandRPlus, in: "I will call it.\nAction:\n```json\n[\n    {\n        \"tool_name\": \"special_function\",\n        \"parameters\": {\"arg1\": 1}\n    },\n    {\n        \"tool_name\": \"get_time\",\n        \"parameters\": {}\n    }\n]```",
		content: "I will call it.\n", calls: []ToolCall{call("special_function", argsArg1), call("get_time", `{}`)}},
	{name: "command r+ plain action", format: FormatCommandRPlus, in: "Action: none needed.", content: "Action: none needed."},
	{name: "command r+ cut off", format: FormatCommandRPlus, in: "Action:\n```json\n[{\"tool_name\": \"special_function\", \"parameters\": {\"arg1\"", calls: []ToolCall{call("special_function", `{"arg1"`)}, wantErr: true},
}

func checkMessage(t *testing.T, c parseCase, got Message) {
	t.Helper()
	assert.Equal(t, RoleAssistant, got.Role)
	assert.Equal(t, c.content, got.Content, "content")
	assert.Equal(t, c.reasoningOut, got.ReasoningContent, "reasoning")
	require.Len(t, got.ToolCalls, len(c.calls), "tool calls: %+v", got.ToolCalls)
	for i, want := range c.calls {
		assert.Equal(t, want.Name, got.ToolCalls[i].Name)
		assert.Equal(t, want.ID, got.ToolCalls[i].ID)
		if !c.wantErr {
			assert.JSONEq(t, want.Arguments, got.ToolCalls[i].Arguments)
		} else {
			assert.Equal(t, want.Arguments, got.ToolCalls[i].Arguments)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in, c.opts())
			if c.wantErr {
				assert.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			checkMessage(t, c, got)
		})
	}
}

// allMarkers are strings no content delta may end with a start of.
var allMarkers = []string{
	"<tool_call>", "<function=", "<|python_tag|>", "[TOOL_CALLS]", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
	"<|START_ACTION|>", "<|tool_call>", "<|tool_calls_section_begin|>", "<TOOLCALL>", "<tool_calls>", "<|tool_call|>",
	"<think>", "</think>", "[THINK]", "[/THINK]", "<|START_THINKING|>", "<|END_THINKING|>", "<|channel|>", "<|start|>",
	"<seed:tool_call>", "<seed:think>", "</seed:think>", "<minimax:tool_call>",
	"<|tool_call_begin|>", "<｜DSML｜function_calls>", "<｜DSML｜tool_calls>", "<｜DSML｜invoke", "<|tool_call_start|>",
	"<|tools_prefix|>", "<|inner_prefix|>", "<|inner_suffix|>", "Action:", "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>",
	"<|open|>", "<|close|>", "<|sep|>",
	"<|tool_calls|>", "<|think|>", "<|end|>", "<|content|>", "<|begin|>",
	"<tool_calls:opensource>", "<think:opensource>", "</think:opensource>",
}

// streamPieces feeds pieces to a parser and checks the deltas add up.
func streamPieces(t *testing.T, opts ParseOptions, pieces []string) (Message, error) {
	t.Helper()
	p := NewParser(opts)
	var acc Message
	acc.Role = RoleAssistant
	apply := func(d Delta) {
		acc.Content += d.Content
		acc.ReasoningContent += d.ReasoningContent
		for _, td := range d.ToolCalls {
			for len(acc.ToolCalls) <= td.Index {
				acc.ToolCalls = append(acc.ToolCalls, ToolCall{})
			}
			tc := &acc.ToolCalls[td.Index]
			if td.Name != "" {
				assert.Empty(t, tc.Name, "name sent twice")
				tc.Name = td.Name
			}
			if td.ID != "" {
				assert.Empty(t, tc.ID, "id sent twice")
				tc.ID = td.ID
			}
			assert.NotEmpty(t, tc.Name, "arguments before name")
			tc.Arguments += td.ArgumentsDelta
		}
	}
	var streamErr error
	for _, piece := range pieces {
		d, err := p.Push(piece)
		if err != nil {
			streamErr = err
		}
		apply(d)
	}
	d, err := p.Finish()
	apply(d)
	if err == nil && streamErr != nil {
		t.Errorf("Push failed (%v) but Finish did not", streamErr)
	}
	final := p.Message()
	assert.Equal(t, final, acc, "concatenated deltas differ from Message()")
	return final, err
}

// checkResumed pushes pieces and checks each delta against reading the
// whole prefix from the start, so that resuming at the settled point
// changes nothing.
func checkResumed(t *testing.T, opts ParseOptions, pieces []string) {
	t.Helper()
	p := NewParser(opts)
	sent := Message{Role: RoleAssistant}
	prefix := ""
	for i, piece := range pieces {
		prefix += piece
		got, gotErr := p.Push(piece)
		st := newState(prefix, opts, true)
		st.run()
		msg := st.message()
		want, err := diff(sent, msg)
		if err == nil {
			sent, err = msg, st.err
		}
		require.Equal(t, err, gotErr, "piece %d: %q", i, prefix)
		if err != nil {
			return
		}
		require.Equal(t, want, got, "piece %d: %q", i, prefix)
		require.Equal(t, sent, p.Message(), "piece %d: %q", i, prefix)
	}
}

func runeSplit(s string) []string {
	var out []string
	for len(s) > 0 {
		_, n := utf8.DecodeRuneInString(s)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func randomSplit(r *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + r.Intn(8)
		if n > len(s) {
			n = len(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func TestParserStream(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			whole, wholeErr := Parse(c.in, c.opts())
			splits := map[string][]string{"runes": runeSplit(c.in), "bytes": strings.Split(c.in, "")}
			for k := 0; k < 3; k++ {
				splits["random"+string(rune('0'+k))] = randomSplit(r, c.in)
			}
			bytesSplit := make([]string, len(c.in))
			for i := 0; i < len(c.in); i++ {
				bytesSplit[i] = c.in[i : i+1]
			}
			splits["bytes"] = bytesSplit
			for name, pieces := range splits {
				got, err := streamPieces(t, c.opts(), pieces)
				assert.Equal(t, whole, got, "split %s", name)
				assert.Equal(t, wholeErr != nil, err != nil, "split %s: error %v vs %v", name, err, wholeErr)
				checkResumed(t, c.opts(), pieces)
			}
			// No content delta may show the start of a marker before the
			// parser knows it is not one.
			if len(c.calls) > 0 || c.reasoningOut != "" {
				p := NewParser(c.opts())
				for _, piece := range runeSplit(c.in) {
					d, _ := p.Push(piece)
					for _, m := range allMarkers {
						if c.noTools || c.reasoning == ReasoningNone && strings.Contains(c.content, m) {
							continue
						}
						assert.NotContains(t, d.Content, m)
					}
				}
			}
		})
	}
}
