package chat

import (
	"slices"
	"strings"
)

// DeepSeek V3.2 / V4 DSML markup.
const (
	dsml          = "｜DSML｜"
	dsmlInvoke    = "<" + dsml + "invoke name=\""
	dsmlInvokeEnd = "</" + dsml + "invoke>"
	dsmlParam     = "<" + dsml + "parameter name=\""
	dsmlParamEnd  = "</" + dsml + "parameter>"
)

// dsmlBlocks open a DSML tool-call block: V3.2 calls it function_calls, V4
// tool_calls.
var dsmlBlocks = []string{"<" + dsml + "function_calls>", "<" + dsml + "tool_calls>"}

// dsmlSeparator is the blank line the template puts between text and a
// block: as llama.cpp reads it, it belongs to the block, not the text.
const dsmlSeparator = "\n\n"

// dsmlMarkers start a block in the output: a block's tag, with or without
// the separator before it.
var dsmlMarkers = append(slices.Clone(dsmlBlocks), dsmlSeparator+dsmlBlocks[0], dsmlSeparator+dsmlBlocks[1])

// callDSML reads a DSML block: one or more <｜DSML｜invoke name="f"> with
// <｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>
// items up to </｜DSML｜invoke>, then the block's closing tag. A value
// marked string="true" is text; otherwise it is JSON (or text when it does
// not read as JSON).
func callDSML(p *pstate, i int, marker string) (int, bool) {
	s := p.s
	if m, ok := strings.CutPrefix(marker, dsmlSeparator); ok {
		i, marker = i+len(dsmlSeparator), m
	}
	closing := "</" + marker[1:]
	return p.callInvokes(i+len(marker), dsmlInvoke, dsmlParam, dsmlInvokeEnd, closing, func(name string, k int, args *xmlArgs) (int, scanStatus) {
		gt := strings.IndexByte(s[k:], '>')
		if gt < 0 {
			return 0, scanEOF
		}
		head := s[k : k+gt]
		q := strings.IndexByte(head, '"')
		if q < 0 {
			return 0, scanInvalid
		}
		key, attrs := head[:q], head[q+1:]
		val, end, found := p.until(k+gt+1, dsmlParamEnd)
		if !found {
			return 0, scanEOF
		}
		switch {
		case strings.Contains(attrs, `string="true"`):
			args.addValue(key, jsonString(val))
		case strings.Contains(attrs, `string="false"`) && isJSONValue(strings.TrimSpace(val)):
			args.addValue(key, strings.TrimSpace(val))
		default:
			args.add(p, name, key, val)
		}
		return end, scanOK
	})
}
