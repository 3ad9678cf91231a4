//go:build browser

package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/llama"
	"github.com/x/llama/engine"
	"github.com/x/llama/internal/testenv"
)

// TestWebUIGemmaChat chats with Gemma 3 270M (with Gemma 3's template, as
// the differential suite) in the built-in page, as a user would: two
// messages typed and sent, each reply the greedy answer the API gives for
// the same conversation. It keeps a screenshot of the conversation:
// testdata/webui-gemma-screenshot.png with -update, else in
// $LLAMA_TEST_ARTIFACTS or the system's temporary folder, and logs where.
func TestWebUIGemmaChat(t *testing.T) {
	model := testenv.RealModel(t, "gemma3-270m")
	_, ts := newTestServer(t, Options{Model: model, ChatTemplateFile: gemmaTemplateFile(t), Jinja: true,
		Engine: engine.Options{Parallel: 1, Context: llama.ContextOptions{ContextSize: 2048}}})
	ctx := openPage(t, ts.URL+"/")
	do(t, ctx,
		js(`localStorage.setItem('llama-ui.settings', JSON.stringify({temperature: 0, max_tokens: 48}))`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("input")),
		waitJS(`document.body.dataset.ready === '1' && document.getElementById('model-name').textContent !== ''`),
	)
	assert.Equal(t, "gemma-3-270m-q4_k_m.gguf", text(t, ctx, "#model-name"))

	var history []map[string]string
	for _, msg := range []string{"What is the capital of France?", "And of Italy?"} {
		reply := sendMessage(t, ctx, msg)
		require.Empty(t, reply.Error)
		require.NotEmpty(t, reply.Content)
		history = append(history, map[string]string{"role": "user", "content": msg})
		want := chatContent(t, ts.URL+"/v1/chat/completions", map[string]any{
			"messages": history, "temperature": 0, "max_tokens": 48})
		assert.Equal(t, want, reply.Content, "reply to %q", msg)
		history = append(history, map[string]string{"role": "assistant", "content": reply.Content})
	}
	shown := text(t, ctx, ".msg.assistant:last-of-type .content")
	assert.Equal(t, strings.Join(strings.Fields(history[3]["content"]), " "), strings.Join(strings.Fields(shown), " "))

	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NotEmpty(t, png)
	dir := os.Getenv("LLAMA_TEST_ARTIFACTS")
	if updatingGolden() {
		dir = "testdata"
	} else if dir == "" {
		dir = os.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "webui-gemma-screenshot.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot of the Gemma chat: %s", path)
}
