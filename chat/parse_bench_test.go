package chat

import (
	"strings"
	"testing"
)

// tokenPieces cuts s into pieces of about one token (four bytes), the way
// a model's output arrives.
func tokenPieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(4, len(s))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// benchContent is a long answer with no markup: about 4,000 tokens.
func benchContent() string {
	const line = "The quick brown fox jumps over the lazy dog, again and again.\n"
	return strings.Repeat(line, 16000/len(line))
}

// benchCalls is a long answer with thinking, text and several tool calls in
// between: about 4,000 tokens.
func benchCalls() string {
	var b strings.Builder
	b.WriteString("<think>\n" + strings.Repeat("Let me weigh the options one more time. ", 40) + "\n</think>\n")
	for b.Len() < 16000 {
		b.WriteString(strings.Repeat("Some text between the calls. ", 20))
		b.WriteString("\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3, \"notes\": \"" + strings.Repeat("x", 200) + "\"}}\n</tool_call>\n")
	}
	return b.String()
}

// BenchmarkParserStream pushes long outputs to a Parser token by token.
func BenchmarkParserStream(b *testing.B) {
	cases := []struct {
		name string
		in   string
		opts ParseOptions
	}{
		{"content", benchContent(), ParseOptions{Format: FormatContentOnly}},
		{"tool_calls", benchCalls(), ParseOptions{Format: FormatHermes2Pro, Reasoning: ReasoningAuto, ParseToolCalls: true}},
		// A model that writes nothing but spaces until its limit: before,
		// after some text, and inside its thinking.
		{"spaces", strings.Repeat("\n", 16000), ParseOptions{Format: FormatHermes2Pro, ParseToolCalls: true}},
		{"text_then_spaces", "x" + strings.Repeat(" ", 16000), ParseOptions{Format: FormatHermes2Pro, ParseToolCalls: true}},
		{"thinking_spaces", "<think>x" + strings.Repeat(" ", 16000), ParseOptions{Format: FormatHermes2Pro, Reasoning: ReasoningAuto, ParseToolCalls: true}},
	}
	for _, c := range cases {
		pieces := tokenPieces(c.in)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				p := NewParser(c.opts)
				for _, piece := range pieces {
					if _, err := p.Push(piece); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := p.Finish(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
