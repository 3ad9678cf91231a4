package chat

import "strings"

// MiniCPM5 tool calls.

const (
	cpmFunction = `<function name="`
	cpmParam    = `<param name="`
	cpmCDATA    = "<![CDATA["
)

// callMiniCPM5 reads one or more <function name="f"> calls, each with
// <param name="k">v</param> items up to </function>. A value wrapped in
// <![CDATA[...]]> is the text between, which may hold </param>.
func callMiniCPM5(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	return p.callInvokes(i, cpmFunction, cpmParam, "</function>", "", func(name string, k int, args *xmlArgs) (int, scanStatus) {
		q := strings.Index(s[k:], `">`)
		if q < 0 {
			return 0, scanEOF
		}
		key, v := s[k:k+q], k+q+2
		if c, ok := p.lit(v, cpmCDATA, false); ok {
			val, end, found := p.until(c, "]]>")
			if !found {
				return 0, scanEOF
			}
			e, ok := p.lit(end, "</param>", false)
			if p.stopped {
				return 0, scanEOF
			}
			if !ok {
				return 0, scanInvalid
			}
			args.add(p, name, key, val)
			return e, scanOK
		} else if p.stopped {
			return 0, scanEOF
		}
		val, end, found := p.until(v, "</param>")
		if !found {
			return 0, scanEOF
		}
		args.add(p, name, key, val)
		return end, scanOK
	})
}
