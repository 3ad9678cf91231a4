package server

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func tailText(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// gemmaTemplateFile is the Gemma 3 instruction template (as published with
// the model; the GGUF of the PyPI package has none) that the real-model
// chats and the web page's Gemma test use.
func gemmaTemplateFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "gemma3-chat-template.jinja"))
	require.NoError(t, err)
	return p
}
