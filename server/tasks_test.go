package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
)

// TestLogPromptsDir: each completion request's prompt lands in a file of
// its own as the model reads it, the chat template applied; several
// prompts as a JSON array; the files are the owner's only.
func TestLogPromptsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prompts")
	_, ts := newTestServer(t, Options{LogPromptsDir: dir})
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	read := func() []string {
		t.Helper()
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			info, err := e.Info()
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), e.Name())
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			out = append(out, string(data))
			require.NoError(t, os.Remove(filepath.Join(dir, e.Name())))
		}
		return out
	}
	code, _ := postJSON(t, ts.URL+"/completion", map[string]any{"prompt": "Once upon a time", "n_predict": 2})
	require.Equal(t, 200, code)
	assert.Equal(t, []string{"<s> Once upon a time"}, read())

	code, _ = postJSON(t, ts.URL+"/v1/chat/completions", map[string]any{"max_tokens": 2,
		"messages": []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}}})
	require.Equal(t, 200, code)
	assert.Equal(t, []string{"<s> <|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"}, read())

	code, _ = postRaw(t, ts.URL+"/completion", map[string]any{"prompt": []string{"One", "Two"}, "n_predict": 1})
	require.Equal(t, 200, code)
	files := read()
	require.Len(t, files, 1)
	var many []string
	require.NoError(t, json.Unmarshal([]byte(files[0]), &many))
	assert.Equal(t, []string{"<s> One", "<s> Two"}, many)

	code, _ = postJSON(t, ts.URL+"/tokenize", map[string]any{"content": "not a completion"})
	require.Equal(t, 200, code)
	assert.Empty(t, read())
}

func TestSplitMedia(t *testing.T) {
	m := engine.MediaPlaceholder
	for _, tt := range []struct {
		in   []llama.Token
		want [][]llama.Token
	}{
		{nil, nil},
		{[]llama.Token{1, 2}, [][]llama.Token{{1, 2}}},
		{[]llama.Token{1, m, m, m, 2, 3}, [][]llama.Token{{1}, nil, {2, 3}}},
		{[]llama.Token{m, m, 5, m}, [][]llama.Token{nil, {5}, nil}},
	} {
		assert.Equal(t, tt.want, slices.Collect(splitMedia(tt.in)), "%v", tt.in)
	}
}

// TestPromptText: a prompt with media renders its text around them, the
// media left out (the answer's "prompt", as llama-server's) or marked
// (the prompt log); before, any medium made the whole text empty.
func TestPromptText(t *testing.T) {
	s, _ := newTestServer(t, Options{})
	m := defaultInstance(t, s).Model
	once, err := m.Tokenize("Once", llama.TokenizeOptions{AddSpecial: true})
	require.NoError(t, err)
	upon, err := m.Tokenize(" upon", llama.TokenizeOptions{})
	require.NoError(t, err)
	mp := engine.MediaPlaceholder
	toks := slices.Concat(once, []llama.Token{mp, mp, mp}, upon)
	assert.Equal(t, "<s> Once upon", promptText(m, toks, ""))
	assert.Equal(t, "<s> Once<__media__> upon", promptText(m, toks, "<__media__>"))
	assert.Equal(t, "<s> Once", promptText(m, once, "<__media__>"))
}
