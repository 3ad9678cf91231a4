package chat

import (
	"encoding/json"
	"slices"
	"strings"
)

// formatSpec describes how one format is read.
type formatSpec struct {
	// thinkStart and thinkEnd delimit a thinking block at the start.
	thinkStart, thinkEnd string
	// thinkStops also end the thinking block but stay in the output: tool
	// calls that a model starts without closing its thinking.
	thinkStops []string
	// start, when set, reads format-specific markup at the start of the
	// body (after thinking) and returns where the body continues.
	start func(p *pstate, i int) int
	// markers start tool-call markup anywhere in the content; call reads it.
	markers []string
	call    callFunc
	// alwaysMarkers are handled by call even when tool calls are not parsed
	// (wrappers that are never content).
	alwaysMarkers []string
	// custom replaces the whole reading for structured formats.
	custom func(p *pstate)
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

func specFor(f Format) formatSpec {
	switch f {
	case FormatGeneric:
		return formatSpec{custom: parseGeneric}
	case FormatHermes2Pro:
		return thinkSpec(callHermes, "<tool_call>")
	case FormatQwen3Coder:
		return thinkSpec(callQwen3Coder, "<tool_call>", "<function=")
	case FormatLlama3x:
		return formatSpec{start: startLlama3x,
			markers: []string{"<|python_tag|>"}, call: callPythonTag}
	case FormatMistralNemo:
		return formatSpec{markers: []string{"[TOOL_CALLS]"}, call: callArrayAfterMarker("")}
	case FormatMagistral:
		return formatSpec{thinkStart: "[THINK]", thinkEnd: "[/THINK]",
			markers: []string{"[TOOL_CALLS]"}, call: callMagistral}
	case FormatFunctionaryV31:
		return formatSpec{markers: []string{"<function=", "<|python_tag|>"}, call: callFunctionaryV31}
	case FormatFunctionaryV32:
		return formatSpec{custom: parseFunctionaryV32}
	case FormatDeepSeekR1:
		return thinkSpec(callDeepSeek(true), dsCallsBegin, dsCallBegin)
	case FormatDeepSeekV31:
		return thinkSpec(callDeepSeek(false), dsCallsBegin, dsCallBegin)
	case FormatCommandR7B:
		wrappers := []string{"<|START_RESPONSE|>", "<|END_RESPONSE|>"}
		return formatSpec{thinkStart: "<|START_THINKING|>", thinkEnd: "<|END_THINKING|>",
			markers:       append([]string{"<|START_ACTION|>"}, wrappers...),
			alwaysMarkers: wrappers,
			call:          callCommandR7B}
	case FormatCohere2MoE:
		// The block ends at its end marker, or where the answer or calls
		// start without it.
		wrappers := []string{cohereText, cohereTextEnd}
		return formatSpec{thinkStart: "<|START_THINKING|>", thinkEnd: "<|END_THINKING|>",
			thinkStops:    []string{cohereText, "<|START_ACTION|>"},
			markers:       append([]string{"<|START_ACTION|>"}, wrappers...),
			alwaysMarkers: wrappers,
			call:          callCommandR7B}
	case FormatGemma:
		return formatSpec{thinkStart: "<|channel>thought", thinkEnd: "<channel|>",
			markers: []string{"<|tool_call>"}, call: callGemma}
	case FormatGPTOSS:
		return formatSpec{custom: parseHarmony}
	case FormatKimiK2:
		sp := thinkSpec(callKimiK2, kimiSectionBegin, kimiCallBegin)
		sp.thinkStops = sp.markers
		return sp
	case FormatGLM45:
		return thinkSpec(callGLM45, "<tool_call>")
	case FormatFireFunctionV2:
		return formatSpec{markers: []string{"functools"}, call: callArrayAfterMarker("")}
	case FormatNemotronV2:
		return thinkSpec(callArrayAfterMarker("</TOOLCALL>"), "<TOOLCALL>")
	case FormatApriel:
		return thinkSpec(callArrayAfterMarker("</tool_calls>"), "<tool_calls>")
	case FormatGranite:
		return thinkSpec(callArrayAfterMarker(""), "<|tool_call|>")
	case FormatSeedOSS:
		return formatSpec{thinkStart: "<seed:think>", thinkEnd: "</seed:think>",
			markers: []string{"<seed:tool_call>"}, call: callSeedOSS}
	case FormatMiniMaxM2:
		return thinkSpec(callMiniMaxM2, "<minimax:tool_call>")
	case FormatDeepSeekV32:
		sp := thinkSpec(callDSML, dsmlMarkers...)
		sp.thinkStops = dsmlBlocks
		return sp
	case FormatLFM2:
		return thinkSpec(callLFM2, lfmCallStart)
	case FormatMiniCPM5:
		return thinkSpec(callMiniCPM5, cpmFunction)
	case FormatKimiK3:
		// The think section ends at its closing tag, or where the response
		// opens without it; the wrappers are dropped, the think
		// section's with them.
		return formatSpec{thinkStart: kimi3Think, thinkEnd: kimi3ThinkEnd, thinkStops: []string{kimi3Resp},
			markers:       append([]string{kimi3Tools}, kimi3Wrappers...),
			alwaysMarkers: kimi3Wrappers,
			call:          callKimiK3}
	case FormatSolarOpen:
		// The block ends at <|end|>, or where the answer or calls start
		// without it; the turn markup around the answer is dropped.
		return formatSpec{thinkStart: solarThink, thinkEnd: solarEnd,
			thinkStops:    []string{solarCalls, solarContent},
			markers:       append([]string{solarCalls}, solarWrappers...),
			alwaysMarkers: solarWrappers,
			call:          callSolarOpen}
	case FormatHunyuan3:
		return formatSpec{thinkStart: hyThink, thinkEnd: hyThinkEnd, thinkStops: []string{hyCalls},
			markers: []string{hyCalls}, call: callHunyuan3}
	case FormatApertus:
		return formatSpec{thinkStart: apertusInner, thinkEnd: apertusInnerEnd, thinkStops: []string{apertusTools},
			markers: []string{apertusTools}, call: callApertus}
	case FormatCommandRPlus:
		wrappers := []string{"<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}
		return formatSpec{markers: append([]string{commandRAction}, wrappers...), alwaysMarkers: wrappers,
			call: callCommandRPlus}
	}
	return formatSpec{thinkStart: thinkOpen, thinkEnd: thinkClose}
}

// dropsThinkMarkers reports whether format f's parser drops the markers
// of its thinking block wherever they are, so that with reasoning format
// none the block's text is content without them (Kimi K3's tags).
func dropsThinkMarkers(f Format) bool {
	sp := specFor(f)
	return sp.thinkStart != "" && slices.Contains(sp.alwaysMarkers, sp.thinkStart)
}

// thinkSpec is a format with a <think> block whose tool calls start with
// one of the markers.
func thinkSpec(call callFunc, markers ...string) formatSpec {
	return formatSpec{thinkStart: thinkOpen, thinkEnd: thinkClose, markers: markers, call: call}
}

// closeWith consumes an optional closing literal after a call. Output that
// ends inside the literal (a token limit cut it) ends with the call: the
// start of the markup is not text.
func (p *pstate) closeWith(i int, closing string) int {
	if closing == "" {
		return i
	}
	if j, ok := p.lit(i, closing, true); ok {
		return j
	}
	if k := skipSpace(p.s, i); !p.partial && k < len(p.s) && strings.HasPrefix(closing, p.s[k:]) {
		return len(p.s)
	}
	return i
}

// callArrayAfterMarker reads a JSON array of calls after the marker, then an
// optional closing literal.
func callArrayAfterMarker(closing string) callFunc {
	return func(p *pstate, i int, marker string) (int, bool) {
		end, ok := p.callArray(i+len(marker), defaultCallKeys)
		if !ok || p.stopped {
			return end, ok
		}
		return p.closeWith(end, closing), true
	}
}

// callHermes reads <tool_call>{"name":...,"arguments":...}</tool_call>.
func callHermes(p *pstate, i int, marker string) (int, bool) {
	k := skipSpace(p.s, i+len(marker))
	tc, end, st := p.callObject(k, defaultCallKeys)
	switch st {
	case scanEOF:
		return p.eof(&tc, false)
	case scanInvalid:
		return p.invalid(&tc, false)
	}
	if tc.Name == "" {
		return p.invalid(nil, false)
	}
	p.calls = append(p.calls, tc)
	return p.closeWith(end, "</tool_call>"), true
}

// callMagistral reads [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}.
func callMagistral(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	j := i + len(marker)
	// A JSON array right after the marker is the older Nemo form.
	if k := skipSpace(s, j); k < len(s) && s[k] == '[' {
		return p.callArray(k, defaultCallKeys)
	}
	a := strings.Index(s[j:], "[ARGS]")
	c := strings.Index(s[j:], "[CALL_ID]")
	var tc ToolCall
	switch {
	case c >= 0 && (a < 0 || c < a):
		tc.Name = strings.TrimSpace(s[j : j+c])
		idStart := j + c + len("[CALL_ID]")
		a2 := strings.Index(s[idStart:], "[ARGS]")
		if a2 < 0 {
			return p.eofNoName()
		}
		tc.ID = strings.TrimSpace(s[idStart : idStart+a2])
		j = idStart + a2 + len("[ARGS]")
	case a >= 0:
		tc.Name = strings.TrimSpace(s[j : j+a])
		j += a + len("[ARGS]")
	default:
		return p.eofNoName()
	}
	end, ok, _ := p.jsonCall(&tc, j, false)
	return end, ok
}

// jsonCall checks tc's name, reads its JSON arguments at j and records the
// call. When the name is wrong or the arguments end or go wrong first,
// recorded is false and end and ok are the call function's answer.
func (p *pstate) jsonCall(tc *ToolCall, j int, committed bool) (end int, ok, recorded bool) {
	if !validName(tc.Name) {
		end, ok = p.invalid(nil, committed)
		return end, ok, false
	}
	end, st := p.argsJSON(tc, j)
	switch st {
	case scanEOF:
		end, ok = p.eof(tc, committed)
		return end, ok, false
	case scanInvalid:
		end, ok = p.invalid(tc, committed)
		return end, ok, false
	}
	p.calls = append(p.calls, *tc)
	return end, true, true
}

// callSeq reads one or more calls from j, each starting with the literal
// begin, then the optional literal closing. one reads a call from after
// begin; committed tells whether an earlier call was recorded. It returns
// more=true when it recorded the call, with end where the call ends;
// otherwise end and ok are the call function's answer. Output that ends
// inside a begin after a call ends with the calls.
func (p *pstate) callSeq(j int, begin, closing string, one func(k int, committed bool) (end int, ok, more bool)) (int, bool) {
	committed := false
	for {
		k, ok := p.lit(j, begin, true)
		if p.stopped {
			return p.eof(nil, committed)
		}
		if !ok {
			if !committed {
				return p.invalid(nil, false)
			}
			if r := p.s[skipSpace(p.s, j):]; r != "" && strings.HasPrefix(begin, r) {
				// The output ends inside the next call's begin (a token
				// limit cut it): markup, not text.
				return len(p.s), true
			}
			return p.closeWith(j, closing), true
		}
		end, ok, more := one(k, committed)
		if !more {
			return end, ok
		}
		committed = true
		j = end
	}
}

// callList reads a non-empty bracketed list [item, item, ...] at s[i]
// (after optional spaces), then the optional literal closing. item reads one element at
// s[k] (after the space and comma before it); committed tells whether an
// earlier element was recorded. It returns more=true when it recorded the
// element, with end where the element ends; otherwise end and ok are the
// call function's answer.
func (p *pstate) callList(i int, closing string, item func(k int, committed bool) (end int, ok, more bool)) (int, bool) {
	s := p.s
	j, ok := p.lit(i, "[", true)
	if p.stopped {
		return p.eof(nil, false)
	}
	if !ok {
		return p.invalid(nil, false)
	}
	committed := false
	for n := 0; ; n++ {
		k := skipSpace(s, j)
		if k >= len(s) {
			return p.eof(nil, committed)
		}
		if s[k] == ']' {
			if n == 0 {
				return p.invalid(nil, false)
			}
			return p.closeWith(k+1, closing), true
		}
		if n > 0 {
			if s[k] != ',' {
				return p.invalid(nil, committed)
			}
			k = skipSpace(s, k+1)
		}
		end, ok, more := item(k, committed)
		if !more {
			return end, ok
		}
		committed = true
		j = end
	}
}

// done is the answer of a callSeq or callList step that ends the calls:
// end and ok are the call function's answer.
func done(end int, ok bool) (int, bool, bool) { return end, ok, false }

// eofNoName handles a call whose name is not complete at the end of the
// input: held back in partial mode, text otherwise.
func (p *pstate) eofNoName() (int, bool) { return p.eof(nil, false) }

// validName reports whether s looks like a function name.
func validName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r == '.' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127) {
			return false
		}
	}
	return true
}

// callFunctionaryV31 reads <function=name>{...}</function> and
// <|python_tag|> code.
func callFunctionaryV31(p *pstate, i int, marker string) (int, bool) {
	if marker == "<|python_tag|>" {
		return callPythonTag(p, i, marker)
	}
	s := p.s
	j := i + len(marker)
	k := strings.IndexByte(s[j:], '>')
	if k < 0 {
		return p.eofNoName()
	}
	tc := ToolCall{Name: strings.TrimSpace(s[j : j+k])}
	end, ok, recorded := p.jsonCall(&tc, j+k+1, false)
	if !recorded {
		return end, ok
	}
	return p.closeWith(end, "</function>"), true
}

// codeCall makes a python call whose argument is the raw code text; in
// partial mode it stays open.
func (p *pstate) codeCall(name, code string) {
	tc := ToolCall{Name: name}
	if p.partial {
		enc := jsonString(completeRunes(code))
		tc.Arguments = `{"code": ` + enc[:len(enc)-1]
		p.calls = append(p.calls, tc)
		p.stopped = true
		return
	}
	tc.Arguments = `{"code": ` + jsonString(code) + `}`
	p.calls = append(p.calls, tc)
}

// callPythonTag reads <|python_tag|>name.call(k=v, ...) (Llama built-in
// tools) or <|python_tag|>code (run as python).
func callPythonTag(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	j := i + len(marker)
	k := j
	for k < len(s) && (s[k] == '_' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= '0' && s[k] <= '9' && k > j) {
		k++
	}
	const callOpen = ".call("
	if k == len(s) && p.partial {
		return p.eofNoName()
	}
	if k > j {
		rest := s[k:]
		if p.partial && len(rest) < len(callOpen) && strings.HasPrefix(callOpen, rest) {
			return p.eofNoName()
		}
		if strings.HasPrefix(rest, callOpen) {
			tc := ToolCall{Name: s[j:k]}
			args, end, st := pyKwargs(s, k+len(callOpen), true)
			switch st {
			case scanEOF:
				return p.eof(&tc, false)
			case scanInvalid:
				return p.invalid(&tc, false)
			}
			tc.Arguments = args
			p.calls = append(p.calls, tc)
			return end, true
		}
	}
	p.codeCall("python", s[j:])
	return len(s), true
}

// isJSONValue reports whether s is exactly one JSON value.
func isJSONValue(s string) bool {
	if s == "" {
		return false
	}
	end, st := scanJSONValue(s, 0)
	if st == scanEOF {
		// A number at the end of the text is complete here.
		return json.Valid([]byte(s))
	}
	return st == scanOK && end == len(s)
}

// startLlama3x reads bare JSON calls at the start of the output.
func startLlama3x(p *pstate, i int) int {
	s := p.s
	keys := callKeys{name: []string{"name"}, args: []string{"parameters", "arguments"}}
	committed := false
	for {
		k := skipSpace(s, i)
		if committed && k < len(s) && s[k] == ';' {
			k = skipSpace(s, k+1)
		}
		if k >= len(s) {
			if p.partial {
				p.stopped = true
			}
			return i
		}
		if s[k] != '{' {
			return i
		}
		tc, end, st := p.callObject(k, keys)
		switch st {
		case scanEOF:
			if tc.Name != "" || committed || p.partial {
				p.eof(&tc, committed)
				return len(s)
			}
			return i
		case scanInvalid:
			if tc.Name != "" || committed {
				p.invalid(&tc, committed)
				return len(s)
			}
			return i
		}
		if tc.Name == "" {
			return i
		}
		p.calls = append(p.calls, tc)
		committed = true
		i = end
	}
}

const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// callDeepSeek reads a DeepSeek tool-call section. R1 writes
// <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{...}\n```<｜tool▁call▁end｜>;
// V3.1 writes <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>.
func callDeepSeek(r1 bool) callFunc {
	return func(p *pstate, i int, marker string) (int, bool) {
		s := p.s
		j := i
		if marker == dsCallsBegin {
			j = i + len(marker)
		}
		return p.callSeq(j, dsCallBegin, dsCallsEnd, func(k int, committed bool) (int, bool, bool) {
			sep := strings.Index(s[k:], dsSep)
			if sep < 0 {
				return done(p.eof(nil, committed))
			}
			var tc ToolCall
			head := strings.TrimSpace(s[k : k+sep])
			j := k + sep + len(dsSep)
			if r1 || head == "function" {
				nl := strings.IndexByte(s[j:], '\n')
				if nl < 0 {
					return done(p.eof(nil, committed))
				}
				tc.Name = strings.TrimSpace(s[j : j+nl])
				j += nl + 1
				if f, ok := p.lit(j, "```json", true); ok {
					j = f
				} else if p.stopped {
					return done(p.eof(nil, committed))
				}
			} else {
				tc.Name = head
			}
			end, ok, recorded := p.jsonCall(&tc, j, committed)
			if !recorded {
				return done(end, ok)
			}
			j = end
			for _, l := range []string{"```", dsCallEnd} {
				if f, ok := p.lit(j, l, true); ok {
					j = f
				} else if p.stopped {
					return done(len(s), true)
				}
			}
			return j, true, true
		})
	}
}

const (
	kimiSectionBegin = "<|tool_calls_section_begin|>"
	kimiCallBegin    = "<|tool_call_begin|>"
)

// callKimiK2 reads <|tool_calls_section_begin|>(<|tool_call_begin|>
// functions.name:idx<|tool_call_argument_begin|>{...}<|tool_call_end|>)*
// <|tool_calls_section_end|>. As Kimi K2 Thinking writes it, the section
// markers and each <|tool_call_end|> may be missing: a call can start at a
// bare <|tool_call_begin|>, and the section ends where no call follows.
func callKimiK2(p *pstate, i int, marker string) (int, bool) {
	const (
		argBegin = "<|tool_call_argument_begin|>"
		callEnd  = "<|tool_call_end|>"
		secEnd   = "<|tool_calls_section_end|>"
	)
	s := p.s
	j := i
	if marker == kimiSectionBegin {
		j += len(marker)
	}
	committed := false
	for {
		k, ok := p.lit(j, kimiCallBegin, true)
		if p.stopped {
			return p.eof(nil, committed)
		}
		if !ok {
			if e, ok := p.lit(j, secEnd, true); ok {
				return e, true
			} else if p.stopped {
				return p.eof(nil, committed)
			}
			if committed {
				return j, true
			}
			return p.invalid(nil, false)
		}
		a := strings.Index(s[k:], argBegin)
		if a < 0 {
			return p.eof(nil, committed)
		}
		id := strings.TrimSpace(s[k : k+a])
		name := strings.TrimPrefix(id, "functions.")
		if c := strings.LastIndexByte(name, ':'); c >= 0 {
			name = name[:c]
		}
		tc := ToolCall{ID: id, Name: name}
		end, ok, recorded := p.jsonCall(&tc, k+a+len(argBegin), committed)
		if !recorded {
			return end, ok
		}
		committed = true
		j = end
		if f, ok := p.lit(j, callEnd, true); ok {
			j = f
		} else if p.stopped {
			return len(s), true
		}
	}
}

// xmlArgs builds a JSON arguments object from text parameters one at a
// time; the open form is a prefix of the closed one.
type xmlArgs struct {
	b strings.Builder
	n int
}

func (a *xmlArgs) add(p *pstate, fn, key, val string) {
	a.addValue(key, p.typedValue(fn, key, val))
}

// addValue adds a parameter whose value is already JSON.
func (a *xmlArgs) addValue(key, value string) {
	if a.n == 0 {
		a.b.WriteByte('{')
	} else {
		a.b.WriteString(", ")
	}
	a.n++
	a.b.WriteString(jsonString(key))
	a.b.WriteString(": ")
	a.b.WriteString(value)
}

func (a *xmlArgs) open() string {
	if a.n == 0 {
		return "{"
	}
	return a.b.String()
}

func (a *xmlArgs) closed() string { return a.open() + "}" }

// typedValue turns a text parameter into JSON: a string when the tool's
// schema says so or when the text is not JSON, the JSON value otherwise.
func (p *pstate) typedValue(fn, key, val string) string {
	if t := paramType(p.opts.Tools, fn, key); t == "string" {
		return jsonString(val)
	}
	if v := strings.TrimSpace(val); isJSONValue(v) {
		return v
	}
	return jsonString(val)
}

// paramType is the JSON Schema type of a tool's parameter, or "".
func paramType(tools []Tool, fn, key string) string {
	for _, t := range tools {
		if t.Name != fn || len(t.Parameters) == 0 {
			continue
		}
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.Parameters, &schema) != nil {
			return ""
		}
		if ts, ok := schema.Properties[key].Type.(string); ok {
			return ts
		}
		return ""
	}
	return ""
}

// trimNewlines drops one newline at each end of a parameter value.
func trimNewlines(v string) string {
	v = strings.TrimPrefix(v, "\r")
	v = strings.TrimPrefix(v, "\n")
	v = strings.TrimSuffix(v, "\n")
	v = strings.TrimSuffix(v, "\r")
	return v
}

// callQwen3Coder reads <tool_call><function=name><parameter=k>v</parameter>
// </function></tool_call> (the opening <tool_call> may be missing).
func callQwen3Coder(p *pstate, i int, marker string) (int, bool) {
	return callXMLFunction(p, i, marker, "<tool_call>", "</tool_call>")
}

// callSeedOSS reads <seed:tool_call><function=name><parameter=k>v
// </parameter></function></seed:tool_call>.
func callSeedOSS(p *pstate, i int, marker string) (int, bool) {
	return callXMLFunction(p, i, marker, "<seed:tool_call>", "</seed:tool_call>")
}

// callXMLFunction reads <function=name> with <parameter=k>v</parameter>
// items up to </function>, inside the optional wrapper wrapStart ...
// wrapEnd.
func callXMLFunction(p *pstate, i int, marker, wrapStart, wrapEnd string) (int, bool) {
	s := p.s
	j := i + len(marker)
	if marker == wrapStart {
		k, ok := p.lit(j, "<function=", true)
		if p.stopped {
			return p.eof(nil, false)
		}
		if !ok {
			if marker == "<tool_call>" {
				// Some models put Hermes JSON in the same tags.
				return callHermes(p, i, marker)
			}
			return p.invalid(nil, false)
		}
		j = k
	}
	gt := strings.IndexByte(s[j:], '>')
	if gt < 0 {
		return p.eofNoName()
	}
	tc := ToolCall{Name: strings.TrimSpace(s[j : j+gt])}
	if !validName(tc.Name) {
		return p.invalid(nil, false)
	}
	return p.xmlParams(&tc, j+gt+1, "<parameter=", "</function>", func(k int, args *xmlArgs) (int, scanStatus) {
		gt := strings.IndexByte(s[k:], '>')
		if gt < 0 {
			return 0, scanEOF
		}
		key := strings.TrimSpace(s[k : k+gt])
		val, end, found := p.until(k+gt+1, "</parameter>")
		if !found {
			return 0, scanEOF
		}
		args.add(p, tc.Name, key, trimNewlines(val))
		return end, scanOK
	}, wrapEnd, false)
}

// xmlParams reads a call's parameters from j, each starting with the
// literal open and read by param (from after open), until the literal
// closing and then an optional after. It records the call.
func (p *pstate) xmlParams(tc *ToolCall, j int, open, closing string, param func(k int, args *xmlArgs) (int, scanStatus), after string, committed bool) (int, bool) {
	var args xmlArgs
	for {
		tc.Arguments = args.open()
		k, ok := p.lit(j, open, true)
		if p.stopped {
			return p.eof(tc, committed)
		}
		if ok {
			end, st := param(k, &args)
			switch st {
			case scanEOF:
				return p.eof(tc, committed)
			case scanInvalid:
				return p.invalid(tc, committed)
			}
			j = end
			continue
		}
		k, ok = p.lit(j, closing, true)
		if p.stopped {
			return p.eof(tc, committed)
		}
		if !ok {
			return p.invalid(tc, committed)
		}
		tc.Arguments = args.closed()
		p.calls = append(p.calls, *tc)
		return p.closeWith(k, after), true
	}
}

// callMiniMaxM2 reads <minimax:tool_call> followed by <invoke name="f">
// with <parameter name="k">v</parameter> items up to </invoke>, one or more
// times, then </minimax:tool_call>.
func callMiniMaxM2(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	return p.callInvokes(i+len(marker), "<invoke name=\"", "<parameter name=\"", "</invoke>", "</minimax:tool_call>", func(name string, k int, args *xmlArgs) (int, scanStatus) {
		q := strings.Index(s[k:], "\">")
		if q < 0 {
			return 0, scanEOF
		}
		val, end, found := p.until(k+q+2, "</parameter>")
		if !found {
			return 0, scanEOF
		}
		args.add(p, name, s[k:k+q], val)
		return end, scanOK
	})
}

// callInvokes reads one or more calls from j, each the literal invoke, the
// name up to a closing `">`, parameters that start with the literal open
// and are read by param (from after open; name is the call's), and the
// literal invokeEnd; then the optional literal closing.
func (p *pstate) callInvokes(j int, invoke, open, invokeEnd, closing string, param func(name string, k int, args *xmlArgs) (int, scanStatus)) (int, bool) {
	s := p.s
	return p.callSeq(j, invoke, closing, func(k int, committed bool) (int, bool, bool) {
		q := strings.Index(s[k:], "\">")
		if q < 0 {
			return done(p.eof(nil, committed))
		}
		tc := ToolCall{Name: s[k : k+q]}
		if !validName(tc.Name) {
			return done(p.invalid(nil, committed))
		}
		end, ok := p.xmlParams(&tc, k+q+2, open, invokeEnd, func(k int, args *xmlArgs) (int, scanStatus) {
			return param(tc.Name, k, args)
		}, "", committed)
		return end, ok, ok && !p.stopped
	})
}

// callGLM45 reads <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>
// </tool_call>.
func callGLM45(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	j := i + len(marker)
	end := len(s)
	for _, t := range []string{"\n", "<arg_key>", "</tool_call>"} {
		if k := strings.Index(s[j:], t); k >= 0 && j+k < end {
			end = j + k
		}
	}
	if end == len(s) {
		return p.eofNoName()
	}
	tc := ToolCall{Name: strings.TrimSpace(s[j:end])}
	if !validName(tc.Name) {
		return p.invalid(nil, false)
	}
	return p.xmlParams(&tc, end, "<arg_key>", "</tool_call>", func(k int, args *xmlArgs) (int, scanStatus) {
		key, e, found := p.until(k, "</arg_key>")
		if !found {
			return 0, scanEOF
		}
		v, ok := p.lit(e, "<arg_value>", true)
		if p.stopped {
			return 0, scanEOF
		}
		if !ok {
			return 0, scanInvalid
		}
		val, e, found := p.until(v, "</arg_value>")
		if !found {
			return 0, scanEOF
		}
		args.add(p, tc.Name, strings.TrimSpace(key), val)
		return e, scanOK
	}, "", false)
}
