package chat

import (
	"fmt"
	"strings"
)

// Format is a model family's way of writing reasoning and tool calls in its
// output.
type Format int

// Formats known to the parser.
const (
	// FormatContentOnly is plain text (with an optional <think> block).
	FormatContentOnly Format = iota
	// FormatGeneric is the JSON envelope used for models with no tool-call
	// format of their own: {"tool_call":{...}}, {"tool_calls":[...]} or
	// {"response":"..."}.
	FormatGeneric
	// FormatHermes2Pro is <tool_call>{"name":...,"arguments":...}</tool_call>
	// (Hermes 2 Pro / 3, Qwen 2.5 / 3, Granite 4).
	FormatHermes2Pro
	// FormatQwen3Coder is <tool_call><function=name><parameter=p>v</parameter>
	// </function></tool_call> (Qwen3-Coder, Qwen 3.5, Nemotron 3 Nano).
	FormatQwen3Coder
	// FormatLlama3x is a bare {"name":...,"parameters":...} object, or
	// <|python_tag|> for built-in tools (Llama 3.1 to 3.3).
	FormatLlama3x
	// FormatMistralNemo is [TOOL_CALLS][{"name":...,"arguments":...,"id":...}].
	FormatMistralNemo
	// FormatMagistral is [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} with
	// [THINK]...[/THINK] reasoning (Magistral, Ministral 3, Mistral Small 3.2,
	// Devstral).
	FormatMagistral
	// FormatFunctionaryV31 is <function=name>{...}</function> and
	// <|python_tag|> code.
	FormatFunctionaryV31
	// FormatFunctionaryV32 is >>>name\n{...} with >>>all\n for text.
	FormatFunctionaryV32
	// FormatDeepSeekR1 is <｜tool▁calls▁begin｜> ... ```json blocks, with
	// <think> reasoning.
	FormatDeepSeekR1
	// FormatDeepSeekV31 is <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}.
	FormatDeepSeekV31
	// FormatCommandR7B is <|START_THINKING|>, <|START_RESPONSE|> and
	// <|START_ACTION|>[...]<|END_ACTION|>.
	FormatCommandR7B
	// FormatGemma is Gemma 4's <|tool_call>call:name{k:v}<tool_call|> with
	// <|channel>thought ...<channel|> reasoning.
	FormatGemma
	// FormatGPTOSS is OpenAI's harmony format: <|channel|>analysis,
	// commentary to=functions.name, final.
	FormatGPTOSS
	// FormatKimiK2 is <|tool_calls_section_begin|> with
	// functions.name:index ids.
	FormatKimiK2
	// FormatGLM45 is <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>.
	FormatGLM45
	// FormatFireFunctionV2 is " functools[{...}]".
	FormatFireFunctionV2
	// FormatNemotronV2 is <TOOLCALL>[{...}]</TOOLCALL>.
	FormatNemotronV2
	// FormatApriel is <tool_calls>[{...}]</tool_calls>.
	FormatApriel
	// FormatGranite is <|tool_call|>[{...}] (Granite 3.x).
	FormatGranite
	// FormatSeedOSS is <seed:tool_call><function=name><parameter=p>v
	// </parameter></function></seed:tool_call> with <seed:think> reasoning
	// (ByteDance Seed-OSS).
	FormatSeedOSS
	// FormatMiniMaxM2 is <minimax:tool_call><invoke name="f"><parameter
	// name="p">v</parameter></invoke></minimax:tool_call> with <think>
	// reasoning.
	FormatMiniMaxM2
	// FormatDeepSeekV32 is DeepSeek's DSML markup: <｜DSML｜function_calls>
	// (or tool_calls in V4) with <｜DSML｜invoke name="f"> and
	// <｜DSML｜parameter name="p" string="true|false">v</｜DSML｜parameter>
	// items, and <think> reasoning (DeepSeek V3.2 and V4).
	FormatDeepSeekV32
	// FormatLFM2 is <|tool_call_start|>[name(k=v, ...)]<|tool_call_end|>
	// with Python-style arguments and <think> reasoning (LFM2, LFM2.5).
	FormatLFM2
	// FormatApertus is <|tools_prefix|>[{"name": {...}}]<|tools_suffix|>
	// with <|inner_prefix|>...<|inner_suffix|> reasoning (Apertus).
	FormatApertus
	// FormatCommandRPlus is Action:\n```json\n[{"tool_name": ...,
	// "parameters": ...}]``` (Command R+ tool use).
	FormatCommandRPlus
	// FormatCohere2MoE is Command R7B's markup with the answer between
	// <|START_TEXT|> and <|END_TEXT|>, after a <|START_THINKING|> block
	// that the generation prompt opens (Cohere2 MoE).
	FormatCohere2MoE
	// FormatMiniCPM5 is <function name="f"><param name="p">v</param>
	// </function>, a value optionally in <![CDATA[...]]>, with <think>
	// reasoning (MiniCPM5).
	FormatMiniCPM5
	// FormatKimiK3 is Kimi K3's tags, <|open|>t attrs<|sep|> ...
	// <|close|>t<|sep|>: a think block the generation prompt opens, the
	// answer in a response section, then a tools section of <|open|>call
	// tool="f"<|sep|> calls with one <|open|>argument key="p"<|sep|> tag a
	// parameter.
	FormatKimiK3
	// FormatSolarOpen is <|tool_calls|> followed by
	// <|tool_call:begin|>id<|tool_call:name|>f<|tool_call:args|>{...}
	// <|tool_call:end|> items and <|calls|>, the answer between
	// <|content|> and <|end|>, after a <|think|> block ended by <|end|>
	// (Solar Open).
	FormatSolarOpen
	// FormatHunyuan3 is <tool_calls:opensource> followed by
	// <tool_call:opensource>f<tool_sep:opensource> calls with
	// <arg_key:opensource>k</arg_key:opensource>
	// <arg_value:opensource>v</arg_value:opensource> items, after a
	// <think:opensource> block (Hunyuan 3).
	FormatHunyuan3

	formatCount
)

var formatNames = [...]string{
	FormatContentOnly:    "Content-only",
	FormatGeneric:        "Generic",
	FormatHermes2Pro:     "Hermes 2 Pro",
	FormatQwen3Coder:     "Qwen3 Coder",
	FormatLlama3x:        "Llama 3.x",
	FormatMistralNemo:    "Mistral Nemo",
	FormatMagistral:      "Magistral",
	FormatFunctionaryV31: "Functionary v3.1",
	FormatFunctionaryV32: "Functionary v3.2",
	FormatDeepSeekR1:     "DeepSeek R1",
	FormatDeepSeekV31:    "DeepSeek V3.1",
	FormatCommandR7B:     "Command R7B",
	FormatGemma:          "Gemma",
	FormatGPTOSS:         "GPT-OSS",
	FormatKimiK2:         "Kimi K2",
	FormatGLM45:          "GLM 4.5",
	FormatFireFunctionV2: "FireFunction v2",
	FormatNemotronV2:     "Nemotron v2",
	FormatApriel:         "Apriel",
	FormatGranite:        "Granite",
	FormatSeedOSS:        "Seed-OSS",
	FormatMiniMaxM2:      "MiniMax M2",
	FormatDeepSeekV32:    "DeepSeek V3.2",
	FormatLFM2:           "LFM2",
	FormatApertus:        "Apertus",
	FormatCommandRPlus:   "Command R+",
	FormatCohere2MoE:     "Cohere2 MoE",
	FormatMiniCPM5:       "MiniCPM5",
	FormatKimiK3:         "Kimi K3",
	FormatSolarOpen:      "Solar Open",
	FormatHunyuan3:       "Hunyuan 3",
}

// String returns the format's name.
func (f Format) String() string {
	if f >= 0 && f < formatCount {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// DetectFormat picks the tool-call and reasoning format from a chat
// template's source text by looking for the marker strings each family's
// template contains. A template with none of the known markers gets
// [FormatContentOnly], whether it mentions tools or not: as in llama.cpp
// v0.4.0, whose chat parser has no generic JSON envelope, tools offered
// with such a template are shown to the model and its answer is free text.
// [FormatGeneric] and [FormatGranite] are never detected (v0.4.0 finds no
// tool-call format in Granite 3's templates); they stay available to
// callers that choose them. [TemplateFormat] also looks at what the
// template renders.
func DetectFormat(templateSource string) Format {
	src := templateSource
	has := func(subs ...string) bool {
		for _, s := range subs {
			if !strings.Contains(src, s) {
				return false
			}
		}
		return true
	}
	switch {
	case has("<seed:tool_call>"):
		return FormatSeedOSS
	case has("<minimax:tool_call>"):
		return FormatMiniMaxM2
	case has("<|channel|>"):
		return FormatGPTOSS
	case has("[TOOL_CALLS]", "[ARGS]"):
		return FormatMagistral
	case has("[TOOL_CALLS]"):
		return FormatMistralNemo
	case has(">>>all"):
		return FormatFunctionaryV32
	case has("<|tool_calls_section_begin|>"):
		return FormatKimiK2
	case has(kimi3Open, kimi3Close, kimi3EOM):
		return FormatKimiK3
	case has("<|START_ACTION|>", "<|START_TEXT|>"):
		return FormatCohere2MoE
	case has("<|START_ACTION|>"):
		return FormatCommandR7B
	case has("<|CHATBOT_TOKEN|>", "Action:", "```json"):
		return FormatCommandRPlus
	case has("dsml_token", "DSML") && (has("function_calls") || has("tool_calls")):
		return FormatDeepSeekV32
	case has("<|tool_list_start|>", "<|tool_list_end|>"), has("List of tools: ["):
		return FormatLFM2
	case has("<|tools_prefix|>"):
		return FormatApertus
	case has("'<|tool_call>call:'"), has("<|tool_call>call:"):
		return FormatGemma
	case has("<tool_sep{}>", "<arg_key{}>", ":opensource"), has(hyCalls, hySep, hyArgKey):
		return FormatHunyuan3
	case has("<|tool_calls|>", "<|tool_call:begin|>", "<|tool_call:args|>"):
		return FormatSolarOpen
	case has("Tool usage guidelines:", `<function name="`, `<param name="`):
		return FormatMiniCPM5
	case has("<tool_call>", "<function=", "<parameter="):
		return FormatQwen3Coder
	case has("<tool_call>", "<arg_key>"):
		return FormatGLM45
	case has("tool▁calls▁begin", "```json"):
		return FormatDeepSeekR1
	case has("tool▁calls▁begin"):
		return FormatDeepSeekV31
	case has("<function=", "<|python_tag|>") || has("<function=") && !has("<tool_call>"):
		return FormatFunctionaryV31
	case has("functools["):
		return FormatFireFunctionV2
	case has("<TOOLCALL>"):
		return FormatNemotronV2
	case has("<tool_calls>"):
		return FormatApriel
	case has("<tool_call>"):
		return FormatHermes2Pro
	case has("<|start_header_id|>") && (has("ipython") || has("<|python_tag|>")):
		return FormatLlama3x
	}
	return FormatContentOnly
}

// TemplateFormat is the format of a parsed template: [DetectFormat] of its
// source, but [FormatContentOnly] when the template does not render an
// assistant message's tool calls (its [TemplateCaps].SupportsToolCalls),
// for llama.cpp v0.4.0 learns a template's tool-call format from how it
// renders them, and finds none then. The formats llama.cpp picks from
// marker strings alone (GPT-OSS, Functionary v3.2, Kimi K2, Kimi K3,
// LFM2, DeepSeek V3.2, Gemma 4, Qwen3-Coder, Magistral) are kept
// regardless.
func TemplateFormat(t *Template) Format {
	f := DetectFormat(t.Source())
	switch f {
	case FormatContentOnly, FormatGPTOSS, FormatFunctionaryV32, FormatKimiK2, FormatKimiK3, FormatLFM2, FormatDeepSeekV32,
		FormatGemma, FormatQwen3Coder, FormatMagistral:
		return f
	}
	if !t.Caps().SupportsToolCalls {
		return FormatContentOnly
	}
	return f
}

// ReasoningFormat says what to do with a model's thinking.
type ReasoningFormat int

const (
	// ReasoningNone leaves thinking in the content as the model wrote it.
	ReasoningNone ReasoningFormat = iota
	// ReasoningDeepSeek moves thinking to [Message.ReasoningContent].
	ReasoningDeepSeek
	// ReasoningAuto extracts thinking the way the format writes it; for the
	// parsers here it behaves as [ReasoningDeepSeek].
	ReasoningAuto
)

// String returns the name accepted by [ParseReasoningFormat].
func (r ReasoningFormat) String() string {
	switch r {
	case ReasoningNone:
		return "none"
	case ReasoningDeepSeek:
		return "deepseek"
	case ReasoningAuto:
		return "auto"
	}
	return fmt.Sprintf("ReasoningFormat(%d)", int(r))
}

// ParseReasoningFormat reads a reasoning format name: "none", "deepseek",
// "deepseek-legacy" (treated as deepseek) or "auto".
func ParseReasoningFormat(s string) (ReasoningFormat, error) {
	switch s {
	case "none":
		return ReasoningNone, nil
	case "deepseek", "deepseek-legacy":
		return ReasoningDeepSeek, nil
	case "auto":
		return ReasoningAuto, nil
	}
	return ReasoningNone, fmt.Errorf("chat: unknown reasoning format %q", s)
}
