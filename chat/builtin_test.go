package chat

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuiltinTemplateNames(t *testing.T) {
	names := BuiltinTemplateNames()
	require.Len(t, names, 54)
	assert.True(t, slices.IsSorted(names), "listed in llama.cpp's (sorted map) order")
	for _, n := range []string{"chatml", "llama2", "llama3", "mistral-v7", "phi3", "gemma", "zephyr", "deepseek", "command-r", "gpt-oss", "kimi-k2"} {
		assert.Contains(t, names, n)
	}
	names[0] = "changed"
	assert.Equal(t, "bailing", BuiltinTemplateNames()[0], "callers get a copy")
}

func TestIsBuiltinTemplate(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"chatml", true},
		{"llama2-sys-strip", true},
		{"mistral-v3-tekken", true},
		{"seed_oss", true},
		{"solar-open", true},
		{"ChatML", false},
		{"", false},
		{"llama", false},
		{"{% for m in messages %}{% endfor %}", false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, IsBuiltinTemplate(tc.name), tc.name)
	}
}

// TestBuiltinTemplateNamesMatchLlamaCpp checks the list against the
// LLM_CHAT_TEMPLATES table of the pinned llama.cpp source.
func TestBuiltinTemplateNamesMatchLlamaCpp(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(llamaSrc(t), "src", "llama-chat.cpp"))
	require.NoError(t, err)
	table := regexp.MustCompile(`(?s)LLM_CHAT_TEMPLATES = \{(.*?)\n\};`).FindSubmatch(src)
	require.NotNil(t, table)
	var want []string
	for _, m := range regexp.MustCompile(`\{\s*"([^"]+)"\s*,`).FindAllSubmatch(table[1], -1) {
		want = append(want, string(m[1]))
	}
	slices.Sort(want)
	assert.Equal(t, want, BuiltinTemplateNames())
}
