package chat

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notContaining matches exactly the texts without the word, whatever
// overlaps the word has with itself.
func TestNotContaining(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, w := range []string{"</think>", "abab", "aab", "aaa", "a", "[/THINK]", "é</é>"} {
		t.Run(w, func(t *testing.T) {
			g := notContaining("root", w)
			alphabet := []rune(w + "xé")
			texts := []string{"", w, "x" + w, w + "x", w[:len(w)-1]}
			for range 300 {
				var sb strings.Builder
				for range rng.IntN(12) {
					sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
				}
				texts = append(texts, sb.String())
			}
			for _, s := range texts {
				assert.Equal(t, !strings.Contains(s, w), grammarAccepts(t, g, s), "%q in %q", w, s)
			}
		})
	}
}

// qwenLikeTemplate thinks unless told not to: the model opens its own
// <think> block; with enable_thinking false the generation prompt holds
// an empty one.
const qwenLikeTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}`

// A grammar that applies from the first token lets a thinking model think
// first: in the block the generation prompt opened, or in one it opens.
func TestPrepareReasoningBeforeGrammar(t *testing.T) {
	user := Message{Role: RoleUser, Content: "x"}
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	weather := Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}
	on, off := map[string]any{"enable_thinking": true}, map[string]any{"enable_thinking": false}
	const answer = `{"a": 1}`
	tests := []struct {
		name      string
		src       string
		req       Request
		accepts   []string
		refuses   []string
		reasoning string // of the first accepted text
	}{
		{name: "open block: reasoning, its end, the answer", src: thinkTemplate,
			req:       Request{Schema: schema, Extra: on},
			accepts:   []string{"Let me see.</think>\n\n" + answer, "</think>" + answer, "a<b</think>" + answer},
			refuses:   []string{answer, "x</think>y</think>" + answer, "x</think>free text"},
			reasoning: "Let me see."},
		{name: "thinking off: the answer", src: thinkTemplate,
			req:     Request{Schema: schema, Extra: off},
			accepts: []string{answer}, refuses: []string{"x</think>" + answer}},
		{name: "reasoning format none: the grammar as it was", src: thinkTemplate,
			req:     Request{Schema: schema, Extra: on, Reasoning: "none"},
			accepts: []string{answer}, refuses: []string{"x</think>" + answer}},
		{name: "a block the model may open", src: qwenLikeTemplate,
			req:       Request{Schema: schema},
			accepts:   []string{"<think>\nHm.\n</think>\n\n" + answer, answer},
			refuses:   []string{"Hm.</think>" + answer, "<think>Hm." + answer},
			reasoning: "Hm."},
		{name: "a block the model may open, thinking off", src: qwenLikeTemplate,
			req:     Request{Schema: schema, Extra: off},
			accepts: []string{answer}, refuses: []string{"<think>Hm.</think>" + answer}},
		{name: "a call required, generic envelope", src: thinkTemplate,
			req:       Request{Tools: []Tool{weather}, ToolChoice: ToolChoice{Mode: "required"}, FallbackFormat: FormatGeneric, Extra: on},
			accepts:   []string{`Call it.</think>{"tool_call": {"name": "get_weather", "arguments": {}}}`},
			refuses:   []string{`{"tool_call": {"name": "get_weather", "arguments": {}}}`},
			reasoning: "Call it."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Messages = []Message{user}
			p, err := testTemplates(t, tc.src).Prepare(tc.req)
			require.NoError(t, err)
			assertGrammar(t, p.Grammar, tc.accepts, tc.refuses)
			if tc.reasoning != "" {
				msg := p.ParseOutput(tc.accepts[0])
				assert.Equal(t, tc.reasoning, strings.TrimSpace(msg.ReasoningContent))
				if len(msg.ToolCalls) == 0 {
					assert.Equal(t, answer, msg.Content)
				}
			}
		})
	}
}
