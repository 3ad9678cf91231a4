package chat

// Cohere Command R7B and Command R+ tool calls.

// callCommandR7B reads <|START_ACTION|>[...]<|END_ACTION|> and drops the
// response wrappers.
func callCommandR7B(p *pstate, i int, marker string) (int, bool) {
	if marker != "<|START_ACTION|>" {
		return i + len(marker), true
	}
	end, ok := p.callArray(i+len(marker), defaultCallKeys)
	if !ok || p.stopped {
		return end, ok
	}
	return p.closeWith(end, "<|END_ACTION|>"), true
}

// Cohere2 MoE writes its answer between these.
const (
	cohereText    = "<|START_TEXT|>"
	cohereTextEnd = "<|END_TEXT|>"
)

// commandRAction starts Command R+'s tool calls.
const commandRAction = "Action:"

// callCommandRPlus reads Action: ```json [{"tool_name": ..., "parameters":
// ...}, ...] ``` and drops the turn markers.
func callCommandRPlus(p *pstate, i int, marker string) (int, bool) {
	if marker != commandRAction {
		return i + len(marker), true
	}
	j, ok := p.lit(i+len(marker), "```json", true)
	if p.stopped {
		return p.eof(nil, false)
	}
	if !ok {
		return p.invalid(nil, false)
	}
	end, ok := p.callArray(j, defaultCallKeys)
	if !ok || p.stopped {
		return end, ok
	}
	return p.closeWith(end, "```"), true
}
