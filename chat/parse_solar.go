package chat

import "strings"

// Solar Open tool calls and answer markup.

const (
	solarCalls     = "<|tool_calls|>"
	solarCallBegin = "<|tool_call:begin|>"
	solarCallName  = "<|tool_call:name|>"
	solarCallArgs  = "<|tool_call:args|>"
	solarCallEnd   = "<|tool_call:end|>"
	solarCallsEnd  = "<|calls|>"
	solarThink     = "<|think|>"
	solarEnd       = "<|end|>"
	solarContent   = "<|content|>"
	// solarTurn starts the message after the thinking one: the
	// generation prompt opens a turn with it, a thinking turn ends with
	// <|end|>, and the answer or calls come in a turn of their own.
	solarTurn = "<|begin|>assistant"
)

// solarWrappers are Solar Open's turn markup around the answer, never
// content.
var solarWrappers = []string{solarContent, solarEnd, solarTurn}

// callSolarOpen reads <|tool_calls|> and one or more calls
// <|tool_call:begin|>id<|tool_call:name|>f<|tool_call:args|>{...}
// <|tool_call:end|>, then the optional <|calls|> (the model's end of
// generation token, which the output does not hold when it stopped on
// it); it drops the answer's turn markup. The id the model writes (the
// template asks for ten lowercase letters or digits, and shows it with
// the tool's result) is the call's ID.
func callSolarOpen(p *pstate, i int, marker string) (int, bool) {
	if marker != solarCalls {
		return i + len(marker), true
	}
	s := p.s
	return p.callSeq(i+len(marker), solarCallBegin, solarCallsEnd, func(k int, committed bool) (int, bool, bool) {
		n := strings.Index(s[k:], solarCallName)
		if n < 0 {
			return done(p.eof(nil, committed))
		}
		id, k := strings.TrimSpace(s[k:k+n]), k+n+len(solarCallName)
		a := strings.Index(s[k:], solarCallArgs)
		if a < 0 {
			return done(p.eof(nil, committed))
		}
		if len(id) > 256 {
			return done(p.invalid(nil, committed))
		}
		tc := ToolCall{ID: id, Name: strings.TrimSpace(s[k : k+a])}
		end, ok, recorded := p.jsonCall(&tc, k+a+len(solarCallArgs), committed)
		if !recorded {
			return done(end, ok)
		}
		if e, ok := p.lit(end, solarCallEnd, true); ok {
			end = e
		} else if p.stopped {
			return done(len(s), true)
		}
		return end, true, true
	})
}
