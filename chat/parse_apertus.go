package chat

// Apertus markers.
const (
	apertusTools    = "<|tools_prefix|>"
	apertusToolsEnd = "<|tools_suffix|>"
	apertusInner    = "<|inner_prefix|>"
	apertusInnerEnd = "<|inner_suffix|>"
)

// callApertus reads <|tools_prefix|>[{"name": {...}}, ...]<|tools_suffix|>:
// each call is an object whose only key is the function name.
func callApertus(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	return p.callList(i+len(marker), apertusToolsEnd, func(k int, committed bool) (int, bool, bool) {
		if k >= len(s) {
			return done(p.eof(nil, committed))
		}
		if s[k] != '{' {
			return done(p.invalid(nil, committed))
		}
		k = skipSpace(s, k+1)
		e, st := scanJSONString(s, k)
		switch st {
		case scanEOF:
			return done(p.eof(nil, committed))
		case scanInvalid:
			return done(p.invalid(nil, committed))
		}
		// The key is the name only once the colon after it is read.
		c := skipSpace(s, e)
		if c >= len(s) {
			return done(p.eof(nil, committed))
		}
		if s[c] != ':' {
			return done(p.invalid(nil, committed))
		}
		tc := ToolCall{Name: decodeJSONString(s[k:e])}
		end, ok, recorded := p.jsonCall(&tc, c+1, committed)
		if !recorded {
			return done(end, ok)
		}
		k = skipSpace(s, end)
		if k >= len(s) {
			return done(p.eof(nil, true))
		}
		if s[k] != '}' {
			return done(p.invalid(nil, true))
		}
		return k + 1, true, true
	})
}
