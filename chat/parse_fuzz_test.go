package chat

import (
	"testing"
)

func fuzzOpts(format, reasoning uint8, forced, tools bool) ParseOptions {
	return ParseOptions{
		Format:             Format(int(format) % int(formatCount)),
		Reasoning:          ReasoningFormat(int(reasoning) % 3),
		ThinkingForcedOpen: forced,
		ParseToolCalls:     tools,
	}
}

func addParseSeeds(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.in, uint8(c.format), uint8(c.reasoning), c.forced, !c.noTools)
	}
}

// FuzzParse checks that Parse never panics and always returns an assistant
// message.
func FuzzParse(f *testing.F) {
	addParseSeeds(f)
	f.Fuzz(func(t *testing.T, in string, format, reasoning uint8, forced, tools bool) {
		msg, _ := Parse(in, fuzzOpts(format, reasoning, forced, tools))
		if msg.Role != RoleAssistant {
			t.Fatalf("role %q", msg.Role)
		}
	})
}

// FuzzParserStream checks that streaming in small pieces gives deltas that
// add up to the whole parse.
func FuzzParserStream(f *testing.F) {
	addParseSeeds(f)
	f.Fuzz(func(t *testing.T, in string, format, reasoning uint8, forced, tools bool) {
		opts := fuzzOpts(format, reasoning, forced, tools)
		whole, wholeErr := Parse(in, opts)
		for _, size := range []int{1, 3} {
			var pieces []string
			for i := 0; i < len(in); i += size {
				pieces = append(pieces, in[i:min(i+size, len(in))])
			}
			checkResumed(t, opts, pieces)
			got, err := streamPieces(t, opts, pieces)
			if (err != nil) != (wholeErr != nil) {
				t.Fatalf("size %d: stream error %v, whole error %v", size, err, wholeErr)
			}
			if got.Content != whole.Content || got.ReasoningContent != whole.ReasoningContent || len(got.ToolCalls) != len(whole.ToolCalls) {
				t.Fatalf("size %d: stream %+v, whole %+v", size, got, whole)
			}
			for i := range got.ToolCalls {
				if got.ToolCalls[i] != whole.ToolCalls[i] {
					t.Fatalf("size %d: call %d: stream %+v, whole %+v", size, i, got.ToolCalls[i], whole.ToolCalls[i])
				}
			}
		}
	})
}
