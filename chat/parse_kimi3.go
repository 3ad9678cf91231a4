package chat

import "strings"

// Kimi K3 tool calls.
//
// Kimi K3 writes tags: <|open|>t k="v"...<|sep|> opens a section t and
// <|close|>t<|sep|> closes it. An answer is a think section (which the
// generation prompt opens), a response section and an optional tools
// section, then <|close|>message<|sep|> and <|end_of_msg|>.
const (
	kimi3Open  = "<|open|>"
	kimi3Close = "<|close|>"
	kimi3Sep   = "<|sep|>"
	kimi3EOM   = "<|end_of_msg|>"

	kimi3MsgStart = kimi3Open + `message role="assistant"` + kimi3Sep
	kimi3MsgEnd   = kimi3Close + "message" + kimi3Sep
	kimi3Think    = kimi3Open + "think" + kimi3Sep
	kimi3ThinkEnd = kimi3Close + "think" + kimi3Sep
	kimi3Resp     = kimi3Open + "response" + kimi3Sep
	kimi3RespEnd  = kimi3Close + "response" + kimi3Sep
	kimi3Tools    = kimi3Open + "tools" + kimi3Sep
	kimi3ToolsEnd = kimi3Close + "tools" + kimi3Sep
	kimi3Call     = kimi3Open + `call tool="`
	kimi3CallEnd  = kimi3Close + "call" + kimi3Sep
	kimi3Arg      = kimi3Open + `argument key="`
	kimi3ArgEnd   = kimi3Close + "argument" + kimi3Sep
)

// kimi3Wrappers are the tags around an answer's sections. They are never
// content: the parser drops them wherever they are, the think section's
// too, so that with reasoning format none its text is content without
// them, as llama.cpp's parser has it.
var kimi3Wrappers = []string{kimi3MsgStart, kimi3Think, kimi3ThinkEnd, kimi3Resp, kimi3RespEnd, kimi3MsgEnd, kimi3EOM}

// kimi3Attr escapes an attribute's value as the template writes it.
var kimi3Attr = strings.NewReplacer("&", "&amp;", `"`, "&quot;").Replace

// kimi3Unattr reads back an attribute's value that kimi3Attr escaped.
var kimi3Unattr = strings.NewReplacer("&quot;", `"`, "&amp;", "&").Replace

// callKimiK3 reads a tools section, <|open|>tools<|sep|> then one or more
// <|open|>call tool="f" index="n"<|sep|> calls, each with
// <|open|>argument key="k" type="t"<|sep|>v<|close|>argument<|sep|> items
// up to <|close|>call<|sep|>, then <|close|>tools<|sep|>; and drops the
// wrappers. A value is a string where the tool's schema says so, or,
// where the schema gives no type, where its type attribute does;
// otherwise it is its JSON when it reads as JSON.
func callKimiK3(p *pstate, i int, marker string) (int, bool) {
	if marker != kimi3Tools {
		return i + len(marker), true
	}
	return p.callSeq(i+len(marker), kimi3Call, kimi3ToolsEnd, func(k int, committed bool) (int, bool, bool) {
		name, _, j, st := p.kimi3Tag(k)
		switch st {
		case scanEOF:
			return done(p.eof(nil, committed))
		case scanInvalid:
			return done(p.invalid(nil, committed))
		}
		if !validName(name) {
			return done(p.invalid(nil, committed))
		}
		tc := ToolCall{Name: name}
		end, ok := p.xmlParams(&tc, j, kimi3Arg, kimi3CallEnd, func(k int, args *xmlArgs) (int, scanStatus) {
			key, attrs, v, st := p.kimi3Tag(k)
			if st != scanOK {
				return 0, st
			}
			val, end, found := p.until(v, kimi3ArgEnd)
			if !found {
				return 0, scanEOF
			}
			if kimi3Type(attrs) == "string" && paramType(p.opts.Tools, name, key) == "" {
				args.addValue(key, jsonString(val))
			} else {
				args.add(p, name, key, val)
			}
			return end, scanOK
		}, "", committed)
		return end, ok, ok && !p.stopped
	})
}

// kimi3Tag reads the rest of an opening tag from k, just after the
// opening quote of its first attribute: that attribute's value, the text
// of the attributes after it, and where the tag ends, after its <|sep|>.
// A tag that holds another tag's marker is invalid.
func (p *pstate) kimi3Tag(k int) (value, attrs string, end int, st scanStatus) {
	s := p.s
	q := strings.IndexByte(s[k:], '"')
	if q < 0 {
		if strings.Contains(s[k:], "<|") {
			return "", "", 0, scanInvalid
		}
		return "", "", 0, scanEOF
	}
	value = s[k : k+q]
	if strings.Contains(value, "<|") {
		return "", "", 0, scanInvalid
	}
	a := k + q + 1
	e := strings.Index(s[a:], kimi3Sep)
	if e < 0 {
		if l := strings.Index(s[a:], "<|"); l >= 0 && !strings.HasPrefix(kimi3Sep, s[a+l:]) {
			return "", "", 0, scanInvalid
		}
		return "", "", 0, scanEOF
	}
	attrs = s[a : a+e]
	if strings.Contains(attrs, "<|") {
		return "", "", 0, scanInvalid
	}
	return kimi3Unattr(value), attrs, a + e + len(kimi3Sep), scanOK
}

// kimi3Type is the value of the type attribute among attrs, or "".
func kimi3Type(attrs string) string {
	const key = `type="`
	k := strings.Index(attrs, key)
	if k < 0 || k > 0 && attrs[k-1] != ' ' {
		return ""
	}
	v := attrs[k+len(key):]
	if q := strings.IndexByte(v, '"'); q >= 0 {
		return v[:q]
	}
	return ""
}
