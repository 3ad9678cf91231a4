package chat

import (
	"bytes"
	"testing"
	"unicode"
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

// FuzzTextBounds checks the runs of spaces a text remembers against
// trimming the whole text, over any sequence of writes and cuts (a cut
// may fall inside a character, as a resumed reading's mark can).
func FuzzTextBounds(f *testing.F) {
	f.Add([]byte{1, 1, 2, 1, 0, 5, 6, 1, 12, 3})
	f.Add([]byte{4, 4, 4, 8, 7, 6, 1, 2})
	f.Add([]byte{2, 1, 1, 1, 16, 1, 1})
	f.Add([]byte{2, 0x81, 0x83, 0x85, 0x80, 1, 0x84, 3, 2})
	pieces := []string{" ", "\n", "x", "\u3000", "é", "\xe3", "\x80\x80", "\t", "\u3000 x "}
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tx text
		var ref []byte
		for _, op := range ops {
			if op%4 == 0 {
				n := int(op/4) % (len(ref) + 1)
				tx.cut(n)
				ref = ref[:n]
			} else {
				piece := pieces[int(op)%len(pieces)]
				tx.WriteString(piece)
				ref = append(ref, piece...)
			}
			if op&0x80 != 0 {
				continue // several changes between two readings
			}
			rest := bytes.TrimLeftFunc(ref, unicode.IsSpace)
			lo := len(ref) - len(rest)
			hi := lo + len(bytes.TrimRightFunc(rest, unicode.IsSpace))
			glo, ghi := tx.bounds()
			if glo != lo || ghi != hi {
				t.Fatalf("%q: bounds %d, %d; trimmed %d, %d", ref, glo, ghi, lo, hi)
			}
		}
	})
}
