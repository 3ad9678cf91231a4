package chat

import "strings"

// Hunyuan 3 (tencent-Hy3) tool calls: GLM 4.5's argument tags, each
// token of the format ending in ":opensource".

const (
	hyThink     = "<think:opensource>"
	hyThinkEnd  = "</think:opensource>"
	hyCalls     = "<tool_calls:opensource>"
	hyCallsEnd  = "</tool_calls:opensource>"
	hyCall      = "<tool_call:opensource>"
	hyCallEnd   = "</tool_call:opensource>"
	hySep       = "<tool_sep:opensource>"
	hyArgKey    = "<arg_key:opensource>"
	hyArgKeyEnd = "</arg_key:opensource>"
	hyArgVal    = "<arg_value:opensource>"
	hyArgValEnd = "</arg_value:opensource>"
)

// callHunyuan3 reads <tool_calls:opensource> and one or more calls
// <tool_call:opensource>f<tool_sep:opensource> with
// <arg_key:opensource>k</arg_key:opensource>
// <arg_value:opensource>v</arg_value:opensource> items up to
// </tool_call:opensource>, then the optional </tool_calls:opensource>.
// A value is the text between its tags (the template writes strings as
// they are, other values as JSON).
func callHunyuan3(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	return p.callSeq(i+len(marker), hyCall, hyCallsEnd, func(k int, committed bool) (int, bool, bool) {
		sep := strings.Index(s[k:], hySep)
		if sep < 0 {
			return done(p.eof(nil, committed))
		}
		tc := ToolCall{Name: strings.TrimSpace(s[k : k+sep])}
		if !validName(tc.Name) {
			return done(p.invalid(nil, committed))
		}
		end, ok := p.xmlParams(&tc, k+sep+len(hySep), hyArgKey, hyCallEnd, func(k int, args *xmlArgs) (int, scanStatus) {
			key, e, found := p.until(k, hyArgKeyEnd)
			if !found {
				return 0, scanEOF
			}
			v, ok := p.lit(e, hyArgVal, true)
			if p.stopped {
				return 0, scanEOF
			}
			if !ok {
				return 0, scanInvalid
			}
			val, e, found := p.until(v, hyArgValEnd)
			if !found {
				return 0, scanEOF
			}
			args.add(p, tc.Name, strings.TrimSpace(key), val)
			return e, scanOK
		}, "", committed)
		return end, ok, ok && !p.stopped
	})
}
