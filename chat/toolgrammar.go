package chat

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/x/llama/internal/jsonschema"
)

// ToolChoice says whether and which tools the model must call.
type ToolChoice struct {
	// Mode is "auto" (the model may answer or call), "required" (it must
	// call a tool), "none" (it must not) or "function" (it must call
	// Function).
	Mode string
	// Function names the tool to call when Mode is "function".
	Function string
	// Allowed, when not empty, limits the calls of "auto" and "required"
	// to the tools of these names (OpenAI's allowed_tools). The template
	// still shows every tool, so that a conversation's prompt, and the
	// cache of it, stays the same while the allowed set changes.
	Allowed []string
}

// callable returns the tools that choice lets the model call, in their
// order: the one Function names, those Allowed names, or all of them (an
// error for a name not among them).
func callable(choice ToolChoice, tools []Tool) ([]Tool, error) {
	names := choice.Allowed
	if choice.Mode == "function" {
		names = []string{choice.Function}
	}
	if len(names) == 0 {
		return tools, nil
	}
	// Sets, not scans: a request may list thousands of tools and names.
	have := make(map[string]bool, len(tools))
	for _, t := range tools {
		have[t.Name] = true
	}
	want := make(map[string]bool, len(names))
	for _, name := range names {
		if !have[name] {
			if choice.Mode == "function" {
				return nil, fmt.Errorf("chat: tool choice names unknown function %q", name)
			}
			return nil, fmt.Errorf("chat: allowed tool %q is not among the tools", name)
		}
		want[name] = true
	}
	return slices.DeleteFunc(slices.Clone(tools), func(t Tool) bool { return !want[t.Name] }), nil
}

// TriggerKind says how a [Trigger] is matched.
type TriggerKind int

const (
	// TriggerWord starts the grammar when the output contains Value.
	TriggerWord TriggerKind = iota
	// TriggerPattern starts it when the regular expression Value matches
	// part of the output.
	TriggerPattern
	// TriggerPatternFull starts it when Value matches the whole output so
	// far.
	TriggerPatternFull
	// TriggerToken starts it when the special token Value is generated.
	TriggerToken
)

// Trigger is what starts a lazy grammar, as a template's format gives it:
// text, not yet bound to a model's tokens. engine.ChatTriggers binds it to
// a model as a sampling.GrammarTrigger (a TriggerToken of one token
// becomes that token).
type Trigger struct {
	Kind  TriggerKind
	Value string
}

// ToolGrammar constrains generation to a format's tool calls.
type ToolGrammar struct {
	// Grammar is the GBNF grammar (root rule "root").
	Grammar string
	// Lazy grammars apply only from a trigger on; before that the model
	// writes freely.
	Lazy bool
	// Triggers start a lazy grammar.
	Triggers []Trigger
	// PreservedTokens are special tokens of the format that must be
	// tokenized as themselves.
	PreservedTokens []string
}

// BuildToolGrammar makes the grammar that constrains output to tool calls
// in format f for the given tools (those choice allows). With choice "auto" the grammar is lazy,
// triggered at the format's tool-call marker; with "required" or "function"
// it applies from the first token. parallel allows several calls. Choice
// "none" needs no grammar: it returns nil and no error.
func BuildToolGrammar(f Format, tools []Tool, choice ToolChoice, parallel bool) (*ToolGrammar, error) {
	return buildToolGrammar(f, tools, choice, parallel, nil, false)
}

// buildToolGrammar is BuildToolGrammar where, under choice "auto", the
// answer may be instead the JSON of schema, a response format (nil:
// none), as with OpenAI: calls or that JSON, from the first token, so
// the grammar is not lazy. fence allows the JSON in a ```json fence.
// With the generic format the JSON is the envelope's "response".
func buildToolGrammar(f Format, tools []Tool, choice ToolChoice, parallel bool, schema []byte, fence bool) (*ToolGrammar, error) {
	mode := choice.Mode
	if mode == "" {
		mode = "auto"
	}
	switch mode {
	case "none":
		return nil, nil
	case "auto", "required", "function":
		var err error
		if tools, err = callable(ToolChoice{Mode: mode, Function: choice.Function, Allowed: choice.Allowed}, tools); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("chat: unknown tool choice mode %q", choice.Mode)
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("chat: no tools to build a grammar for")
	}
	// The whole grammar is checked once, after all tools: checked after
	// each tool, a request with thousands of tools took time quadratic in
	// their number.
	g := &grammarGen{b: jsonschema.NewBuilder(), f: f}
	g.b.DeferChecks()
	for _, r := range formatRules(f) {
		g.b.AddRule(r[0], r[1])
	}
	for _, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("chat: tool without a name")
		}
		params := []byte(t.Parameters)
		if len(strings.TrimSpace(string(params))) == 0 || string(params) == "null" {
			params = []byte(`{"type":"object"}`)
		}
		args, err := g.b.AddSchema(t.Name+"-args", params)
		if err != nil {
			return nil, fmt.Errorf("chat: parameters of tool %q: %w", t.Name, err)
		}
		g.tools = append(g.tools, toolRule{name: t.Name, args: args, params: params})
	}
	if err := g.b.Check(); err != nil {
		return nil, fmt.Errorf("chat: tool parameters: %w", err)
	}
	answer := ""
	if mode == "auto" && len(schema) > 0 {
		a, err := g.b.AddSchema("response-format", schema)
		if err == nil {
			err = g.b.Check()
		}
		if err != nil {
			return nil, &responseFormatError{err}
		}
		answer = a
	}
	tg := &ToolGrammar{Lazy: mode == "auto"}
	root := g.build(parallel, tg)
	switch {
	case f == FormatGeneric || f == FormatContentOnly:
		tg.Lazy = false
		if mode == "auto" {
			if answer == "" {
				answer = g.b.AddRule("response-string", `"\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""`)
			}
			resp := g.b.AddRule("response", `"{" space "\"response\"" space ":" space `+answer+` space "}"`)
			root = g.b.AddRule("root-choice", root+" | "+resp)
		}
	case answer != "":
		tg.Lazy = false
		body := "space " + answer + " space"
		if fence {
			body = "space ( \"```json\" space " + answer + " space \"```\" | " + body + " )"
		}
		root = g.b.AddRule("root-choice", root+" | "+g.b.AddRule("response-format-answer", answerMarkup(f, body)))
	}
	if !tg.Lazy {
		tg.Triggers = nil
	}
	tg.Grammar = g.b.Grammar(root)
	return tg, nil
}

// formatRules are the rules of format f's call syntax that its calls
// refer to by name. They go into the builder before any schema, so that
// they keep these names: a schema's rule of the same name (a property
// "xml-text" deep in a tool's parameters or in a response format, whose
// rule is named after the property alone) then takes another, where
// added after it would have taken the format's place in the calls.
func formatRules(f Format) [][2]string {
	switch f {
	case FormatQwen3Coder, FormatSeedOSS, FormatMiniMaxM2, FormatDeepSeekV32, FormatMiniCPM5:
		return [][2]string{{"xml-text", `( [^<] | "<" [^/] )*`}}
	case FormatLFM2:
		return [][2]string{
			{"lfm-str", `"\"" ( [^"\\] | "\\" [^\n] )* "\"" | "'" ( [^'\\] | "\\" [^\n] )* "'"`},
			{"lfm-num", `"-"? [0-9]+ ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?`},
			{"lfm-list", `"[" space ( lfm-val ( space "," space lfm-val )* )? space "]"`},
			{"lfm-dict", `"{" space ( lfm-str space ":" space lfm-val ( space "," space lfm-str space ":" space lfm-val )* )? space "}"`},
			{"lfm-val", `lfm-str | lfm-num | "True" | "False" | "None" | "true" | "false" | "null" | lfm-list | lfm-dict`},
			{"lfm-kwarg", `[a-zA-Z_] [a-zA-Z0-9_]* "=" lfm-val`},
		}
	case FormatGemma:
		return [][2]string{
			{"gemma-str", `"<|\"|>" ( [^<] | "<" [^|] )* "<|\"|>"`},
			{"gemma-key", `[a-zA-Z_] [a-zA-Z0-9_]*`},
			{"gemma-val", `gemma-str | "-"? [0-9]+ ( "." [0-9]+ )? | "true" | "false" | "null" | gemma-obj | gemma-arr`},
			{"gemma-obj", `"{" ( gemma-key ":" gemma-val ( "," gemma-key ":" gemma-val )* )? "}"`},
			{"gemma-arr", `"[" ( gemma-val ( "," gemma-val )* )? "]"`},
		}
	case FormatGLM45:
		return [][2]string{{"glm-text", `[^<]*`}}
	case FormatKimiK3:
		return [][2]string{{"kimi-text", `( [^<] | "<" [^|] )*`}}
	case FormatSolarOpen:
		return [][2]string{{"solar-call-id", `[a-z0-9]{10}`}}
	case FormatHunyuan3:
		// A value is any text up to its end tag that holds no key tag,
		// the tag included.
		var rules [][2]string
		for _, line := range strings.Split(strings.TrimSpace(untilMarker("hy-value", hyArgValEnd, []string{hyArgKey})), "\n") {
			if name, body, ok := strings.Cut(line, " ::= "); ok {
				rules = append(rules, [2]string{name, body})
			}
		}
		return rules
	}
	return nil
}

type toolRule struct {
	name, args string
	params     []byte
}

type grammarGen struct {
	b     *jsonschema.Builder
	f     Format
	tools []toolRule
}

// lit is a GBNF literal.
func lit(s string) string { return jsonschema.Literal(s) }

// jsonName is the GBNF literal of the tool name as a JSON string.
func jsonName(n string) string { return lit(jsonString(n)) }

// alt makes one rule that is any tool's call made by each.
func (g *grammarGen) alt(name string, each func(t toolRule) string) string {
	var parts []string
	for _, t := range g.tools {
		parts = append(parts, g.b.AddRule(t.name+"-"+name, each(t)))
	}
	return g.b.AddRule(name, strings.Join(parts, " | "))
}

// jsonCall is {"name": N, "<argsKey>": A} with optional extra members.
func (g *grammarGen) jsonCall(rule, nameKey, argsKey, extra string) string {
	return g.alt(rule, func(t toolRule) string {
		body := `"{" space ` + lit(jsonString(nameKey)) + ` space ":" space ` + jsonName(t.name) +
			` space "," space ` + lit(jsonString(argsKey)) + ` space ":" space ` + t.args
		if extra != "" {
			body += ` space "," space ` + extra
		}
		return body + ` space "}"`
	})
}

// paramName is the GBNF of a parameter's name in tool t's calls where
// the format writes parameters one by one: one of the names of its
// schema's properties, as llama.cpp's grammars have it, or where the
// schema names none (a free-form object), any text that loose matches.
func (g *grammarGen) paramName(t toolRule, loose string) string {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(t.params, &schema) != nil || len(schema.Properties) == 0 {
		return loose
	}
	names := make([]string, 0, len(schema.Properties))
	for n := range schema.Properties {
		names = append(names, lit(n))
	}
	slices.Sort(names)
	return "( " + strings.Join(names, " | ") + " )"
}

// paramTimes is the GBNF repetition of the parameters of tool t's calls
// where the format writes them one by one: at most as many as its
// schema names (a small model otherwise writes the same one again until
// its token limit), or any number where it names none.
func (g *grammarGen) paramTimes(t toolRule) string {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(t.params, &schema) != nil || len(schema.Properties) == 0 {
		return "*"
	}
	return fmt.Sprintf("{0,%d}", len(schema.Properties))
}

// repeat is one call, or with parallel one or more separated by sep.
func (g *grammarGen) repeat(call, sep string, parallel bool) string {
	if !parallel {
		return call
	}
	return call + " ( " + sep + " " + call + " )*"
}

func regexQuote(s string) string { return regexp.QuoteMeta(s) }

func (g *grammarGen) build(parallel bool, tg *ToolGrammar) string {
	word := func(w ...string) {
		for _, x := range w {
			tg.Triggers = append(tg.Triggers, Trigger{Kind: TriggerWord, Value: x})
		}
	}
	preserve := func(t ...string) { tg.PreservedTokens = append(tg.PreservedTokens, t...) }
	b := g.b
	switch g.f {
	case FormatHermes2Pro:
		c := g.jsonCall("tool-call-json", "name", "arguments", "")
		call := b.AddRule("tool-call", `"<tool_call>" space `+c+` space "</tool_call>"`)
		word("<tool_call>")
		preserve("<think>", "</think>", "<tool_call>", "</tool_call>")
		return b.AddRule("tool-calls", g.repeat(call, "space", parallel))
	case FormatQwen3Coder:
		call := g.alt("tool-call", func(t toolRule) string {
			param := g.b.AddRule(t.name+"-param", `"<parameter=" `+g.paramName(t, `[^>\n]+`)+` ">\n" xml-text "\n</parameter>\n"`)
			return lit("<tool_call>\n<function="+t.name+">\n") + " " + param + "* " + lit("</function>\n</tool_call>")
		})
		word("<tool_call>")
		preserve("<think>", "</think>", "<tool_call>", "</tool_call>")
		return b.AddRule("tool-calls", g.repeat(call, `"\n"`, parallel))
	case FormatSeedOSS:
		call := g.alt("tool-call", func(t toolRule) string {
			param := g.b.AddRule(t.name+"-param", `"<parameter=" `+g.paramName(t, `[^>\n]+`)+` ">" xml-text "</parameter>\n"`)
			return lit("<seed:tool_call>\n<function="+t.name+">\n") + " " + param + "* " + lit("</function>\n</seed:tool_call>")
		})
		word("<seed:tool_call>")
		preserve("<seed:think>", "</seed:think>", "<seed:tool_call>", "</seed:tool_call>")
		return b.AddRule("tool-calls", g.repeat(call, `"\n"`, parallel))
	case FormatMiniCPM5:
		call := g.alt("tool-call", func(t toolRule) string {
			param := g.b.AddRule(t.name+"-param", `"<param name=\"" `+g.paramName(t, `[^"\n]+`)+` "\">" xml-text "</param>" space`)
			return lit(cpmFunction+t.name+`">`) + " space " + param + "* " + lit("</function>")
		})
		word("<function")
		preserve("<function", "<param", "</function>", "</param>", "<think>", "</think>")
		return b.AddRule("tool-calls", g.repeat(call, "space", parallel))
	case FormatMiniMaxM2:
		invoke := g.alt("invoke", func(t toolRule) string {
			param := g.b.AddRule(t.name+"-param", `"<parameter name=\"" `+g.paramName(t, `[^"\n]+`)+` "\">" xml-text "</parameter>\n"`)
			return lit("<invoke name=\""+t.name+"\">\n") + " " + param + "* " + lit("</invoke>\n")
		})
		calls := invoke
		if parallel {
			calls = invoke + "+"
		}
		word("<minimax:tool_call>")
		preserve("<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>")
		return b.AddRule("tool-calls", `"<minimax:tool_call>\n" `+calls+` "</minimax:tool_call>"`)
	case FormatDeepSeekV32:
		invoke := g.alt("invoke", func(t toolRule) string {
			param := g.b.AddRule(t.name+"-param", lit(dsmlParam)+" "+g.paramName(t, `[^"\n]+`)+` "\" string=\"" ( "true" | "false" ) "\">" xml-text `+lit(dsmlParamEnd+"\n"))
			return lit(dsmlInvoke+t.name+"\">\n") + " " + param + "* " + lit(dsmlInvokeEnd+"\n")
		})
		calls := invoke
		if parallel {
			calls = invoke + "+"
		}
		// V3.2 names the block function_calls, V4 tool_calls.
		var blocks []string
		for _, open := range dsmlBlocks {
			word(open)
			blocks = append(blocks, lit(open+"\n")+" "+calls+" "+lit("</"+open[1:]))
		}
		preserve(dsml, "<think>", "</think>")
		return b.AddRule("tool-calls", strings.Join(blocks, " | "))
	case FormatLFM2:
		call := g.alt("tool-call", func(t toolRule) string {
			return lit(t.name+"(") + ` ( lfm-kwarg ( "," space lfm-kwarg )* )? ")"`
		})
		word(lfmCallStart)
		preserve(lfmCallStart, lfmCallEnd, "<think>", "</think>")
		return b.AddRule("tool-calls", lit(lfmCallStart+"[")+" "+g.repeat(call, `"," space`, parallel)+" "+lit("]"+lfmCallEnd))
	case FormatApertus:
		c := g.alt("tool-call", func(t toolRule) string {
			return `"{" space ` + jsonName(t.name) + ` space ":" space ` + t.args + ` space "}"`
		})
		word(apertusTools)
		preserve(apertusTools, apertusToolsEnd, apertusInner, apertusInnerEnd)
		return b.AddRule("tool-calls", lit(apertusTools+"[")+" space "+g.repeat(c, `space "," space`, parallel)+" space "+lit("]"+apertusToolsEnd))
	case FormatCommandRPlus:
		c := g.jsonCall("tool-call", "tool_name", "parameters", "")
		word(commandRAction)
		return b.AddRule("tool-calls", lit(commandRAction+"\n```json\n[")+" space "+g.repeat(c, `space "," space`, parallel)+" space "+lit("]\n```"))
	case FormatLlama3x:
		call := g.jsonCall("tool-call", "name", "parameters", "")
		tg.Triggers = append(tg.Triggers, Trigger{Kind: TriggerPatternFull, Value: `\s*\{\s*"name"[\s\S]*`})
		preserve("<|python_tag|>", "<|eom_id|>")
		return b.AddRule("tool-calls", g.repeat(call, `space ";" space`, parallel))
	case FormatMistralNemo:
		c := g.jsonCall("tool-call", "name", "arguments", `"\"id\"" space ":" space "\"" [a-zA-Z0-9]{9} "\""`)
		word("[TOOL_CALLS]")
		preserve("[TOOL_CALLS]")
		return b.AddRule("tool-calls", `"[TOOL_CALLS]" "[" space `+g.repeat(c, `space "," space`, parallel)+` space "]"`)
	case FormatMagistral:
		call := g.alt("tool-call", func(t toolRule) string {
			return `"[TOOL_CALLS]" ` + lit(t.name) + ` ( "[CALL_ID]" [a-zA-Z0-9]{9} )? "[ARGS]" ` + t.args
		})
		word("[TOOL_CALLS]")
		preserve("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]")
		return b.AddRule("tool-calls", g.repeat(call, "", parallel))
	case FormatFunctionaryV31:
		call := g.alt("tool-call", func(t toolRule) string {
			return lit("<function="+t.name+">") + " " + t.args + ` "</function>"`
		})
		word("<function=")
		preserve("<|python_tag|>")
		return b.AddRule("tool-calls", g.repeat(call, "", parallel))
	case FormatFunctionaryV32:
		first := g.alt("first-call", func(t toolRule) string { return lit(t.name+"\n") + " " + t.args })
		next := g.alt("next-call", func(t toolRule) string { return lit(">>>"+t.name+"\n") + " " + t.args })
		var names []string
		for _, t := range g.tools {
			names = append(names, regexQuote(t.name))
			word(">>>" + t.name + "\n")
		}
		tg.Triggers = append(tg.Triggers, Trigger{Kind: TriggerPatternFull, Value: `(?:` + strings.Join(names, "|") + `)\n[\s\S]*`})
		if tg.Lazy {
			// Triggered mid-output, the call starts with its >>> marker or
			// (at the start) without it.
			return b.AddRule("tool-calls", "( "+first+" | "+next+" )"+map[bool]string{true: " " + next + "*", false: ""}[parallel])
		}
		return b.AddRule("tool-calls", first+map[bool]string{true: " " + next + "*", false: ""}[parallel])
	case FormatDeepSeekR1, FormatDeepSeekV31:
		call := g.alt("tool-call", func(t toolRule) string {
			if g.f == FormatDeepSeekR1 {
				return lit(dsCallBegin+"function"+dsSep+t.name+"\n```json\n") + " " + t.args + " " + lit("\n```"+dsCallEnd)
			}
			return lit(dsCallBegin+t.name+dsSep) + " " + t.args + " " + lit(dsCallEnd)
		})
		word(dsCallsBegin, dsCallBegin)
		preserve("<think>", "</think>", dsCallsBegin, dsCallBegin, dsSep, dsCallEnd, dsCallsEnd)
		calls := call
		if parallel {
			calls = call + "+"
		}
		return b.AddRule("tool-calls", lit(dsCallsBegin)+" "+calls+" "+lit(dsCallsEnd))
	case FormatCommandR7B, FormatCohere2MoE:
		c := g.alt("tool-call", func(t toolRule) string {
			return `"{" space "\"tool_call_id\"" space ":" space "\"" [0-9]+ "\"" space "," space "\"tool_name\"" space ":" space ` +
				jsonName(t.name) + ` space "," space "\"parameters\"" space ":" space ` + t.args + ` space "}"`
		})
		word("<|START_ACTION|>")
		preserve("<|START_ACTION|>", "<|END_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>")
		if g.f == FormatCohere2MoE {
			preserve(cohereText, cohereTextEnd)
		} else {
			preserve("<|START_RESPONSE|>", "<|END_RESPONSE|>")
		}
		return b.AddRule("tool-calls", `"<|START_ACTION|>[" space `+g.repeat(c, `space "," space`, parallel)+` space "]<|END_ACTION|>"`)
	case FormatGemma:
		call := g.alt("tool-call", func(t toolRule) string {
			return lit("<|tool_call>call:"+t.name) + ` gemma-obj "<tool_call|>"`
		})
		word("<|tool_call>")
		preserve("<|tool_call>", "<tool_call|>", `<|"|>`, "<|channel>", "<channel|>")
		return b.AddRule("tool-calls", g.repeat(call, "", parallel))
	case FormatGPTOSS:
		call := g.alt("tool-call", func(t toolRule) string {
			return lit("<|channel|>commentary to=functions."+t.name) + ` " <|constrain|>json"? "<|message|>" ` + t.args
		})
		word("<|channel|>commentary to=functions.")
		preserve(hChannel, hMessage, hStart, hEnd, hCall, hConstrain)
		return b.AddRule("tool-calls", g.repeat(call, `"<|call|><|start|>assistant"`, parallel))
	case FormatKimiK2:
		call := g.alt("tool-call", func(t toolRule) string {
			return lit("<|tool_call_begin|>functions."+t.name+":") + ` [0-9]+ "<|tool_call_argument_begin|>" ` + t.args + ` "<|tool_call_end|>"`
		})
		word("<|tool_calls_section_begin|>")
		preserve("<think>", "</think>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>")
		calls := call
		if parallel {
			calls = call + "+"
		}
		return b.AddRule("tool-calls", `"<|tool_calls_section_begin|>" `+calls+` "<|tool_calls_section_end|>"`)
	case FormatKimiK3:
		// One tools section, after the response section (empty, or only
		// its closing tag where the generation prompt opened it), then
		// the message's closing tags, which the model writes on.
		call := g.alt("tool-call", func(t toolRule) string {
			arg := g.b.AddRule(t.name+"-arg", lit(kimi3Arg)+" "+g.paramName(t, `[^"<]+`)+` "\" type=\"" [a-z]+ "\"" `+
				lit(kimi3Sep)+" kimi-text "+lit(kimi3ArgEnd))
			return lit(kimi3Call+kimi3Attr(t.name)+`"`) + ` ( " index=\"" [0-9]+ "\"" )? ` + lit(kimi3Sep) + " " + arg + "* " + lit(kimi3CallEnd)
		})
		calls := call
		if parallel {
			calls = call + "+"
		}
		word(kimi3Tools)
		// Only the markers are special tokens: the tag names are words.
		preserve(kimi3Open, kimi3Close, kimi3Sep, kimi3EOM)
		return b.AddRule("tool-calls", "( "+lit(kimi3Resp)+"? "+lit(kimi3RespEnd)+" )? "+lit(kimi3Tools)+" "+calls+" "+lit(kimi3ToolsEnd)+" "+kimi3Trailer)
	case FormatGLM45:
		call := g.alt("tool-call", func(t toolRule) string {
			return lit("<tool_call>"+t.name+"\n") + ` ( "<arg_key>" ` + g.paramName(t, `[^<]+`) + ` "</arg_key>\n<arg_value>" glm-text "</arg_value>\n" )* "</tool_call>"`
		})
		word("<tool_call>")
		preserve("<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
		return b.AddRule("tool-calls", g.repeat(call, `"\n"?`, parallel))
	case FormatSolarOpen:
		// The id is as the template asks for it. <|calls|> is optional:
		// Solar Open's vocabulary makes it an end-of-generation token,
		// which a grammar requiring its text would never let the model
		// write (llama-server's grammar requires it).
		call := g.alt("tool-call", func(t toolRule) string {
			return lit(solarCallBegin) + " solar-call-id " + lit(solarCallName+t.name+solarCallArgs) + " " + t.args + " " + lit(solarCallEnd)
		})
		word(solarCalls)
		preserve(solarCalls, solarCallBegin, solarCallName, solarCallArgs, solarCallEnd, solarCallsEnd,
			solarThink, solarEnd, solarContent, "<|begin|>")
		return b.AddRule("tool-calls", lit(solarCalls)+" "+g.repeat(call, "", parallel)+" "+lit(solarCallsEnd)+"?")
	case FormatHunyuan3:
		// The trigger holds the newline after the section's start, as
		// llama-server's does.
		call := g.alt("tool-call", func(t toolRule) string {
			param := g.b.AddRule(t.name+"-param", lit(hyArgKey)+" "+g.paramName(t, `[^<]+`)+" "+lit(hyArgKeyEnd+"\n"+hyArgVal)+` hy-value "\n"`)
			return lit(hyCall+t.name+hySep+"\n") + " " + param + g.paramTimes(t) + " " + lit(hyCallEnd+"\n")
		})
		word(hyCalls + "\n")
		preserve(hyThink, hyThinkEnd, hyCalls, hyCallsEnd, hyCall, hyCallEnd, hySep, hyArgKey, hyArgKeyEnd, hyArgVal, hyArgValEnd)
		calls := call
		if parallel {
			calls = call + "+"
		}
		return b.AddRule("tool-calls", lit(hyCalls+"\n")+" "+calls+" "+lit(hyCallsEnd))
	case FormatFireFunctionV2, FormatNemotronV2, FormatApriel, FormatGranite:
		open, closing := map[Format][2]string{
			FormatFireFunctionV2: {" functools[", "]"},
			FormatNemotronV2:     {"<TOOLCALL>[", "]</TOOLCALL>"},
			FormatApriel:         {"<tool_calls>[", "]</tool_calls>"},
			FormatGranite:        {"<|tool_call|>[", "]"},
		}[g.f][0], map[Format]string{
			FormatFireFunctionV2: "]", FormatNemotronV2: "]</TOOLCALL>", FormatApriel: "]</tool_calls>", FormatGranite: "]",
		}[g.f]
		c := g.jsonCall("tool-call", "name", "arguments", "")
		word(strings.TrimSuffix(strings.TrimPrefix(open, " "), "["))
		preserve(strings.TrimSuffix(strings.TrimPrefix(open, " "), "["))
		return b.AddRule("tool-calls", lit(open)+" space "+g.repeat(c, `space "," space`, parallel)+" space "+lit(closing))
	}
	// Generic (and content-only, which has no format of its own).
	c := g.jsonCall("tool-call", "name", "arguments", "")
	one := b.AddRule("tool-call-one", `"{" space "\"tool_call\"" space ":" space `+c+` space "}"`)
	if parallel {
		many := b.AddRule("tool-call-many", `"{" space "\"tool_calls\"" space ":" space "[" space `+c+` ( space "," space `+c+` )* space "]" space "}"`)
		return b.AddRule("tool-calls", one+" | "+many)
	}
	return one
}

// responseFormatError is a response format's schema that cannot be
// converted to a grammar.
type responseFormatError struct{ err error }

func (e *responseFormatError) Error() string { return "chat: response format: " + e.err.Error() }
func (e *responseFormatError) Unwrap() error { return e.err }

// answerMarkup wraps GBNF body, a response format's answer, in the markup
// format f writes around an answer: a GPT-OSS final message's header,
// Cohere2 MoE's text markers (the end one optional, as llama.cpp's
// parser has it), or Kimi K3's response section (its opening tag
// optional, as the generation prompt may have written it, and its
// closing tags too).
func answerMarkup(f Format, body string) string {
	switch f {
	case FormatGPTOSS:
		return harmonyFinal + " " + body
	case FormatCohere2MoE:
		return jsonschema.Literal(cohereText) + " " + body + " " + jsonschema.Literal(cohereTextEnd) + "?"
	case FormatKimiK3:
		return jsonschema.Literal(kimi3Resp) + "? " + body + " ( " + jsonschema.Literal(kimi3RespEnd) + " " + kimi3Trailer + " )?"
	}
	return body
}

// kimi3Trailer is the GBNF of the optional tags that close a Kimi K3
// message, after its last section.
var kimi3Trailer = "( " + jsonschema.Literal(kimi3MsgEnd) + " " + jsonschema.Literal(kimi3EOM) + "? )?"
