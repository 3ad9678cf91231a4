package chat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each Jinja equivalent of a built-in format is named as llama.cpp names
// it, parses, and renders a conversation in order.
func TestBuiltinTemplatesRender(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "SYS"},
		{Role: "user", Content: "Q1"},
		{Role: "assistant", Content: "A1"},
		{Role: "user", Content: "Q2"},
	}
	for name, src := range builtinJinja {
		t.Run(name, func(t *testing.T) {
			assert.True(t, IsBuiltinTemplate(name), "%s is not a llama.cpp built-in name", name)
			tmpl, err := ParseTemplate(src)
			require.NoError(t, err)
			out, err := tmpl.Render(TemplateInput{Messages: msgs, AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>"})
			require.NoError(t, err)
			for _, want := range []string{"SYS", "Q1", "A1", "Q2"} {
				assert.Contains(t, out, want)
			}
			assert.Less(t, strings.Index(out, "Q1"), strings.Index(out, "A1"))
			assert.Less(t, strings.Index(out, "A1"), strings.Index(out, "Q2"))
		})
	}
	tmpl, err := ParseTemplate(builtinJinja["llama3"])
	require.NoError(t, err)
	out, err := tmpl.Render(TemplateInput{Messages: msgs[1:2], AddGenerationPrompt: true})
	require.NoError(t, err)
	assert.Equal(t, "<|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", out)
}
