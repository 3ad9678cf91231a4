package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/llama"
	"github.com/x/llama/chat"
	"github.com/x/llama/internal/testenv/modeltest"
)

// TestPromptCache: a conversation that grows turn by turn decodes only the
// new text, and generates exactly what a fresh context would.
func TestPromptCache(t *testing.T) {
	m := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{})
	cached, err := m.NewContext(llama.ContextOptions{ContextSize: 1024, Threads: 1, Perf: true})
	require.NoError(t, err)
	fresh, err := m.NewContext(llama.ContextOptions{ContextSize: 1024, Threads: 1})
	require.NoError(t, err)
	pc := &promptCache{}
	text := "Once upon a time"
	for turn := range 3 {
		var got strings.Builder
		require.NoError(t, cached.ResetPerf())
		gen, err := pc.generate(context.Background(), cached, text, llama.GenerateOptions{MaxTokens: 12})
		require.NoError(t, err)
		for p, err := range gen {
			require.NoError(t, err)
			got.WriteString(p.Text)
		}
		var want strings.Builder
		for p, err := range fresh.Generate(context.Background(), text, llama.GenerateOptions{MaxTokens: 12}).Seq() {
			require.NoError(t, err)
			want.WriteString(p.Text)
		}
		assert.Equal(t, want.String(), got.String(), "turn %d", turn)
		perf, err := cached.Perf()
		require.NoError(t, err)
		all, err := m.Tokenize(text, llama.TokenizeOptions{AddSpecial: true, ParseSpecial: true})
		require.NoError(t, err)
		if turn > 0 {
			assert.Less(t, perf.PromptTokens, len(all)/2, "turn %d decoded %d of %d prompt tokens", turn, perf.PromptTokens, len(all))
		}
		text += got.String() + " Then"
	}
}

// TestChatTemplate: the template comes from --chat-template (a built-in
// name or Jinja source), --chat-template-file, or the model; a model
// without one and no flag gives none.
func TestChatTemplate(t *testing.T) {
	m := modeltest.Load(t, "stories260K.gguf", llama.ModelOptions{})
	file := filepath.Join(t.TempDir(), "t.jinja")
	require.NoError(t, os.WriteFile(file, []byte("{% for m in messages %}[{{ m.content }}]{% endfor %}"), 0o644))
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "hi"}}
	for _, c := range []struct{ name, flag, file, want string }{
		{"builtin name", "gemma", "", "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"},
		{"jinja source", "<{{ messages[0].content }}>", "", "<hi>"},
		{"file", "", file, "[hi]"},
		// A llama.cpp built-in without a Jinja equivalent renders in its
		// format, never as the literal name.
		{"native builtin name", "llama4", "", "<|header_start|>user<|header_end|>\n\nhi<|eot|><|header_start|>assistant<|header_end|>\n\n"},
	} {
		tmpl, err := chatTemplate(m, c.flag, c.file)
		require.NoError(t, err, c.name)
		require.NotNil(t, tmpl, c.name)
		got, err := tmpl.Render(msgs, nil, true, nil)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
	tmpl, err := chatTemplate(m, "", "")
	require.NoError(t, err)
	assert.Nil(t, tmpl, "stories260K has no template")
	_, err = chatTemplate(m, "gemma", file)
	require.Error(t, err)
	_, err = chatTemplate(m, "no-such-template", "")
	require.ErrorContains(t, err, "unknown chat template", "a typo is an error, not a template that prints itself")
	_, err = chatTemplate(m, "", filepath.Join(t.TempDir(), "missing.jinja"))
	require.Error(t, err)
}
