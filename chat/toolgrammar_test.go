package chat

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A tiny GBNF matcher for tests: it parses the rule set and reports whether
// a text matches the root rule exactly.

type gnode struct {
	kind     byte // 'l' literal, 'c' class, 'r' rule ref, 's' sequence, 'a' alternatives
	lit      []rune
	ranges   [][2]rune
	negate   bool
	ref      string
	kids     []*gnode
	min, max int // repetition; max -1 for unbounded
}

type gparser struct {
	src []rune
	i   int
}

func (p *gparser) ws() {
	for p.i < len(p.src) && (p.src[p.i] == ' ' || p.src[p.i] == '\t') {
		p.i++
	}
}

func (p *gparser) escape() rune {
	c := p.src[p.i]
	p.i++
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'x', 'u', 'U':
		n := map[rune]int{'x': 2, 'u': 4, 'U': 8}[c]
		v, err := strconv.ParseUint(string(p.src[p.i:p.i+n]), 16, 32)
		if err != nil {
			panic(err)
		}
		p.i += n
		return rune(v)
	}
	return c
}

func (p *gparser) alts() *gnode {
	n := &gnode{kind: 'a', min: 1, max: 1}
	for {
		n.kids = append(n.kids, p.seq())
		p.ws()
		if p.i < len(p.src) && p.src[p.i] == '|' {
			p.i++
			continue
		}
		return n
	}
}

func (p *gparser) seq() *gnode {
	n := &gnode{kind: 's', min: 1, max: 1}
	for {
		p.ws()
		if p.i >= len(p.src) || p.src[p.i] == '|' || p.src[p.i] == ')' {
			return n
		}
		var item *gnode
		switch c := p.src[p.i]; {
		case c == '"':
			p.i++
			item = &gnode{kind: 'l'}
			for p.src[p.i] != '"' {
				if p.src[p.i] == '\\' {
					p.i++
					item.lit = append(item.lit, p.escape())
				} else {
					item.lit = append(item.lit, p.src[p.i])
					p.i++
				}
			}
			p.i++
		case c == '[':
			p.i++
			item = &gnode{kind: 'c'}
			if p.src[p.i] == '^' {
				item.negate = true
				p.i++
			}
			for p.src[p.i] != ']' {
				read := func() rune {
					if p.src[p.i] == '\\' {
						p.i++
						return p.escape()
					}
					p.i++
					return p.src[p.i-1]
				}
				lo := read()
				hi := lo
				if p.src[p.i] == '-' && p.src[p.i+1] != ']' {
					p.i++
					hi = read()
				}
				item.ranges = append(item.ranges, [2]rune{lo, hi})
			}
			p.i++
		case c == '(':
			p.i++
			item = p.alts()
			p.ws()
			p.i++ // ')'
		default:
			start := p.i
			for p.i < len(p.src) && (p.src[p.i] == '-' || p.src[p.i] == '_' || p.src[p.i] >= 'a' && p.src[p.i] <= 'z' || p.src[p.i] >= 'A' && p.src[p.i] <= 'Z' || p.src[p.i] >= '0' && p.src[p.i] <= '9') {
				p.i++
			}
			if start == p.i {
				panic(fmt.Sprintf("gbnf: unexpected %q at %d in %q", c, p.i, string(p.src)))
			}
			item = &gnode{kind: 'r', ref: string(p.src[start:p.i])}
		}
		item.min, item.max = 1, 1
		if p.i < len(p.src) {
			switch p.src[p.i] {
			case '*':
				item.min, item.max = 0, -1
				p.i++
			case '+':
				item.min, item.max = 1, -1
				p.i++
			case '?':
				item.min, item.max = 0, 1
				p.i++
			case '{':
				end := p.i
				for p.src[end] != '}' {
					end++
				}
				spec := string(p.src[p.i+1 : end])
				p.i = end + 1
				lo, hi, found := strings.Cut(spec, ",")
				item.min, _ = strconv.Atoi(lo)
				switch {
				case !found:
					item.max = item.min
				case hi == "":
					item.max = -1
				default:
					item.max, _ = strconv.Atoi(hi)
				}
			}
		}
		n.kids = append(n.kids, item)
	}
}

type gbnf map[string]*gnode

func parseGBNF(t *testing.T, text string) gbnf {
	t.Helper()
	g := gbnf{}
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, body, ok := strings.Cut(line, " ::= ")
		require.True(t, ok, "rule line %q", line)
		p := &gparser{src: []rune(body)}
		g[name] = p.alts()
		require.Equal(t, len(p.src), p.i, "rule %s not fully parsed", name)
	}
	for name, n := range g {
		var check func(n *gnode)
		check = func(n *gnode) {
			if n.kind == 'r' {
				_, ok := g[n.ref]
				require.True(t, ok, "rule %s refers to undefined %s", name, n.ref)
			}
			for _, k := range n.kids {
				check(k)
			}
		}
		check(n)
	}
	return g
}

// ends returns every position where n can end when started at pos.
func (g gbnf) ends(n *gnode, s []rune, pos int) map[int]bool {
	cur := map[int]bool{pos: true}
	out := map[int]bool{}
	if n.min == 0 {
		out[pos] = true
	}
	for count := 1; len(cur) > 0 && (n.max < 0 || count <= n.max); count++ {
		next := map[int]bool{}
		for p := range cur {
			for e := range g.once(n, s, p) {
				if n.max < 0 && e == p {
					continue
				}
				next[e] = true
			}
		}
		if count >= n.min {
			for e := range next {
				out[e] = true
			}
		}
		if n.max < 0 {
			// Drop positions already explored to reach a fixpoint.
			for e := range next {
				if out[e] && count > n.min+len(s) {
					delete(next, e)
				}
			}
		}
		cur = next
		if count > len(s)+n.min+1 {
			break
		}
	}
	return out
}

func (g gbnf) once(n *gnode, s []rune, pos int) map[int]bool {
	res := map[int]bool{}
	switch n.kind {
	case 'l':
		if pos+len(n.lit) <= len(s) && string(s[pos:pos+len(n.lit)]) == string(n.lit) {
			res[pos+len(n.lit)] = true
		}
	case 'c':
		if pos < len(s) {
			in := false
			for _, r := range n.ranges {
				if s[pos] >= r[0] && s[pos] <= r[1] {
					in = true
				}
			}
			if in != n.negate {
				res[pos+1] = true
			}
		}
	case 'r':
		return g.ends(g[n.ref], s, pos)
	case 's':
		cur := map[int]bool{pos: true}
		for _, k := range n.kids {
			next := map[int]bool{}
			for p := range cur {
				for e := range g.ends(k, s, p) {
					next[e] = true
				}
			}
			cur = next
		}
		return cur
	case 'a':
		for _, k := range n.kids {
			for e := range g.ends(k, s, pos) {
				res[e] = true
			}
		}
	}
	return res
}

func (g gbnf) matches(text string) bool {
	s := []rune(text)
	return g.ends(&gnode{kind: 'r', ref: "root", min: 1, max: 1}, s, 0)[len(s)]
}

func TestGBNFMatcher(t *testing.T) {
	g := parseGBNF(t, "root ::= \"a\" [0-9]{2,3} ( \"x\" | \"y\" )* b\nb ::= [^a]?\n")
	assert.True(t, g.matches("a12"))
	assert.True(t, g.matches("a123xyxz"))
	assert.False(t, g.matches("a1"))
	assert.False(t, g.matches("a12a"))
	assert.False(t, g.matches("a12345"))
}

var grammarTools = []Tool{
	{Name: "special_function", Parameters: []byte(`{"type":"object","properties":{"arg1":{"type":"integer"}},"required":["arg1"]}`)},
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
}

func TestBuildToolGrammar(t *testing.T) {
	cases := []struct {
		format   Format
		call     string // one valid call of special_function
		second   string // a valid second call (parallel)
		bad      string // output the grammar must refuse
		trigger  string // expected trigger value (any kind)
		hasLazy  bool
		required bool
	}{
		{format: FormatHermes2Pro, call: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>", second: "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", bad: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": \"x\"}}\n</tool_call>", trigger: "<tool_call>", hasLazy: true},
		{format: FormatQwen3Coder, call: "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", second: "\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>", bad: "<tool_call>\n<function=other>\n</function>\n</tool_call>", trigger: "<tool_call>", hasLazy: true},
		{format: FormatLlama3x, call: `{"name": "special_function", "parameters": {"arg1": 1}}`, second: `; {"name": "get_weather", "parameters": {"city": "Paris"}}`, bad: `{"name": "nope", "parameters": {}}`, trigger: `\s*\{\s*"name"[\s\S]*`, hasLazy: true},
		{format: FormatMistralNemo, call: `[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "abcdef123"}]`, bad: `[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}}]`, trigger: "[TOOL_CALLS]", hasLazy: true},
		{format: FormatMagistral, call: `[TOOL_CALLS]special_function[ARGS]{"arg1": 1}`, second: `[TOOL_CALLS]get_weather[CALL_ID]123456789[ARGS]{"city":"Paris"}`, bad: `[TOOL_CALLS]special_function{"arg1": 1}`, trigger: "[TOOL_CALLS]", hasLazy: true},
		{format: FormatFunctionaryV31, call: `<function=special_function>{"arg1": 1}</function>`, second: `<function=get_weather>{"city": "Paris"}</function>`, bad: `<function=special_function>{"arg1": 1}`, trigger: "<function=", hasLazy: true},
		{format: FormatFunctionaryV32, call: "special_function\n{\"arg1\": 1}", second: ">>>get_weather\n{\"city\": \"Paris\"}", bad: "all\nhello", trigger: ">>>special_function\n", hasLazy: true},
		{format: FormatDeepSeekR1, call: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", bad: "<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>", trigger: dsCallsBegin, hasLazy: true},
		{format: FormatDeepSeekV31, call: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>special_function<｜tool▁sep｜>{\"arg1\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", bad: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>special_function<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", trigger: dsCallsBegin, hasLazy: true},
		{format: FormatCommandR7B, call: "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n]<|END_ACTION|>", bad: "<|START_ACTION|>[]<|END_ACTION|>", trigger: "<|START_ACTION|>", hasLazy: true},
		{format: FormatCohere2MoE, call: "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n]<|END_ACTION|>", bad: "<|START_TEXT|>[]<|END_TEXT|>", trigger: "<|START_ACTION|>", hasLazy: true},
		{format: FormatMiniCPM5, call: `<function name="special_function"><param name="arg1">1</param></function>`, second: "\n<function name=\"get_weather\"><param name=\"city\">Paris</param></function>", bad: `<function name="other"></function>`, trigger: "<function", hasLazy: true},
		{format: FormatSolarOpen, call: "<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": 1}<|tool_call:end|><|calls|>", bad: "<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": 1}<|tool_call:end|><|calls|>", trigger: "<|tool_calls|>", hasLazy: true},
		{format: FormatHunyuan3, call: "<tool_calls:opensource>\n<tool_call:opensource>special_function<tool_sep:opensource>\n<arg_key:opensource>arg1</arg_key:opensource>\n<arg_value:opensource>1</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>", bad: "<tool_calls:opensource>\n<tool_call:opensource>other<tool_sep:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>", trigger: "<tool_calls:opensource>\n", hasLazy: true},
		{format: FormatGemma, call: `<|tool_call>call:special_function{arg1:42}<tool_call|>`, second: `<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>`, bad: `<|tool_call>call:other{}<tool_call|>`, trigger: "<|tool_call>", hasLazy: true},
		{format: FormatGPTOSS, call: `<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{"arg1": 1}`, bad: `<|channel|>commentary to=functions.special_function<|message|>{"arg1": true}`, trigger: "<|channel|>commentary to=functions.", hasLazy: true},
		{format: FormatKimiK2, call: "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>", bad: "<|tool_calls_section_begin|><|tool_calls_section_end|>", trigger: "<|tool_calls_section_begin|>", hasLazy: true},
		{format: FormatKimiK3, call: "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"special_function\" index=\"1\"<|sep|><|open|>argument key=\"arg1\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
			bad: "<|open|>tools<|sep|><|close|>tools<|sep|>", trigger: "<|open|>tools<|sep|>", hasLazy: true},
		{format: FormatGLM45, call: "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", second: "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>", bad: "<tool_call>nope\n</tool_call>", trigger: "<tool_call>", hasLazy: true},
		{format: FormatFireFunctionV2, call: ` functools[{"name": "special_function", "arguments": {"arg1": 1}}]`, bad: ` functools[]`, trigger: "functools", hasLazy: true},
		{format: FormatNemotronV2, call: `<TOOLCALL>[{"name": "special_function", "arguments": {"arg1": 1}}]</TOOLCALL>`, bad: `<TOOLCALL>[]</TOOLCALL>`, trigger: "<TOOLCALL>", hasLazy: true},
		{format: FormatApriel, call: `<tool_calls>[{"name": "special_function", "arguments": {"arg1": 1}}]</tool_calls>`, bad: `<tool_calls>[]</tool_calls>`, trigger: "<tool_calls>", hasLazy: true},
		{format: FormatGranite, call: `<|tool_call|>[{"name": "special_function", "arguments": {"arg1": 1}}]`, bad: `<|tool_call|>[]`, trigger: "<|tool_call|>", hasLazy: true},
		{format: FormatSeedOSS, call: "<seed:tool_call>\n<function=special_function>\n<parameter=arg1>1</parameter>\n</function>\n</seed:tool_call>", second: "\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>", bad: "<seed:tool_call>\n<function=other>\n</function>\n</seed:tool_call>", trigger: "<seed:tool_call>", hasLazy: true},
		{format: FormatMiniMaxM2, call: "<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n</minimax:tool_call>", bad: "<minimax:tool_call>\n</minimax:tool_call>", trigger: "<minimax:tool_call>", hasLazy: true},
		{format: FormatDeepSeekV32, call: "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"special_function\">\n<｜DSML｜parameter name=\"arg1\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>", bad: "<｜DSML｜function_calls>\n</｜DSML｜function_calls>", trigger: "<｜DSML｜function_calls>", hasLazy: true},
		{format: FormatLFM2, call: "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", bad: "<|tool_call_start|>[other(arg1=1)]<|tool_call_end|>", trigger: "<|tool_call_start|>", hasLazy: true},
		{format: FormatApertus, call: "<|tools_prefix|>[{\"special_function\": {\"arg1\": 1}}]<|tools_suffix|>", bad: "<|tools_prefix|>[{\"special_function\": {\"arg1\": \"x\"}}]<|tools_suffix|>", trigger: "<|tools_prefix|>", hasLazy: true},
		{format: FormatCommandRPlus, call: "Action:\n```json\n[{\"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}]\n```", bad: "Action:\n```json\n[{\"tool_name\": \"special_function\", \"parameters\": {}}]\n```", trigger: "Action:", hasLazy: true},
		{format: FormatGeneric, call: `{"tool_call": {"name": "special_function", "arguments": {"arg1": 1}}}`, bad: `{"tool_call": {"name": "special_function"}}`},
	}
	for _, c := range cases {
		t.Run(c.format.String(), func(t *testing.T) {
			tg, err := BuildToolGrammar(c.format, grammarTools, ToolChoice{Mode: "auto"}, false)
			require.NoError(t, err)
			require.NotNil(t, tg)
			assert.Equal(t, c.hasLazy, tg.Lazy)
			g := parseGBNF(t, tg.Grammar)
			assert.True(t, g.matches(c.call), "call should match grammar:\n%s", tg.Grammar)
			assert.False(t, g.matches(c.bad), "bad output should not match")
			if c.trigger != "" {
				var values []string
				for _, tr := range tg.Triggers {
					values = append(values, tr.Value)
				}
				assert.Contains(t, values, c.trigger)
			}
			// The valid call also parses back to the call.
			msg, err := Parse(c.call, ParseOptions{Format: c.format, ParseToolCalls: true})
			require.NoError(t, err)
			require.Len(t, msg.ToolCalls, 1)
			assert.Equal(t, "special_function", msg.ToolCalls[0].Name)

			req, err := BuildToolGrammar(c.format, grammarTools, ToolChoice{Mode: "required"}, true)
			require.NoError(t, err)
			assert.False(t, req.Lazy)
			assert.Empty(t, req.Triggers)
			gp := parseGBNF(t, req.Grammar)
			assert.True(t, gp.matches(c.call))
			if c.second != "" {
				assert.True(t, gp.matches(c.call+c.second), "parallel calls should match:\n%s", req.Grammar)
				assert.False(t, g.matches(c.call+c.second), "a second call needs parallel")
			}
		})
	}
}

// Formats whose calls sit in one block: parallel calls go inside it.
func TestBuildToolGrammarParallelBlocks(t *testing.T) {
	cases := []struct {
		format Format
		two    string // two calls: special_function then get_weather
	}{
		{FormatDeepSeekV32, "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"special_function\">\n<｜DSML｜parameter name=\"arg1\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
		{FormatDeepSeekV32, "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"special_function\">\n<｜DSML｜parameter name=\"arg1\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"},
		{FormatLFM2, "<|tool_call_start|>[special_function(arg1=1), get_weather(city='Paris')]<|tool_call_end|>"},
		{FormatApertus, "<|tools_prefix|>[{\"special_function\": {\"arg1\": 1}}, {\"get_weather\": {\"city\": \"Paris\"}}]<|tools_suffix|>"},
		{FormatCommandRPlus, "Action:\n```json\n[{\"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}, {\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]\n```"},
		{FormatKimiK3, "<|open|>tools<|sep|><|open|>call tool=\"special_function\" index=\"1\"<|sep|><|open|>argument key=\"arg1\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|>" +
			"<|open|>call tool=\"get_weather\" index=\"2\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"},
		{FormatSolarOpen, "<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>special_function<|tool_call:args|>{\"arg1\": 1}<|tool_call:end|><|tool_call:begin|>f6g7h8i9j0<|tool_call:name|>get_weather<|tool_call:args|>{\"city\": \"Paris\"}<|tool_call:end|>"},
		{FormatHunyuan3, "<tool_calls:opensource>\n<tool_call:opensource>special_function<tool_sep:opensource>\n<arg_key:opensource>arg1</arg_key:opensource>\n<arg_value:opensource>1</arg_value:opensource>\n</tool_call:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Paris</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>"},
		{FormatKimiK2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>"},
	}
	for _, c := range cases {
		t.Run(c.format.String(), func(t *testing.T) {
			one, err := BuildToolGrammar(c.format, grammarTools, ToolChoice{Mode: "required"}, false)
			require.NoError(t, err)
			many, err := BuildToolGrammar(c.format, grammarTools, ToolChoice{Mode: "required"}, true)
			require.NoError(t, err)
			assert.True(t, parseGBNF(t, many.Grammar).matches(c.two), "parallel calls should match:\n%s", many.Grammar)
			assert.False(t, parseGBNF(t, one.Grammar).matches(c.two), "a second call needs parallel")
			msg, err := Parse(c.two, ParseOptions{Format: c.format, ParseToolCalls: true})
			require.NoError(t, err)
			require.Len(t, msg.ToolCalls, 2)
			assert.Equal(t, "special_function", msg.ToolCalls[0].Name)
			assert.Equal(t, "get_weather", msg.ToolCalls[1].Name)
			assert.JSONEq(t, `{"city": "Paris"}`, msg.ToolCalls[1].Arguments)
		})
	}
}

func TestBuildToolGrammarChoice(t *testing.T) {
	tg, err := BuildToolGrammar(FormatHermes2Pro, grammarTools, ToolChoice{Mode: "none"}, false)
	assert.NoError(t, err)
	assert.Nil(t, tg)

	tg, err = BuildToolGrammar(FormatHermes2Pro, grammarTools, ToolChoice{Mode: "function", Function: "get_weather"}, false)
	require.NoError(t, err)
	assert.False(t, tg.Lazy)
	g := parseGBNF(t, tg.Grammar)
	assert.True(t, g.matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"))
	assert.False(t, g.matches("<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>"))

	_, err = BuildToolGrammar(FormatHermes2Pro, grammarTools, ToolChoice{Mode: "function", Function: "missing"}, false)
	assert.ErrorContains(t, err, "chat: ")
	_, err = BuildToolGrammar(FormatHermes2Pro, nil, ToolChoice{Mode: "auto"}, false)
	assert.ErrorContains(t, err, "chat: ")
	_, err = BuildToolGrammar(FormatHermes2Pro, grammarTools, ToolChoice{Mode: "sometimes"}, false)
	assert.ErrorContains(t, err, "chat: ")
	_, err = BuildToolGrammar(FormatHermes2Pro, []Tool{{Name: "f", Parameters: []byte(`{"type": 7}`)}}, ToolChoice{Mode: "auto"}, false)
	assert.ErrorContains(t, err, "chat: ")

	// Allowed tools: only their calls match, under auto (lazy) and
	// required alike; a name not among the tools is refused.
	for _, mode := range []string{"auto", "required"} {
		tg, err = BuildToolGrammar(FormatHermes2Pro, grammarTools, ToolChoice{Mode: mode, Allowed: []string{"get_weather"}}, false)
		require.NoError(t, err, mode)
		assert.Equal(t, mode == "auto", tg.Lazy, mode)
		g = parseGBNF(t, tg.Grammar)
		assert.True(t, g.matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"), mode)
		assert.False(t, g.matches("<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>"), mode)
		_, err = BuildToolGrammar(FormatHermes2Pro, grammarTools, ToolChoice{Mode: mode, Allowed: []string{"get_weather", "missing"}}, false)
		assert.EqualError(t, err, `chat: allowed tool "missing" is not among the tools`)
	}

	// Generic with auto also allows a plain response.
	tg, err = BuildToolGrammar(FormatGeneric, grammarTools, ToolChoice{Mode: "auto"}, false)
	require.NoError(t, err)
	g = parseGBNF(t, tg.Grammar)
	assert.True(t, g.matches(`{"response": "Hello, world!"}`))
	_ = utf8.RuneLen
}

// TestCallableManyTools: a choice among many tools and many allowed names
// picks the right ones, in the tools' order (through sets: scans of 20,000
// tools for 10,000 names are 4e8 comparisons).
func TestCallableManyTools(t *testing.T) {
	const n = 20000
	tools := make([]Tool, n)
	names := make([]string, n/2)
	for i := range tools {
		tools[i] = Tool{Name: fmt.Sprintf("f%d", i)}
	}
	for i := range names {
		names[i] = fmt.Sprintf("f%d", 2*i)
	}
	got, err := callable(ToolChoice{Mode: "required", Allowed: names}, tools)
	require.NoError(t, err)
	require.Len(t, got, n/2)
	assert.Equal(t, "f0", got[0].Name)
	assert.Equal(t, "f2", got[1].Name)
	_, err = callable(ToolChoice{Mode: "function", Function: "g"}, tools)
	assert.EqualError(t, err, `chat: tool choice names unknown function "g"`)
}

// clashingSchema is an object schema whose properties, deep enough that
// their rules are named after them alone, are named as the formats' own
// rules (xml-text, lfm-val, gemma-obj, glm-text...), each a short string.
func clashingSchema() []byte {
	props := map[string]any{}
	for _, name := range []string{"xml-text", "lfm-str", "lfm-num", "lfm-list", "lfm-dict", "lfm-val", "lfm-kwarg",
		"gemma-str", "gemma-key", "gemma-val", "gemma-obj", "gemma-arr", "glm-text"} {
		props[name] = map[string]any{"type": "string", "maxLength": 3}
	}
	b, err := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
		strings.Repeat("a", 60): map[string]any{"type": "object", "properties": props}}})
	if err != nil {
		panic(err)
	}
	return b
}

// A tool's parameters or a response format with properties named as a
// format's own rules leave that format's calls as they are: the schema's
// rules take other names.
func TestBuildToolGrammarRuleNameClash(t *testing.T) {
	tools := []Tool{{Name: "clash", Parameters: clashingSchema()}, grammarTools[1]}
	cases := []struct {
		format Format
		call   string // of get_weather, its city longer than the clashing strings allow
	}{
		{FormatQwen3Coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo city\n</parameter>\n</function>\n</tool_call>"},
		{FormatSeedOSS, "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo city</parameter>\n</function>\n</seed:tool_call>"},
		{FormatMiniMaxM2, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo city</parameter>\n</invoke>\n</minimax:tool_call>"},
		{FormatDeepSeekV32, "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo city</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
		{FormatLFM2, "<|tool_call_start|>[get_weather(city='Oslo city', days=[1, {'a': None}])]<|tool_call_end|>"},
		{FormatGemma, `<|tool_call>call:get_weather{city:<|"|>Oslo city<|"|>,days:[1,{a:null}]}<tool_call|>`},
		{FormatGLM45, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo city</arg_value>\n</tool_call>"},
	}
	for _, c := range cases {
		t.Run(c.format.String(), func(t *testing.T) {
			tg, err := BuildToolGrammar(c.format, tools, ToolChoice{Mode: "required"}, false)
			require.NoError(t, err)
			assert.True(t, grammarAccepts(t, tg.Grammar, c.call), "the tool's rules replaced the format's:\n%s", tg.Grammar)
			tg, err = buildToolGrammar(c.format, grammarTools, ToolChoice{Mode: "auto"}, false, clashingSchema(), true)
			require.NoError(t, err)
			assert.True(t, grammarAccepts(t, tg.Grammar, c.call), "the response format's rules replaced the format's:\n%s", tg.Grammar)
			assert.True(t, grammarAccepts(t, tg.Grammar, `{"`+strings.Repeat("a", 60)+`": {"glm-text": "abc"}}`))
		})
	}
}

// In the formats that write parameters one by one, a call names only its
// tool's parameters, as llama.cpp's grammars have it (MiniCPM5's system
// prompt shows <param name="param-name">, which a small model copies);
// a tool whose schema names no properties takes any name.
func TestToolGrammarParamNames(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)},
		{Name: "free", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	dsmlCall := func(name, param string) string {
		return "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"" + name + "\">\n<｜DSML｜parameter name=\"" + param + "\" string=\"true\">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
	}
	tests := []struct {
		format Format
		call   func(name, param string) string
	}{
		{FormatQwen3Coder, func(name, param string) string {
			return "<tool_call>\n<function=" + name + ">\n<parameter=" + param + ">\nOslo\n</parameter>\n</function>\n</tool_call>"
		}},
		{FormatSeedOSS, func(name, param string) string {
			return "<seed:tool_call>\n<function=" + name + ">\n<parameter=" + param + ">Oslo</parameter>\n</function>\n</seed:tool_call>"
		}},
		{FormatMiniMaxM2, func(name, param string) string {
			return "<minimax:tool_call>\n<invoke name=\"" + name + "\">\n<parameter name=\"" + param + "\">Oslo</parameter>\n</invoke>\n</minimax:tool_call>"
		}},
		{FormatDeepSeekV32, dsmlCall},
		{FormatGLM45, func(name, param string) string {
			return "<tool_call>" + name + "\n<arg_key>" + param + "</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"
		}},
		{FormatHunyuan3, func(name, param string) string {
			return "<tool_calls:opensource>\n<tool_call:opensource>" + name + "<tool_sep:opensource>\n<arg_key:opensource>" + param + "</arg_key:opensource>\n<arg_value:opensource>Oslo</arg_value:opensource>\n</tool_call:opensource>\n</tool_calls:opensource>"
		}},
		{FormatMiniCPM5, func(name, param string) string {
			return `<function name="` + name + `"><param name="` + param + `">Oslo</param></function>`
		}},
		{FormatKimiK3, func(name, param string) string {
			return `<|open|>tools<|sep|><|open|>call tool="` + name + `" index="1"<|sep|><|open|>argument key="` + param + `" type="string"<|sep|>Oslo<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`
		}},
	}
	for _, tc := range tests {
		t.Run(tc.format.String(), func(t *testing.T) {
			tg, err := BuildToolGrammar(tc.format, tools, ToolChoice{Mode: "required"}, false)
			require.NoError(t, err)
			assertGrammar(t, tg.Grammar,
				[]string{tc.call("get_weather", "city"), tc.call("free", "anything")},
				[]string{tc.call("get_weather", "town"), tc.call("get_weather", "param-name")})
		})
	}
}

// Hunyuan 3's calls name each parameter at most once, and a value is any
// text up to its end tag (markup included) that holds no key tag: a small
// model otherwise writes the parameter again and again.
func TestToolGrammarHunyuan3Values(t *testing.T) {
	tg, err := BuildToolGrammar(FormatHunyuan3, grammarTools, ToolChoice{Mode: "required"}, false)
	require.NoError(t, err)
	weather := func(params ...string) string {
		out := "<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n"
		for _, v := range params {
			out += "<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>" + v + "</arg_value:opensource>\n"
		}
		return out + "</tool_call:opensource>\n</tool_calls:opensource>"
	}
	assertGrammar(t, tg.Grammar,
		[]string{weather("Oslo"), weather("<b>Oslo</b>\nnorth"), weather()},
		[]string{weather("Oslo", "Paris"), weather("\n<arg_key:opensource>type")})
}
